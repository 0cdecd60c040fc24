package failover

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestWatchdogFollowsTheTopology: the watchdog watches every replicated
// SET of the topology as it changes, without a restart: a SET added with
// replicas is watched from the next refresh, one added without is not,
// and the watcher of a SET removed stops. It is not ready (Probed) before
// it read the topology and probed what it found.
func TestWatchdogFollowsTheTopology(t *testing.T) {
	ctx := context.Background()
	x, y, z := dbtest.UniqueName("x"), dbtest.UniqueName("y"), dbtest.UniqueName("z")
	dead := func() string { return fakeDSN(dbtest.FreePort(t)) }
	meta := testMeta(t, fakeSet(x, dead(), dead()))
	o := WatchOptions{After: time.Second, Interval: 50 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond}
	d := New(configs.Replication{}).NewWatchdog(meta, o, zap.NewNop(), nil)
	if d.Probed() {
		t.Fatal("probed before it read the topology")
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(run, 50*time.Millisecond) }()
	t.Cleanup(func() { stop(); <-done })

	watched := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(d.Watched(), want) || !d.Probed() {
			if time.Now().After(deadline) {
				t.Fatalf("watching %v (probed: %v), want %v", d.Watched(), d.Probed(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	watched(x)
	if _, err := topology.AddSet(ctx, meta, fakeSet(y, dead(), dead())); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.AddSet(ctx, meta, fakeSet(z, dead())); err != nil { // no replica: no failover to make
		t.Fatal(err)
	}
	watched(x, y)
	if _, err := topology.RemoveSet(ctx, meta, y); err != nil {
		t.Fatal(err)
	}
	watched(x)
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
	if w := strings.Join(d.Watched(), ","); w != x {
		t.Errorf("after the stop the watchdog lists %q", w)
	}
}
