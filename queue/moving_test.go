package queue

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// packetIn is packet n of bucket b.
func packetIn(t *testing.T, b, n int) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.NewPacketID(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), hongbao.Bucket(b), n)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// freezer fails every apply carrying a packet of bucket while frozen, as
// the store does when a move holds the bucket's fence, and counts them.
func freezer(rec *mergeRec, bucket hongbao.Bucket, frozen *atomic.Bool, refused *atomic.Int64) {
	rec.fail = func(ws []Work) error {
		for _, w := range ws {
			if w.ID.Bucket() == bucket && frozen.Load() {
				refused.Add(1)
				return hongbao.ErrMoving
			}
		}
		return nil
	}
}

// TestMovingBucketWaitsAlone: a merged transaction carrying a frozen
// bucket's packet fails; the other buckets' opens are applied at once
// without it, while the frozen packet's open waits for the freeze to end
// and is then applied: its client sees latency, not an error. The frozen
// bucket is remembered for a moment, so its worker's new submissions do
// not each cost a transaction.
func TestMovingBucketWaitsAlone(t *testing.T) {
	rec := newMergeRec()
	var frozen atomic.Bool
	var refused atomic.Int64
	frozen.Store(true)
	freezer(rec, 5, &frozen, &refused)
	m := newManager(t, Config{Size: 8, Batch: 32, Parallel: 1, Merge: 8, TxTimeout: 5 * time.Second}, rec.apply, nil)
	const u = 7
	out := make(chan pres, 4)
	moving, b6, b7 := packetIn(t, 5, 1), packetIn(t, 6, 1), packetIn(t, 7, 1)
	queueSingles(t, m, rec, packetIn(t, 9, 1), []hongbao.PacketID{moving, b6, b7}, u, out)
	close(rec.hold)
	others := collectByPacket(t, out, 3)
	for _, id := range []hongbao.PacketID{packetIn(t, 9, 1), b6, b7} {
		if r := others[id][u]; r.err != nil || r.res.Status != hongbao.Opened {
			t.Errorf("open of %s beside a moving bucket: %+v, %v", id, r.res, r.err)
		}
	}
	if _, ok := others[moving]; ok {
		t.Fatalf("the moving bucket's open was answered during the freeze: %+v", others[moving])
	}
	time.Sleep(300 * time.Millisecond)
	during := refused.Load()
	frozen.Store(false)
	got := collectByPacket(t, out, 1)[moving][u]
	if got.err != nil || got.res.Status != hongbao.Opened || got.res.Amount != share(moving, u) {
		t.Fatalf("open of the moved-then-thawed bucket: %+v, %v; want opened %d", got.res, got.err, share(moving, u))
	}
	// 300 ms of freeze: the merged call, its bucket's own, then about one
	// per movingFor (50 ms) at most.
	if during < 2 || during > 2+int64(300*time.Millisecond/movingFor)+2 {
		t.Errorf("%d applies refused during a 300 ms freeze, want 2..%d", during, 2+300*time.Millisecond/movingFor+2)
	}
}

// TestMovingLongerThanTxTimeout: a freeze that outlasts TxTimeout is
// answered ErrMoving (a busy answer, retried by the client), and nothing
// was applied for it.
func TestMovingLongerThanTxTimeout(t *testing.T) {
	rec := newMergeRec()
	close(rec.hold)
	var frozen atomic.Bool
	var refused atomic.Int64
	frozen.Store(true)
	freezer(rec, 5, &frozen, &refused)
	m := newManager(t, Config{Size: 8, Batch: 32, Parallel: 2, Merge: 8, TxTimeout: 300 * time.Millisecond}, rec.apply, nil)
	out := make(chan pres, 2)
	began := time.Now()
	submitTo(m, packetIn(t, 5, 1), 7, out)
	submitTo(m, packetIn(t, 6, 1), 7, out)
	got := collectByPacket(t, out, 2)
	if r := got[packetIn(t, 6, 1)][7]; r.err != nil || r.res.Status != hongbao.Opened {
		t.Errorf("open beside a moving bucket: %+v, %v", r.res, r.err)
	}
	r := got[packetIn(t, 5, 1)][7]
	if !errors.Is(r.err, hongbao.ErrMoving) || hongbao.Code(r.err) != "busy" {
		t.Fatalf("open of a bucket frozen past TxTimeout: %+v, %v; want ErrMoving (busy)", r.res, r.err)
	}
	if took := time.Since(began); took < 200*time.Millisecond || took > 5*time.Second { // 5 s: room for a loaded machine
		t.Errorf("answered busy after %v, want about TxTimeout (300 ms)", took)
	}
}
