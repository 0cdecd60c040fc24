package replication_test

import (
	"context"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// waitUntil polls cond every 20 ms for up to 15 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestLag: Lag reports a replica fresh while both its threads run within
// the allowed lag, unfit when it stops applying, and fit again after.
func TestLag(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	root := dbtest.Open(t, g.Replicas[0].DSN, 4)
	ctx, cancel := context.WithCancel(context.Background())
	lag := newLag(t, g, time.Second)
	done := make(chan struct{})
	go func() { lag.Run(ctx, 20*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	waitUntil(t, "fresh", lag.Fresh)
	if _, err := root.Exec("STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "unfit after STOP SLAVE SQL_THREAD", func() bool { return !lag.Fresh() })
	if _, err := root.Exec("START SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "fresh again", lag.Fresh)

	st, err := replication.ReplicaStatus(ctx, dbtest.Open(t, g.Primary.AppDSN(), 4))
	if err != nil || st.Fresh(time.Hour) {
		t.Errorf("a primary's status %+v, %v: fresh, want unfit (it replicates from nobody)", st, err)
	}
}
