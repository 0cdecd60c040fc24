package rebalance_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestMoveKilledAtEachStep: hbctl killed (as by kill -9) at each step of
// a bucket's move leaves the bucket served — by the source before the
// source gave it up, by the target after (the source's servers publish a
// move whose mover died in between) — and `hbctl rebalance apply` then
// finishes the move: every share answered before, during and after is
// on the target with its amount, the source's copy is deleted, and hbctl
// verify holds.
func TestMoveKilledAtEachStep(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	own := ctltest.BucketsOf(t, c, a)
	cl := c.Client.Retrying(10 * time.Second)
	for i, step := range []string{"copying", "frozen", "disowning", "published"} {
		t.Run(step, func(t *testing.T) {
			bucket := own[7*i+3]
			id, shares := ctltest.SendInto(t, c, bucket, 10, 3)
			if err := ctltest.MoveIn(c, bucket, b, ctltest.KillAt(step)); !errors.Is(err, ctltest.ErrKilled) {
				t.Fatalf("mover killed at %s: %v", step, err)
			}
			killed := time.Now()
			u := ctltest.User()
			o := cl.Open(u, id.String())
			if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
				t.Fatalf("open right after the kill at %s: %v", step, o)
			}
			shares[u] = o.Body.Amount
			t.Logf("killed at %s: the next open answered after %v", step, o.Answered.Sub(killed).Round(time.Millisecond))
			want := a
			if step == "disowning" || step == "published" {
				want = b // published: by the mover, or by a's servers for it
			}
			if got := ctltest.OwnerOf(t, c, bucket); got != want {
				t.Errorf("after the kill at %s bucket %d is on %s, want %s", step, bucket, got, want)
			}

			out := c.MustCtl(t, "rebalance", "apply")
			if st := ctltest.RebalanceStatus(t, c); st.State != "done" || st.Done != 1 {
				t.Errorf("after apply: %v\n%s", st, out)
			}
			if got := ctltest.OwnerOf(t, c, bucket); got != b {
				t.Fatalf("after apply bucket %d is on %s, want %s", bucket, got, b)
			}
			ctltest.SameShares(t, "on the target", ctltest.SharesOn(t, c, b, id), shares)
			if n := len(ctltest.SharesOn(t, c, b, id)); n != len(shares) {
				t.Errorf("the target holds %d shares of %s, %d were answered", n, id, len(shares))
			}
			if left := dbtest.ReadPacket(t, c.DB(a), id); left != nil {
				t.Errorf("the source still holds packet %s after the move finished", id)
			}
			u = ctltest.User()
			if o := cl.Open(u, id.String()); o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
				t.Errorf("open after the move: %v", o)
			}
		})
	}
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// TestMoveStopsOnVerifyMismatch: a row changed on the target under the
// freeze (after the last copy, before the verify) stops the move: hbctl
// fails naming the table, the journal records the move failed with the
// difference, the bucket stays on the source, which keeps serving it.
func TestMoveStopsOnVerifyMismatch(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	bucket := ctltest.BucketsOf(t, c, a)[11]
	id, shares := ctltest.SendInto(t, c, bucket, 10, 4)
	knobs, pause := ctltest.PauseAt(topology.Frozen)
	t.Cleanup(pause.Release)
	done := make(chan error, 1)
	go func() { done <- ctltest.MoveIn(c, bucket, b, knobs) }()
	pause.Wait(t, done, "the move to the freeze")
	_, details := dbtest.Tables(t, id)
	if _, err := c.DB(b).Exec("UPDATE "+details+" SET amount = amount + 1 WHERE packet_id = ? LIMIT 1", id); err != nil {
		t.Fatal(err)
	}
	pause.Release()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "differs") || !strings.Contains(err.Error(), details) {
		t.Fatalf("the mover after a tampered target: %v, want a failure naming %s", err, details)
	}
	if got := ctltest.OwnerOf(t, c, bucket); got != a {
		t.Fatalf("bucket %d is on %s after the failed move, want %s", bucket, got, a)
	}
	st := ctltest.RebalanceStatus(t, c)
	if st.State != "failed" || len(st.List) != 1 || st.List[0].Step != "failed" || !strings.Contains(st.List[0].Error, details) {
		t.Errorf("journal after the failed move: %v %+v", st, st.List)
	}
	u := ctltest.User()
	o := c.Client.Retrying(10*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
		t.Fatalf("open on the source after the failed move: %v", o)
	}
	shares[u] = o.Body.Amount
	ctltest.SameShares(t, "on the source", ctltest.SharesOn(t, c, a, id), shares)
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}
