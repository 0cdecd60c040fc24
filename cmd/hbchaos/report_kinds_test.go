package main

import (
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
	"testing"
	"time"
)

// Each kind's table counts what happened from each of its injections to
// the next fault: answers acknowledged, lost and doubled answers by when
// they were acknowledged, verify runs; the archiver's run beside the
// others owns no window, and a skipped kind says why.
func TestKindTables(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	s := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	r := &result{
		o:        options{clients: 10},
		l:        &load{},
		loadEnd:  s(100),
		ackedEnd: 1000,
		faults: []fault{
			{kind: partPrimaryReplica, target: "mariadb-a / mariadb-a-replica", at: s(10), acked0: 100, recovery: 2 * time.Second, outage: 1500 * time.Millisecond},
			{kind: killArchiver, target: "hbarchive", at: s(15), recovery: time.Minute},
			{kind: powerLoss, target: "server-a1", at: s(40), acked0: 400, recovery: time.Second, outage: -1},
			{kind: partPrimaryReplica, target: "mariadb-b / mariadb-b-replica", at: s(60), acked0: 600, recovery: 4 * time.Second, outage: 3 * time.Second},
			{kind: partRouterServer, at: s(70), skipped: noHosts},
		},
		verifies: []verifyRun{{at: s(20), result: "ok"}, {at: s(45), result: "violation"}, {at: s(5), result: "ok"}},
		f: findings{
			lostAt:    []time.Time{s(41), s(65), {}},
			doubledAt: []time.Time{s(12)},
		},
	}
	got := kindTables(r) + table(r)
	for _, want := range []string{
		"#### partition primary/replica\n\n| | |\n|---|---|\n| load |",
		"| faults injected | 2 (mariadb-a / mariadb-a-replica; mariadb-b / mariadb-b-replica) |",
		// 100..400 and 600..1000
		"| acknowledged answers | 700 (from each injection to the next fault) |",
		"| lost | **1** |\n| doubled | **1** |",
		"| writes acknowledged again after the heal | 2.00 / 4.00 / 4.00 s",
		"| its SET's writes unacknowledged for at most | 3.00 s (the longest of its injections) |\n| verify during it | 1 passed, 0 violations, 0 could not run |",
		"#### power loss of a host",
		"| acknowledged answers | 200 (from each injection to the next fault) |",
		"| writes acknowledged again after the heal | 1.00 / 1.00 / 1.00 s (min / median / max) |\n| verify during it | 0 passed, 1 violations, 0 could not run |", // no outage measured
		"| partition primary/replica | 2 | 2 | 2.00 / 4.00 / 4.00 s | 3.00 s |",
		"#### partition router/server\n\n| | |\n|---|---|\n| injected | 0: " + noHosts + " |",
		"| acknowledged answers | (it runs beside the other faults: its answers are theirs) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the tables lack %q:\n%s", want, got)
		}
	}
}

// The outage is the longest stretch without a write acknowledged to the
// watched buckets, from the last before the watch to its stop; writes to
// other buckets do not end it.
func TestWatchWrites(t *testing.T) {
	l := &load{}
	l.wrote(1)
	stop := l.watchWrites([]hongbao.Bucket{1, 2}, time.Millisecond)
	const gap = 300 * time.Millisecond
	for end := time.Now().Add(gap); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		l.wrote(3) // another SET's
	}
	l.wrote(2)
	time.Sleep(50 * time.Millisecond)
	l.wrote(1)
	if got := stop(); got < gap || got > gap+time.Second {
		t.Errorf("longest outage %v; want the %v without a write to buckets 1 and 2", got, gap)
	}
}
