package schema_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
)

// TestEnsureDaysSurvivesAKill: the day tables' creation ahead of time
// (hbarchive ensure, hbctl schema ensure: EnsureDays) loses its MariaDB to
// a kill -9 in the middle of its CREATEs; run again after the restart, as
// the next cron run is, it creates what is missing and nothing else. Every
// day table then exists, opens, and has the definition of the one created
// last, after the crash: no table is left half made (a definition without
// its data file, or the other way round) by the kill.
func TestEnsureDaysSurvivesAKill(t *testing.T) {
	m := dbtest.StartMariaDB(t)
	ctx := t.Context()
	db := dbtest.Open(t, m.DSN, 2)
	var buckets []hongbao.Bucket
	for b := range 60 {
		buckets = append(buckets, hongbao.Bucket(b))
	}
	const ahead = 2
	from := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	want := len(buckets) * (ahead + 1)
	tables := func(db *sql.DB) int {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema LIKE 'db\_%' AND table_name LIKE 't\_%\_%' AND table_name NOT LIKE '%\_detail'`).Scan(&n)
		if err != nil {
			return -1
		}
		return n
	}

	done := make(chan error, 1)
	go func() {
		_, err := schema.NewEnsurer(db).EnsureDays(ctx, buckets, from, ahead)
		done <- err
	}()
	watch := dbtest.Open(t, m.DSN, 2)
	for n := tables(watch); n < want/3; n = tables(watch) {
		if n < 0 {
			t.Fatal("counting the tables failed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.Stop() // kill -9, a third of the way in
	if err := <-done; err == nil {
		t.Fatal("EnsureDays ended before the kill: nothing was cut")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	db = dbtest.Open(t, m.DSN, 2)
	// A table information_schema listed may be gone: its CREATE had not
	// committed (atomic DDL rolls it back in the recovery).
	cut := tables(db)
	if cut <= 0 || cut >= want {
		t.Fatalf("%d day tables after the restart, want some of %d", cut, want)
	}
	t.Logf("%d of %d day tables made before the kill", cut, want)
	all0, before := allTables(t, db), createsIn(t, db, "GLOBAL") // this server's alone
	n, err := schema.NewEnsurer(db).EnsureDays(ctx, buckets, from, ahead)
	if err != nil || n != want {
		t.Fatalf("EnsureDays after the restart: %d, %v; want %d day tables", n, err, want)
	}
	if made, ran := allTables(t, db)-all0, createsIn(t, db, "GLOBAL")-before; ran != made || made < 2*(want-cut) {
		t.Errorf("the run after the restart ran %d CREATE TABLE for %d tables missing (%d day tables)", ran, made, want-cut)
	}
	last := hongbao.DayTable{Bucket: buckets[len(buckets)-1], Day: from.AddDate(0, 0, ahead).Day()}
	refPackets, refDetails := definition(t, db, last.Packets()), definition(t, db, last.Details())
	for d := 0; d <= ahead; d++ {
		for _, b := range buckets {
			dt := hongbao.DayTable{Bucket: b, Day: from.AddDate(0, 0, d).Day()}
			for _, c := range []struct{ table, ref string }{{dt.Packets(), refPackets}, {dt.Details(), refDetails}} {
				if got := definition(t, db, c.table); got != c.ref {
					t.Errorf("%s after the crash:\n%s\nwant, as %s after it:\n%s", c.table, got, last.Packets(), c.ref)
				}
				var rows int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.table).Scan(&rows); err != nil || rows != 0 {
					t.Errorf("%s does not open: %d rows, %v", c.table, rows, err)
				}
			}
		}
	}
}

// allTables counts the tables of the day tables' databases.
func allTables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema LIKE 'db\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// definition is SHOW CREATE TABLE of the qualified table, its own name
// taken out, so that two day tables' definitions compare.
func definition(t *testing.T, db *sql.DB, qualified string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRowContext(context.Background(), "SHOW CREATE TABLE "+qualified).Scan(&name, &ddl); err != nil {
		t.Fatalf("%s: %v", qualified, err)
	}
	return strings.Replace(ddl, fmt.Sprintf("`%s`", name), "`T`", 1)
}
