package failover

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestWatchCutOffNoFailover: a watcher whose own path to the primary is
// cut (its Dial knob refuses the primary's address) for longer than
// --after, while the replica still replicates from it, does not fail the
// group over and says why; once the path is back it says the primary
// answers again. The in-process twin of hbctl's TestWatchNoFailover (c).
func TestWatchCutOffNoFailover(t *testing.T) {
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 1)
	writeSome(t, g, 1)
	var cut atomic.Bool
	primary := sqldb.Addr(g.Primary.DSN)
	r := New(cfg)
	r.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if cut.Load() && addr == primary {
			return nil, errors.New("cut off (test)")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	o := WatchOptions{After: time.Second, Interval: 100 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond}
	ws := []*Watcher{r.NewWatcher(r.SetTarget(meta, name), o, log, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Watch(ctx, log, o, ws) }()
	t.Cleanup(func() { cancel(); <-done })

	waitLogged(t, logs, "armed: every replica replicates from the primary", 30*time.Second)
	cut.Store(true)
	waitLogged(t, logs, "no failover: replica "+sqldb.Addr(g.Replicas[0].DSN)+" still receives from it", 10*time.Second)
	time.Sleep(o.After)
	cut.Store(false)
	waitLogged(t, logs, "the primary answers again", 10*time.Second)
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "failing over") || strings.Contains(e.Message, "promoted") {
			t.Errorf("the watcher failed over: %s", e.Message)
		}
	}
	if got := metaPrimary(t, meta, name); got != g.Primary.AppDSN() {
		t.Errorf("SET %s's primary is %s; want %s, unchanged", name, sqldb.Addr(got), primary)
	}
	cancel()
	<-done
	waitLogged(t, logs, "stopped", time.Second)
}

// waitLogged waits until a logged message holds want, failing the test
// after within.
func waitLogged(t *testing.T, logs *observer.ObservedLogs, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, e := range logs.All() {
			if strings.Contains(e.Message, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			var all []string
			for _, e := range logs.All() {
				all = append(all, e.Message)
			}
			t.Fatalf("no log message holds %q after %v:\n%s", want, within, strings.Join(all, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
