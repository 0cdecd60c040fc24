package verify_test

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestVerifyDuringHandover: a bucket's move paused in its handover, where
// verify's per-SET snapshots used to count the bucket twice: between the
// target's fence claim and the commit of the source's release (both
// fences hold the bucket: the topology's owner, the source, counts it) and
// after the release, before the publish (only the target's fence holds
// it: the target counts it). verify passes there, and a share changed in
// the copy that counts makes it fail naming the packet; once the move
// ends it passes again.
func TestVerifyDuringHandover(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	own := ctltest.BucketsOf(t, c, a)
	for i, tc := range []struct {
		step    string // the mover's pause point
		fences  int    // fences holding the bucket there
		counted string // the SET whose copy verify counts there
	}{
		{"claimed", 2, a},
		{"disowning", 1, b},
	} {
		t.Run(tc.step, func(t *testing.T) {
			bucket := own[20+i]
			id, _ := ctltest.SendInto(t, c, bucket, 10, 4)
			resume := pauseMove(t, c, bucket, b, tc.step)
			if got := fencesHolding(t, c, bucket); got != tc.fences {
				t.Fatalf("paused at %s: %d fences hold bucket %d, want %d", tc.step, got, bucket, tc.fences)
			}
			c.CheckInvariants(t)
			_, details := dbtest.Tables(t, id)
			tamper(t, c, c.DB(tc.counted).Exec, "UPDATE "+details+" SET amount = amount + 1 WHERE packet_id = ? LIMIT 1",
				"UPDATE "+details+" SET amount = amount - 1 WHERE packet_id = ? LIMIT 1", int64(id), "packet "+id.String())
			resume()
			if got := ctltest.OwnerOf(t, c, bucket); got != b {
				t.Fatalf("bucket %d on %s after the move, want %s", bucket, got, b)
			}
			c.CheckInvariants(t)
		})
	}
	t.Run("stuck", func(t *testing.T) { verifyRefusesAStuckHandover(t, c, own[30], a, b) })
}

// verifyRefusesAStuckHandover: a move journalled Disowning (no lease, so
// no server finishes it) whose source's fence gave bucket up while the
// target's does not hold it: no SET's copy can be trusted, and verify,
// after reading again for its 10 s, fails naming the bucket, never OK.
func verifyRefusesAStuckHandover(t *testing.T, c *clustertest.Cluster, bucket hongbao.Bucket, from, to string) {
	t.Helper()
	ctltest.SendInto(t, c, bucket, 10, 4)
	var version int64
	if err := c.DB(from).QueryRow("SELECT version FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", from, int(bucket)).Scan(&version); err != nil {
		t.Fatal(err)
	}
	exec := func(db interface {
		Exec(string, ...any) (sql.Result, error)
	}, q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(c.Meta(), `INSERT INTO hb_meta.moves (rebalance_id, bucket, from_set, to_set, step, updated_at, error)
		VALUES (999999, ?, ?, ?, 'disowning', NOW(3), '')`, int(bucket), from, to)
	exec(c.DB(from), "DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", from, int(bucket))
	out, err := c.Ctl("verify")
	exec(c.DB(from), "INSERT INTO hb_fence.owned (set_name, bucket, version) VALUES (?, ?, ?)", from, int(bucket), version)
	exec(c.Meta(), "DELETE FROM hb_meta.moves WHERE rebalance_id = 999999")
	if err == nil || strings.Contains(out, "OK: every invariant holds") ||
		!strings.Contains(out, "were being handed over") || !strings.Contains(out, strconv.Itoa(int(bucket))) {
		t.Errorf("verify with bucket %d stuck in its handover: %v, want an error naming it\n%s", bucket, err, out)
	}
	c.CheckInvariants(t)
}

// pauseMove starts the move of bucket to SET to in the test's process
// (as hbctl topology move), paused at step, and waits until it is there.
// resume lets it go on and waits for it to succeed.
func pauseMove(t *testing.T, c *clustertest.Cluster, bucket hongbao.Bucket, to, step string) (resume func()) {
	t.Helper()
	knobs, pause := ctltest.PauseAt(step)
	done := make(chan error, 1)
	go func() { done <- ctltest.MoveIn(c, bucket, to, knobs) }()
	// A test that fails while the move is paused lets it go on, so that
	// no mover waits after it.
	t.Cleanup(pause.Release)
	pause.Wait(t, done, "the move of bucket "+strconv.Itoa(int(bucket)))
	return func() {
		t.Helper()
		pause.Release()
		if err := <-done; err != nil {
			t.Fatalf("move of bucket %d to %s after the pause at %s: %v", bucket, to, step, err)
		}
	}
}

// fencesHolding counts the SETs whose fence holds bucket b now.
func fencesHolding(t *testing.T, c *clustertest.Cluster, b hongbao.Bucket) int {
	t.Helper()
	n := 0
	for _, s := range c.Sets {
		var one int
		if err := c.DB(s.Name).QueryRow("SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", s.Name, int(b)).Scan(&one); err != nil {
			t.Fatal(err)
		}
		n += one
	}
	return n
}
