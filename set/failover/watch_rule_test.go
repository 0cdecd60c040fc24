package failover

import (
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
)

// TestWatchRule: the watchdog's decision on a primary unreachable for
// --after, from what it saw of the replicas and of the primary before.
func TestWatchRule(t *testing.T) {
	const p, r1, r2 = "u:p@tcp(10.0.0.1:3306)/", "u:p@tcp(10.0.0.2:3306)/", "u:p@tcp(10.0.0.3:3306)/"
	g := &Group{primary: p, replicas: []string{r1, r2}}
	armed := func(w *Watcher) { w.known, w.armed = true, true }
	tests := []struct {
		name    string
		state   func(w *Watcher)
		reps    []replicaView
		dead    bool
		mention string
	}{
		{"both replicas lost it", armed, []replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, true, "10.0.0.2:3306 lost it; 10.0.0.3:3306 lost it"},
		{"one lost it, one down", armed, []replicaView{{r1, lost, "lost it"}, {r2, unreachable, "refused"}}, true, "10.0.0.2:3306 lost it"},
		{"one still receives", armed, []replicaView{{r1, lost, "lost it"}, {r2, replicating, "receives from it"}}, false, "replica 10.0.0.3:3306 still receives"},
		{"no replica reachable", armed, []replicaView{{r1, unreachable, "timeout"}, {r2, unreachable, "refused"}}, false, "no reachable replica confirms"},
		{"replicas elsewhere", armed, []replicaView{{r1, elsewhere, "source x"}, {r2, elsewhere, "source x"}}, false, "no reachable replica confirms"},
		{"not armed (after a failover)", func(w *Watcher) { w.known, w.seen[r1] = true, true },
			[]replicaView{{r1, lost, "lost it"}, {r2, unreachable, "refused"}}, false, "not armed (no flapping): replica(s) 10.0.0.3:3306 not seen"},
		{"primary never seen", func(w *Watcher) { w.armed = true }, []replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "not seen alive"},
		{"primary could commit alone", func(w *Watcher) { armed(w); w.unsafe = "rpl_semi_sync_master_wait_no_slave off" },
			[]replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "wait_no_slave off"},
		{"a failover of it failed", func(w *Watcher) { armed(w); w.halted = "replica x does not answer" },
			[]replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "an operator must act (hbctl set failover b)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(configs.Replication{}).NewWatcher(Target{Name: "SET b", Fix: "hbctl set failover b"}, WatchOptions{}, zap.NewNop(), nil)
			w.newPrimary(g)
			tt.state(w)
			why, dead := w.dead(g, tt.reps)
			if dead != tt.dead || !strings.Contains(why, tt.mention) {
				t.Errorf("dead = %v (%s); want %v mentioning %q", dead, why, tt.dead, tt.mention)
			}
		})
	}
}
