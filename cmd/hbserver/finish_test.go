package main

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestFinishMovesOutlivesMetaOutage: a server whose meta database is
// unreachable when it starts keeps its finishing loop going, and once the
// meta database answers it deletes its SET's stale claim (a bucket the
// topology gives another SET, no move towards this one).
func TestFinishMovesOutlivesMetaOutage(t *testing.T) {
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
	go finishMoves(ctx, cfg.FormatDSN(), nil, db, c, func(b hongbao.Bucket) string { return top.Owner(b).Name }, zap.NewNop())
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

// TestFinishLeavesAResumedMove: a server sends back a dead mover's move
// (Disowning, lease run out, the source still holding the bucket), but not
// when a mover resumed it between the server's look and its retry (a new
// attempt recorded Disowning with a new lease): sent back then, the new
// attempt's publish would find nothing to publish after the source gave
// the bucket up, and the bucket would be left with no owner.
func TestFinishLeavesAResumedMove(t *testing.T) {
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
	// The server's clock is ahead: every lease looks run out.
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
	disowning := func() {
		t.Helper()
		m.Step = topology.Disowning
		if err := mover.Record(ctx, m, time.Second); err != nil {
			t.Fatal(err)
		}
	}

	disowning()
	if err := finishOnce(ctx, server, db, a, zap.NewNop()); err != nil || step() != topology.CatchingUp {
		t.Fatalf("a dead mover's move: %v, step %s; want it sent back to %s", err, step(), topology.CatchingUp)
	}

	disowning()
	afterHolds = func(*topology.Move) { disowning() } // resumed: a new attempt, a new lease
	t.Cleanup(func() { afterHolds = nil })
	if err := finishOnce(ctx, server, db, a, zap.NewNop()); err != nil || step() != topology.Disowning {
		t.Fatalf("a move resumed under the server's look: %v, step %s; want it left %s to its mover", err, step(), topology.Disowning)
	}
}
