package replication_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// TestLagPartitionedReplica: a replica whose link to the primary is cut by
// the network (a partition: the TCP connection stays open, nothing
// arrives, so its IO thread still says Slave_IO_Running Yes and
// Seconds_Behind_Master 0 until slave_net_timeout) is reported not fresh
// within a couple of seconds of the primary writing what it lacks, and
// fresh again once the link heals. A primary that writes nothing leaves a
// replica that has everything fresh. Issue 23, finding 8.
func TestLagPartitionedReplica(t *testing.T) {
	// A semi-sync timeout: the primary goes on committing once its replica
	// is cut off (asynchronously), as it must for the replica to fall
	// behind while the test writes.
	g := dbtest.StartReplicated(t, 300*time.Millisecond, 1)
	ctx, cancel := context.WithCancel(context.Background())
	primary, replicaRoot := dbtest.Open(t, g.Primary.DSN, 2), dbtest.Open(t, g.Replicas[0].DSN, 2)
	proxy := dbtest.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", g.Primary.Port))
	src := g.Source(g.Primary)
	src.Port = proxy.Port()
	if err := replication.Follow(ctx, replicaRoot, src, false); err != nil {
		t.Fatal(err)
	}
	status := func() replication.Status {
		t.Helper()
		st, err := replication.ReplicaStatus(ctx, replicaRoot)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitUntil(t, "the replica connected through the proxy", func() bool { st := status(); return st.IORunning == "Yes" && st.SQLRunning == "Yes" })
	if _, err := primary.Exec("CREATE DATABASE lagtest"); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Exec("CREATE TABLE lagtest.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, at DATETIME(6))"); err != nil {
		t.Fatal(err)
	}

	lag := newLag(t, g, time.Second)
	done := make(chan struct{})
	go func() { lag.Run(ctx, 100*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitUntil(t, "fresh while idle", lag.Fresh)

	writes := make(chan struct{})
	go func() { // the primary writes every 50 ms until the test ends
		defer close(writes)
		for tick := time.NewTicker(50 * time.Millisecond); ctx.Err() == nil; <-tick.C {
			if _, err := primary.ExecContext(ctx, "INSERT INTO lagtest.t (at) VALUES (NOW(6))"); err != nil && ctx.Err() == nil {
				t.Errorf("write on the primary: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-writes })
	waitUntil(t, "fresh while the primary writes", lag.Fresh)

	proxy.Partition()
	cut := time.Now()
	var staleAfter time.Duration
	for deadline := cut.Add(8 * time.Second); lag.Fresh(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			st := status()
			t.Fatalf("still fresh %s after the partition: the replica says IO %s, SQL %s, Seconds_Behind_Master %s (known %v)",
				time.Since(cut).Round(time.Millisecond), st.IORunning, st.SQLRunning, st.Lag, st.LagKnown)
		}
	}
	staleAfter = time.Since(cut)
	st := status()
	t.Logf("not fresh %s after the partition; the replica says IO %s, Seconds_Behind_Master %s", staleAfter.Round(time.Millisecond), st.IORunning, st.Lag)
	if st.IORunning != "Yes" {
		t.Errorf("the replica's IO thread says %s: the partition was noticed, this test no longer shows a replica that believes it is connected", st.IORunning)
	}

	proxy.Heal()
	waitUntil(t, "fresh again after the link healed", lag.Fresh)
}
