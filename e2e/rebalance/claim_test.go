package rebalance_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/move"
)

// TestMoveKilledAtClaim is issue 23's second measured check, from the
// outside: a mover killed between the target's claim and the source's
// commit (a knob's kill at move.StepClaimed) leaves a claim on the target's fence;
// the source rolled back and serves the bucket. Three more opens go to
// the source, then the packet expires. Every opener must be credited
// exactly what it was answered, the sender refunded exactly what the
// source holds (the true remaining, not the target's stale copy), no
// outbox row may be left stuck, the stale claim must be gone, and hbctl
// verify must pass.
func TestMoveKilledAtClaim(t *testing.T) {
	const expiry = 25 * time.Second
	c := clustertest.Start(t, clustertest.Options{Sets: 3, Expiry: expiry, SweepAfter: 2 * time.Second, DevGrant: 1_000_000})
	a, target := c.Sets[0].Name, c.Sets[2].Name
	bucket := ctltest.BucketsOf(t, c, a)[5]
	sent := time.Now()
	id, shares := ctltest.SendInto(t, c, bucket, 10, 2)
	// The claim is counted as the mover dies: the target's servers delete
	// a stale claim within seconds, and on a loaded machine the kill's
	// return (the mover's pools closing) may take that long.
	claims, countErr := -1, error(nil)
	kill := move.Knobs{At: func(ctx context.Context, step string) error {
		if step != move.StepClaimed {
			return nil
		}
		countErr = c.DB(target).QueryRowContext(ctx, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", target, int(bucket)).Scan(&claims)
		return ctltest.ErrKilled
	}}
	if err := ctltest.MoveIn(c, bucket, target, kill); !errors.Is(err, ctltest.ErrKilled) {
		t.Fatalf("mover killed at claimed: %v", err)
	}
	if countErr != nil || claims != 1 {
		t.Fatalf("the kill at claimed left %d claims of bucket %d on SET %s (%v), want 1 (the fault point moved?)", claims, bucket, target, countErr)
	}
	cl := c.Client.Retrying(10 * time.Second)
	for range 3 {
		u := ctltest.User()
		o := cl.Open(u, id.String())
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open after the kill: %v", o)
		}
		shares[u] = o.Body.Amount
	}
	if got := ctltest.OwnerOf(t, c, bucket); got != a {
		t.Fatalf("bucket %d is on %s after the kill at claimed, want %s (the source kept it)", bucket, got, a)
	}
	truth := dbtest.ReadPacket(t, c.DB(a), id)
	if truth == nil || truth.RemainingCount != 5 {
		t.Fatalf("the source holds %+v, want packet %s with 5 shares left", truth, id)
	}
	ctltest.SameShares(t, "on the source", truth.Shares, shares)

	// Past the expiry, the settlers refund; wait for the refund and every
	// outbox to drain (a row stuck there is the bug).
	time.Sleep(time.Until(sent.Add(expiry)))
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, refunded, err := c.Wallet().Entry(ctx, hongbao.RefundKey(id))
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, s := range c.Sets {
			left += dbtest.Count(t, c.DB(s.Name), "SELECT COUNT(*) FROM hb_set.outbox")
		}
		if refunded && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, s := range c.Sets {
				rows := dbtest.Count(t, c.DB(s.Name), "SELECT COUNT(*) FROM hb_set.outbox")
				t.Logf("SET %s: %d outbox rows", s.Name, rows)
			}
			t.Fatalf("60 s after packet %s expired: refunded %v, %d outbox rows left", id, refunded, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	refund, _, err := c.Wallet().Entry(ctx, hongbao.RefundKey(id))
	if err != nil {
		t.Fatal(err)
	}
	if refund.User != truth.Sender || refund.Amount != truth.RemainingAmount {
		t.Errorf("refund of %s: %d fen to %s, want the true remaining %d fen to the sender %s", id, refund.Amount, refund.User,
			truth.RemainingAmount, truth.Sender)
	}
	for u, amount := range shares {
		if got, err := c.Wallet().Balance(ctx, u); err != nil || got != amount {
			t.Errorf("opener %s: balance %d (%v), was answered %d", u, got, err, amount)
		}
	}
	if n := dbtest.Count(t, c.DB(target), "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", target, int(bucket)); n != 0 {
		t.Errorf("SET %s still claims bucket %d (owned by %s)", target, bucket, a)
	}
	c.CheckInvariants(t)

	// The move sent back to catching up is finished by the next apply:
	// its claim is made again and kept.
	out := c.MustCtl(t, "rebalance", "apply")
	if got := ctltest.OwnerOf(t, c, bucket); got != target {
		t.Fatalf("after apply bucket %d is on %s, want %s\n%s", bucket, got, target, out)
	}
	time.Sleep(time.Second) // two rounds of the servers' stale-claim removal
	if n := dbtest.Count(t, c.DB(target), "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", target, int(bucket)); n != 1 {
		t.Errorf("after the move SET %s has %d claims of bucket %d, want 1", target, n, bucket)
	}
	ctltest.SameShares(t, "on the target", ctltest.SharesOn(t, c, target, id), shares)
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// TestMoveLostItsJournalStep: a move whose journal step was taken from
// it during its handover (set back to catching_up while the mover was at
// its claim; the servers' RetryStuck no longer does this, the test does
// it by hand) is not recorded published when its publish finds nothing to
// publish: hbctl fails saying so, and the source's copy is kept (a
// cleanup would delete the only copy the topology names); the next apply
// finishes the move.
func TestMoveLostItsJournalStep(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	bucket := ctltest.BucketsOf(t, c, a)[9]
	id, _ := ctltest.SendInto(t, c, bucket, 10, 2)
	knobs, pause := ctltest.PauseAt(move.StepClaimed)
	t.Cleanup(pause.Release)
	done := make(chan error, 1)
	go func() { done <- ctltest.MoveIn(c, bucket, b, knobs) }()
	pause.Wait(t, done, "the move")
	if _, err := c.Meta().Exec("UPDATE hb_meta.moves SET step = 'catching_up', lease_until = NULL WHERE bucket = ? AND step = 'disowning'", int(bucket)); err != nil {
		t.Fatal(err)
	}
	pause.Release()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "not published") {
		t.Fatalf("the mover after its move lost its step: %v, want a failure saying it was not published", err)
	}
	time.Sleep(4 * time.Second) // past the 3 s grace a cleanup would have waited
	if dbtest.ReadPacket(t, c.DB(a), id) == nil {
		t.Errorf("the source's copy of packet %s was deleted, the topology still naming %s", id, ctltest.OwnerOf(t, c, bucket))
	}
	if st := ctltest.RebalanceStatus(t, c); len(st.List) != 1 || st.List[0].Step == "published" || st.List[0].Step == "done" {
		t.Errorf("journal: %v %+v; want the move not recorded published", st, st.List)
	}
	// As the error says, the next apply finishes the move.
	out := c.MustCtl(t, "rebalance", "apply")
	if got := ctltest.OwnerOf(t, c, bucket); got != b {
		t.Fatalf("after apply bucket %d is on %s, want %s\n%s", bucket, got, b, out)
	}
	u := ctltest.User()
	if o := c.Client.Retrying(10*time.Second).Open(u, id.String()); o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
		t.Errorf("open after the move: %v", o)
	}
	if p := dbtest.ReadPacket(t, c.DB(b), id); p == nil || len(p.Shares) != 3 {
		t.Errorf("the target holds %+v, want packet %s with 3 shares", p, id)
	}
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}
