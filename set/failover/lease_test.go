package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/etcdtest"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// leases is a lease client on a fresh etcd cluster, closed when the test
// ends.
func leases(t *testing.T, c *etcdtest.Cluster) *lease.Client {
	t.Helper()
	lc, err := lease.Dial(context.Background(), c.Endpoints(), lease.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close() })
	return lc
}

// TestFailoverRefusedWhileAnotherActorLeases: an actor on another host
// holds SET b's lease in etcd (its MySQL lock could be on a database this
// actor cannot reach): a failover here is refused with ErrBusy naming
// it, and fences, stops and promotes nothing.
func TestFailoverRefusedWhileAnotherActorLeases(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.Start(t, 3)
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 1)
	other, err := leases(t, etcd).TryAcquire(ctx, "set/"+name, "hbwatch on host 2")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx) //nolint:errcheck // the test's end
	out := &syncBuffer{}
	r := testReparenter(cfg, out)
	r.Leases = leases(t, etcd)
	_, err = r.FailoverSet(ctx, meta, name, Options{SingleCopy: true})
	if !errors.Is(err, ErrBusy) || !contains(err.Error(), "hbwatch on host 2") {
		t.Fatalf("failover beside another actor's lease: %v, want ErrBusy naming it\n%s", err, out)
	}
	if readOnly(t, g.Primary) {
		t.Error("the primary was fenced by a refused failover")
	}
	st, err := replication.ReplicaStatus(ctx, dbtest.Open(t, g.Replicas[0].DSN, 1))
	if err != nil || st.IORunning != "Yes" || !readOnly(t, g.Replicas[0]) {
		t.Errorf("the replica after a refused failover: %+v %v, read_only %v; want receiving and read-only", st, err, readOnly(t, g.Replicas[0]))
	}
	if got := metaPrimary(t, meta, name); got != g.Primary.AppDSN() {
		t.Errorf("a refused failover published %s", sqldb.Addr(got))
	}
}

// TestFailoverStopsWhenLeaseLost: the failover's lease is lost after the
// fence (its keep-alive stalled past the TTL, as for an actor paused or
// cut off from the etcd quorum, and another actor took the group): it
// stops before stopping the replicas, with ErrLost, and promotes and
// publishes nothing.
func TestFailoverStopsWhenLeaseLost(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.Start(t, 3)
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 1)
	writeSome(t, g, 3)
	out := &syncBuffer{}
	r := testReparenter(cfg, out)
	r.Leases = leases(t, etcd)
	taker := leases(t, etcd)
	r.Hook = func(step string) error {
		if step != StepStop {
			return nil
		}
		// Revoke the lease behind the actor's back: what its expiry does.
		if _, err := taker.Revoke(ctx, "set/"+name); err != nil {
			t.Errorf("revoke: %v", err)
		}
		if _, err := taker.TryAcquire(ctx, "set/"+name, "another actor"); err != nil {
			t.Errorf("another actor could not take the lease after it was lost: %v", err)
		}
		return nil
	}
	_, err := r.FailoverSet(ctx, meta, name, Options{SingleCopy: true})
	t.Logf("failover: %v\n%s", err, out)
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the failover went on after losing its lease: %v; want lease.ErrLost", err)
	}
	st, err := replication.ReplicaStatus(ctx, dbtest.Open(t, g.Replicas[0].DSN, 1))
	if err != nil || st.IORunning != "Yes" || !readOnly(t, g.Replicas[0]) {
		t.Errorf("replica after the lease was lost: %+v %v; want still receiving and read-only", st, err)
	}
	if got := metaPrimary(t, meta, name); got != g.Primary.AppDSN() {
		t.Errorf("published %s after the lease was lost", sqldb.Addr(got))
	}
}

// TestFailoverTakesOverAHungHoldersLock: a process that holds SET b's
// failover lock in the meta database but no longer its lease (paused or
// hung past the TTL, its connection alive) blocks a failover without
// etcd (ErrFailoverBusy, nothing done); with etcd the actor that takes the
// lease kills that connection, takes the lock over, says so and fails the
// SET over.
func TestFailoverTakesOverAHungHoldersLock(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.Start(t, 3)
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 1)
	hung, err := meta.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	var got int
	if err := hung.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", "hb_failover:"+name).Scan(&got); err != nil || got != 1 {
		t.Fatalf("the hung holder's lock: %d %v", got, err)
	}

	out := &syncBuffer{}
	if _, err := testReparenter(cfg, out).FailoverSet(ctx, meta, name, Options{SingleCopy: true}); !errors.Is(err, topology.ErrFailoverBusy) {
		t.Fatalf("failover without etcd beside the held lock: %v, want ErrFailoverBusy\n%s", err, out)
	}
	if readOnly(t, g.Primary) || metaPrimary(t, meta, name) != g.Primary.AppDSN() {
		t.Fatal("a refused failover fenced or published")
	}

	r := testReparenter(cfg, out)
	r.Leases = leases(t, etcd)
	if _, err := r.FailoverSet(ctx, meta, name, Options{SingleCopy: true}); err != nil {
		t.Fatalf("failover holding the lease: %v\n%s", err, out)
	}
	if !contains(out.String(), "which holds no lease: that connection was killed and the lock taken over") {
		t.Errorf("the takeover was not said:\n%s", out)
	}
	if got := metaPrimary(t, meta, name); got != g.Replicas[0].AppDSN() {
		t.Errorf("SET %s's primary is %s, want the replica %s", name, sqldb.Addr(got), sqldb.Addr(g.Replicas[0].AppDSN()))
	}
	if err := hung.PingContext(ctx); err == nil {
		t.Error("the hung holder's connection still answers")
	}
}
