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
	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/dbtest"
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
	if err := schema.Own(ctx, db, c, top.Version+1, []hongbao.Bucket{stale}); err != nil {
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
