package rebalance_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/etcdtest"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestMoverTakesTheBucketLease: with etcd configured, a move of a bucket
// whose lease another actor holds (a mover on another host) is refused
// and changes nothing; a mover whose lease is lost in the freeze (it
// was paused past the TTL, or cut off from the etcd quorum, and another
// actor took the bucket) stops before its verify and claim: the source keeps the bucket and no
// claim is left on the target. A mover that hangs in its freeze (its
// host alive) freezes the bucket's writes for its FreezeIdle only: MariaDB
// closes the quiet session, the freeze rolls back and the source serves;
// the move fails and a later apply moves the bucket.
func TestMoverTakesTheBucketLease(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Sets: 2, DevGrant: 1_000_000})
	etcd := etcdtest.Start(t, 3)
	ctx := context.Background()
	dial := func() *lease.Client {
		lc, err := lease.Dial(ctx, etcd.Endpoints(), lease.Options{TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lc.Close() })
		return lc
	}
	a, b := c.Sets[0].Name, c.Sets[1].Name
	buckets := ctltest.BucketsOf(t, c, a)
	moveWith := func(bucket int, knobs move.Knobs, tune ...func(*move.Mover)) error {
		op, err := ctltest.Operator(c)
		if err != nil {
			return err
		}
		defer op.Close()
		op.Leases, op.Holder = dial(), "the test's mover"
		top, err := topology.Load(ctx, op.Meta)
		if err != nil {
			return err
		}
		mv := op.Mover(1, 2500*time.Millisecond)
		mv.Knobs = knobs
		for _, f := range tune {
			f(mv)
		}
		return op.MoveBucket(ctx, mv, buckets[bucket], top.Owner(buckets[bucket]).Name, b)
	}
	// finish applies the rebalance a stopped move left unfinished, with
	// leases, once nobody else holds the bucket: it must move it.
	finish := func(t *testing.T, bucket int) {
		t.Helper()
		op, err := ctltest.Operator(c)
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		op.Leases, op.Holder = dial(), "the test's second mover"
		r, err := op.Journal.Unfinished(ctx)
		if err != nil || r == nil {
			t.Fatalf("the stopped move left no unfinished rebalance: %v %v", r, err)
		}
		if err := op.Mover(1, 2500*time.Millisecond).Apply(ctx, r); err != nil {
			t.Fatalf("apply after the other actor was gone: %v", err)
		}
		if got := ctltest.OwnerOf(t, c, buckets[bucket]); got != b {
			t.Errorf("bucket %d is on %s after the apply, want %s", buckets[bucket], got, b)
		}
	}

	t.Run("held elsewhere", func(t *testing.T) {
		ctltest.SendInto(t, c, buckets[0], 5, 1)
		other, err := dial().TryAcquire(ctx, "bucket/"+strconv.Itoa(int(buckets[0])), "a mover on host 2")
		if err != nil {
			t.Fatal(err)
		}
		err = moveWith(0, move.Knobs{})
		if !errors.Is(err, lease.ErrBusy) {
			t.Fatalf("a move of a leased bucket: %v, want lease.ErrBusy", err)
		}
		if got := ctltest.OwnerOf(t, c, buckets[0]); got != a {
			t.Errorf("bucket %d is on %s after a refused move, want %s", buckets[0], got, a)
		}
		if n := dbtest.Count(t, c.DB(b), "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", b, int(buckets[0])); n != 0 {
			t.Errorf("a refused move left %d claims on %s", n, b)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
		finish(t, 0)
	})

	t.Run("lost in the freeze", func(t *testing.T) {
		ctltest.SendInto(t, c, buckets[1], 5, 1)
		taker := dial()
		name := "bucket/" + strconv.Itoa(int(buckets[1]))
		err := moveWith(1, move.Knobs{At: func(_ context.Context, step string) error {
			if step == topology.Frozen {
				if _, err := taker.Revoke(ctx, name); err != nil { // what its expiry does
					return err
				}
				if _, err := taker.TryAcquire(ctx, name, "another mover"); err != nil {
					return err
				}
			}
			return nil
		}})
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("a mover that lost its lease: %v, want lease.ErrLost", err)
		}
		if got := ctltest.OwnerOf(t, c, buckets[1]); got != a {
			t.Errorf("bucket %d is on %s after the mover lost its lease, want %s", buckets[1], got, a)
		}
		if n := dbtest.Count(t, c.DB(b), "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", b, int(buckets[1])); n != 0 {
			t.Errorf("a mover that lost its lease left %d claims on %s", n, b)
		}
		if _, err := taker.Revoke(ctx, name); err != nil { // the other actor is gone
			t.Fatal(err)
		}
		finish(t, 1)
	})

	t.Run("hung in the freeze", func(t *testing.T) {
		ctltest.SendInto(t, c, buckets[2], 5, 1)
		var unfrozen time.Duration
		err := moveWith(2, move.Knobs{At: func(_ context.Context, step string) error {
			if step == topology.Frozen {
				// The mover hangs with the bucket frozen: its session goes
				// quiet, and a send into the bucket waits (busy, retried).
				began := time.Now()
				ctltest.SendInto(t, c, buckets[2], 5, 1)
				unfrozen = time.Since(began)
			}
			return nil
		}}, func(mv *move.Mover) { mv.FreezeIdle = 2 * time.Second })
		if err == nil {
			t.Fatal("a mover whose freeze's session ended while it hung moved the bucket")
		}
		if unfrozen > 8*time.Second {
			t.Errorf("writes into the bucket waited %v for the hung freeze, want about its FreezeIdle (2s)", unfrozen)
		}
		t.Logf("writes went through after %v of a hung freeze; the mover: %v", unfrozen, err)
		if got := ctltest.OwnerOf(t, c, buckets[2]); got != a {
			t.Errorf("bucket %d is on %s after the hung freeze, want %s", buckets[2], got, a)
		}
		finish(t, 2)
		c.CheckInvariants(t)
	})
}
