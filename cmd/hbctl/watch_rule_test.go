package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestWatchRule: the watchdog's decision on a primary unreachable for
// --after, from what it saw of the replicas and of the primary before.
func TestWatchRule(t *testing.T) {
	const p, r1, r2 = "u:p@tcp(10.0.0.1:3306)/", "u:p@tcp(10.0.0.2:3306)/", "u:p@tcp(10.0.0.3:3306)/"
	g := &group{primary: p, replicas: []string{r1, r2}}
	armed := func(w *watcher) { w.known, w.armed = true, true }
	tests := []struct {
		name    string
		state   func(w *watcher)
		reps    []replicaView
		dead    bool
		mention string
	}{
		{"both replicas lost it", armed, []replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, true, "10.0.0.2:3306 lost it; 10.0.0.3:3306 lost it"},
		{"one lost it, one down", armed, []replicaView{{r1, lost, "lost it"}, {r2, unreachable, "refused"}}, true, "10.0.0.2:3306 lost it"},
		{"one still receives", armed, []replicaView{{r1, lost, "lost it"}, {r2, replicating, "receives from it"}}, false, "replica 10.0.0.3:3306 still receives"},
		{"no replica reachable", armed, []replicaView{{r1, unreachable, "timeout"}, {r2, unreachable, "refused"}}, false, "no reachable replica confirms"},
		{"replicas elsewhere", armed, []replicaView{{r1, elsewhere, "source x"}, {r2, elsewhere, "source x"}}, false, "no reachable replica confirms"},
		{"not armed (after a failover)", func(w *watcher) { w.known, w.seen[r1] = true, true },
			[]replicaView{{r1, lost, "lost it"}, {r2, unreachable, "refused"}}, false, "not armed (no flapping): replica(s) 10.0.0.3:3306 not seen"},
		{"primary never seen", func(w *watcher) { w.armed = true }, []replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "not seen alive"},
		{"primary could commit alone", func(w *watcher) { armed(w); w.unsafe = "rpl_semi_sync_master_wait_no_slave off" },
			[]replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "wait_no_slave off"},
		{"a failover of it failed", func(w *watcher) { armed(w); w.halted = "replica x does not answer" },
			[]replicaView{{r1, lost, "lost it"}, {r2, lost, "lost it"}}, false, "an operator must act (hbctl set failover b)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWatcher(watchTarget{name: "SET b", fix: "hbctl set failover b"}, &failover{log: zap.NewNop()}, watchOptions{})
			w.newPrimary(g)
			tt.state(w)
			why, dead := w.dead(g, tt.reps)
			if dead != tt.dead || !strings.Contains(why, tt.mention) {
				t.Errorf("dead = %v (%s); want %v mentioning %q", dead, why, tt.dead, tt.mention)
			}
		})
	}
}

// TestWatchUsage: the watch commands' mistakes are usage errors naming
// the flag or setting, found before any database is asked.
func TestWatchUsage(t *testing.T) {
	const cfg = "../../configs/dev.yaml"
	tests := []struct {
		args    []string
		environ []string
		mention string
	}{
		{[]string{"set", "watch", "b", "--interval", "0s"}, nil, "flag --interval"},
		{[]string{"set", "watch", "--after", "1s", "--interval", "1s"}, nil, "flag --after"},
		{[]string{"set", "watch", "b", "c", "--probe-timeout", "0s"}, nil, "flag --probe-timeout"},
		{[]string{"set", "watch", "b", "--bogus"}, nil, "-bogus"},
		{[]string{"set", "watch", "b"}, []string{"HB_REPLICATION_SEMI_SYNC_TIMEOUT=5s"}, "semi_sync_timeout"},
		{[]string{"core", "watch", "--to", "127.0.0.1:3347"}, nil, "flag --to"},
		{[]string{"core", "watch", "--after", "1s"}, nil, "flag --after"},
		{[]string{"core", "watch"}, []string{"HB_REPLICATION_SEMI_SYNC_TIMEOUT=1s"}, "semi_sync_timeout"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), &env{stdout: &out, stderr: &out, environ: tt.environ}, append(tt.args, "-config", cfg))
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("hbctl %v: %v; want a usage error mentioning %q", tt.args, err, tt.mention)
			}
		})
	}
}

// TestParseReroute: HBCTL_TEST_REROUTE is FROM=TO of host:port pairs.
func TestParseReroute(t *testing.T) {
	m, err := parseReroute("127.0.0.1:3316=127.0.0.1:4000,db1:3306=127.0.0.1:4001")
	if err != nil || len(m) != 2 || m["127.0.0.1:3316"] != "127.0.0.1:4000" || m["db1:3306"] != "127.0.0.1:4001" {
		t.Errorf("parseReroute: %v, %v", m, err)
	}
	for _, bad := range []string{"127.0.0.1:3316", "a=b", "127.0.0.1:1=x"} {
		if _, err := parseReroute(bad); err == nil {
			t.Errorf("parseReroute(%q): no error", bad)
		}
	}
	if m, err := parseReroute(""); m != nil || err != nil {
		t.Errorf(`parseReroute(""): %v, %v`, m, err)
	}
}
