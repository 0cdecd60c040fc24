package move

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestRecoveryOutlivesMetaOutage: a server whose meta database is
// unreachable when it starts keeps its recovery going (its first rounds
// fail at OpenMeta), and once the meta database answers it deletes its
// SET's stale claim (a bucket the topology gives another SET, no move
// towards this one).
func TestRecoveryOutlivesMetaOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_finish_")
	meta, err := topology.OpenMeta(ctx, cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`"); meta.Close() })
	a, c := dbtest.UniqueName("fa"), dbtest.UniqueName("fc")
	top, err := topology.Init(ctx, meta, []topology.Set{{Name: a, MySQLDSN: "dsn-a"}, {Name: c, MySQLDSN: "dsn-c"}})
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.DB(t, "a", 4)
	stale := top.Buckets(a)[2]
	if err := fence.Own(ctx, db, c, top.Version+1, []hongbao.Bucket{stale}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ?", c) })

	var up atomic.Bool // the meta database reachable through the proxy
	cfg.Addr = proxy(t, cfg.Addr, &up)
	rec := NewRecovery(cfg.FormatDSN(), nil, db, c, func(b hongbao.Bucket) string { return top.Owner(b).Name }, zap.NewNop())
	stopped := make(chan struct{})
	go func() { defer close(stopped); rec.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	claimed := func() int {
		return dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", c, int(stale))
	}
	time.Sleep(2 * time.Second) // four of its rounds without the meta database
	if claimed() != 1 {
		t.Fatal("the stale claim went while the meta database was unreachable")
	}
	up.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for claimed() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("SET %s's stale claim of bucket %d still there 30 s after the meta database came back", c, stale)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proxy forwards TCP connections to addr while up, and closes them at once
// otherwise; it returns its address.
func proxy(t *testing.T, addr string, up *atomic.Bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			if !up.Load() {
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return l.Addr().String()
}

// TestRecoveryLeavesAResumedMove: a server sends back a dead mover's move
// (Disowning, lease run out, the source still holding the bucket), but not
// when a mover resumed it between the server's look and its retry (a new
// attempt recorded Disowning with a new lease): sent back then, the new
// attempt's publish would find nothing to publish after the source gave
// the bucket up, and the bucket would be left with no owner.
func TestRecoveryLeavesAResumedMove(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_resumed_")
	meta, err := topology.OpenMeta(ctx, cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`"); meta.Close() })
	a, c := dbtest.UniqueName("ra"), dbtest.UniqueName("rc")
	top, err := topology.Init(ctx, meta, []topology.Set{{Name: a, MySQLDSN: "dsn-a"}, {Name: c, MySQLDSN: "dsn-c"}})
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.DB(t, "a", 4)
	bucket := top.Buckets(a)[1]
	if err := fence.Own(ctx, db, a, top.Version, []hongbao.Bucket{bucket}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ?", a) })
	base := time.Now()
	var ms atomic.Int64 // the mover's clock: a millisecond further at each reading
	mover, err := topology.NewJournal(ctx, meta, func() time.Time { return base.Add(time.Duration(ms.Add(1)) * time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock is a minute ahead: it changes nothing, the
	// leases run on the meta database's clock.
	server, err := topology.NewJournal(ctx, meta, func() time.Time { return time.Now().Add(time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	r, err := mover.Create(ctx, "move", 0, "", []topology.Move{{Bucket: bucket, From: a, To: c}})
	if err != nil {
		t.Fatal(err)
	}
	m := &r.Moves[0]
	step := func() string {
		t.Helper()
		var s string
		if err := meta.QueryRow("SELECT step FROM moves WHERE rebalance_id = ? AND bucket = ?", r.ID, int(bucket)).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// disowning records the move's handover with a lease of d.
	disowning := func(d time.Duration) {
		t.Helper()
		m.Step = topology.Disowning
		if err := mover.Record(ctx, m, d); err != nil {
			t.Fatal(err)
		}
	}

	rec := NewRecovery("", nil, db, a, nil, zap.NewNop())
	disowning(time.Millisecond)
	time.Sleep(20 * time.Millisecond) // the lease runs out
	if err := rec.Once(ctx, server); err != nil || step() != topology.CatchingUp {
		t.Fatalf("a dead mover's move: %v, step %s; want it sent back to %s", err, step(), topology.CatchingUp)
	}

	disowning(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	rec.Knobs.AfterHolds = func(*topology.Move) { disowning(time.Minute) } // resumed: a new attempt, a new lease
	if err := rec.Once(ctx, server); err != nil || step() != topology.Disowning {
		t.Fatalf("a move resumed under the server's look: %v, step %s; want it left %s to its mover", err, step(), topology.Disowning)
	}
}

// TestRecoveryBacksOff: while the meta database is unreachable every
// failed round is logged with the pause before the next, which doubles up
// to MaxBackoff and stays there: the loop keeps trying, never stops, and
// does not hammer a meta database that is down. Once it answers, rounds
// are back to Every (the stale claim goes, as in
// TestRecoveryOutlivesMetaOutage).
func TestRecoveryBacksOff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_backoff_")
	var up atomic.Bool
	cfg.Addr = proxy(t, cfg.Addr, &up)
	core, logs := observer.New(zap.WarnLevel)
	rec := NewRecovery(cfg.FormatDSN(), nil, dbtest.DB(t, "a", 2), dbtest.UniqueName("bo"),
		func(hongbao.Bucket) string { return "" }, zap.New(core))
	rec.Every, rec.MaxBackoff = 20*time.Millisecond, 160*time.Millisecond
	stopped := make(chan struct{})
	go func() { defer close(stopped); rec.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(1500 * time.Millisecond)
	var pauses []time.Duration
	for _, e := range logs.FilterMessage("finishing interrupted moves; trying again").All() {
		pauses = append(pauses, e.ContextMap()["in"].(time.Duration))
	}
	want := []time.Duration{40, 80, 160, 160, 160}
	if len(pauses) < len(want) {
		t.Fatalf("%d failed rounds logged in 1.5 s with the meta database down (pauses %v), want at least %d", len(pauses), pauses, len(want))
	}
	for i, w := range want {
		if pauses[i] != w*time.Millisecond {
			t.Fatalf("pauses after failed rounds: %v; want %v ms, then 160 ms", pauses, want)
		}
	}
	if n := len(pauses); n > 12 {
		t.Errorf("%d failed rounds in 1.5 s: the loop does not back off (pauses %v)", n, pauses)
	}
}
