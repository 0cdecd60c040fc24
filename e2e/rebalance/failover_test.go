package rebalance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestMoveFollowsFailover is issue 23's finding 4: a failover of a SET
// during a rebalance apply of two moves between it and another. The old
// primary is paused (SIGSTOP), as a hung machine: a mover that kept it
// would wait for ever on its next statement there. The mover must follow
// the topology to the promoted primary: the apply finishes, or fails with
// an error and `rebalance apply` again finishes it; every share is on the
// target with its amount, and verify passes.
//
//   - into b, b failing over while the first move is frozen (the mover
//     paused after the source's fence was taken, its pools opened on b's
//     primary), so also before the second begins;
//   - out of b, b failing over at the claim (the source's release not
//     committed, its transaction open on b's old primary): that commit
//     fails at once, the source's servers send the move back (the
//     promoted primary still has the fence row), the target's servers
//     drop its claim, and the next apply moves the bucket.
func TestMoveFollowsFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		out      bool   // moves out of b (else into b)
		pausedAt string // the fault point at which b fails over
	}{
		{"into b, frozen", false, "frozen"},
		{"out of b, claimed", true, "claimed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000, Replicated: []string{"b"}, Replicas: 2})
			from, to := c.Sets[0].Name, c.Set("b").Name
			if tc.out {
				from, to = to, from
			}
			moves, packets := twoMoves(t, c, from, to)
			knobs, pause := ctltest.PauseAt(tc.pausedAt)
			t.Cleanup(pause.Release)
			done := make(chan error, 1)
			go func() { done <- ctltest.ApplyIn(c, knobs) }()
			pause.Wait(t, done, "the apply")
			b := c.Set("b")
			if err := b.Group.Primary.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Group.Primary.Resume() })
			c.MustCtl(t, "set", "failover", b.Name)
			pause.Release()
			select {
			case err := <-done:
				if err != nil {
					t.Logf("the apply failed after the failover (resumed below): %v", err)
					if !strings.Contains(err.Error(), "primary changed during the move") {
						t.Errorf("the apply's failure does not say a failover cut it: %v", err)
					}
					resume(t, c)
				}
			case <-time.After(90 * time.Second):
				t.Fatalf("the apply did not end 90 s after the failover of SET b: stuck on the old primary")
			}
			if m := c.Follow(t, b.Name); m == b.Group.Primary {
				t.Fatal("SET b's MySQL is still its old primary after the failover")
			}
			if st := ctltest.RebalanceStatus(t, c); st.State != "done" || st.Done != 2 {
				t.Errorf("after the apply: %v", st)
			}
			for _, m := range moves {
				if got := ctltest.OwnerOf(t, c, m.Bucket); got != to {
					t.Errorf("bucket %d is on %s, want %s", m.Bucket, got, to)
				}
			}
			for id, shares := range packets {
				u := ctltest.User()
				o := c.Client.Retrying(20*time.Second).Open(u, id.String())
				if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
					t.Fatalf("open after the move: %v", o)
				}
				shares[u] = o.Body.Amount
				ctltest.SameShares(t, "on the target", ctltest.SharesOn(t, c, to, id), shares)
				if n := len(ctltest.SharesOn(t, c, to, id)); n != len(shares) {
					t.Errorf("the target holds %d shares of %s, %d were answered", n, id, len(shares))
				}
			}
			ctltest.WaitOutbox(t, c)
			c.CheckInvariants(t)
		})
	}
}

// twoMoves sends a packet (3 of 10 shares opened) into each of two
// buckets of SET from and journals a rebalance moving both to SET to, for
// `rebalance apply` to continue. It returns the moves and the packets'
// answered shares.
func twoMoves(t *testing.T, c *clustertest.Cluster, from, to string) ([]topology.Move, map[hongbao.PacketID]map[hongbao.UserID]int64) {
	t.Helper()
	ctx := context.Background()
	var moves []topology.Move
	packets := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	for _, bucket := range ctltest.BucketsOf(t, c, from)[4:6] {
		id, shares := ctltest.SendInto(t, c, bucket, 10, 3)
		packets[id] = shares
		moves = append(moves, topology.Move{Bucket: bucket, From: from, To: to})
	}
	j, err := topology.NewJournal(ctx, c.Meta(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Create(ctx, "apply", 0, "two moves", moves); err != nil {
		t.Fatal(err)
	}
	return moves, packets
}

// resume runs `rebalance apply` until it succeeds: a move the failover
// interrupted at its handover is sent back to catching up by its source's
// servers once the mover's one-second lease has run out; until then apply
// may stop on it again (for at most 30 s).
func resume(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.Ctl("rebalance", "apply")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebalance apply after the failover: %v\n%s", err, out)
		}
		t.Logf("rebalance apply: %v (again)", err)
		time.Sleep(time.Second)
	}
}
