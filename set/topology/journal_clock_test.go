package topology_test

import (
	"context"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestMoveLeaseAcrossSkewedHosts: a move's lease is judged on one clock,
// the meta database's. A mover whose host is 5 min behind records a
// 2-second lease; the source's servers, 5 min ahead and on time, do not
// see the move as stuck while the lease runs (with the leases written on
// the mover's clock every server saw it as long gone, and sent the live
// move back), and see it once it ran out.
func TestMoveLeaseAcrossSkewedHosts(t *testing.T) {
	ctx := context.Background()
	meta := freshMeta(t)
	if _, err := topology.Init(ctx, meta, []topology.Set{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	const skew, lease = 5 * time.Minute, 2 * time.Second
	journal := func(offset time.Duration) *topology.Journal {
		t.Helper()
		j, err := topology.NewJournal(ctx, meta, func() time.Time { return time.Now().Add(offset) })
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	mover := journal(-skew)
	r, err := mover.Create(ctx, "apply", 0, "one move", []topology.Move{{Bucket: hongbao.Bucket(7), From: "a", To: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	m := &r.Moves[0]
	m.Step = topology.Disowning
	if err := mover.Record(ctx, m, lease); err != nil {
		t.Fatal(err)
	}
	recorded := time.Now()
	servers := map[string]*topology.Journal{"on time": journal(0), "5 min ahead": journal(skew), "5 min behind": journal(-skew)}
	for name, j := range servers {
		stuck, err := j.Stuck(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(stuck) != 0 && time.Since(recorded) < lease {
			t.Errorf("a server %s sees the move stuck %v after a %v lease was taken: %+v", name, time.Since(recorded), lease, stuck)
		}
	}
	time.Sleep(time.Until(recorded.Add(lease + 500*time.Millisecond)))
	for name, j := range servers {
		stuck, err := j.Stuck(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(stuck) != 1 || stuck[0].Bucket != 7 {
			t.Errorf("a server %s, after the lease ran out: stuck %+v, want bucket 7's move", name, stuck)
		}
	}
}
