package sqldb_test

import (
	"context"
	"database/sql"
	"math"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// port is the port of the server a pool's next connection reaches.
func port(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int {
	t.Helper()
	var p int
	if err := q.QueryRowContext(context.Background(), "SELECT @@port").Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func prepares(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSwitch: a switchable pool behaves like Open's (session settings,
// one round trip per statement, several statements per call, the
// driver's argument conversion, transaction options), and after To every
// new use reaches the new server, while a transaction begun before and a
// statement in flight on the old one fail at once (the old server may be
// paused: a read from it would wait forever) and their connections are
// dropped.
func TestSwitch(t *testing.T) {
	ctx := context.Background()
	a, b := dbtest.DB(t, "a", 2), dbtest.DB(t, "b", 2)
	pa, pb := port(t, a), port(t, b)
	sw, err := sqldb.OpenSwitch(dbtest.DSN(t, "a"), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.DB().Close()
	db := sw.DB()
	if got := port(t, db); got != pa {
		t.Fatalf("before the switch: port %d; want %d", got, pa)
	}
	var tz string
	var when time.Time
	if err := db.QueryRow("SELECT @@session.time_zone, TIMESTAMP'2024-01-02 03:04:05'").Scan(&tz, &when); err != nil {
		t.Fatal(err)
	}
	if tz != "+00:00" || when.Location() != time.UTC || when.Hour() != 3 {
		t.Errorf("session: time_zone %q, time %v; want +00:00 and 03:04:05 UTC", tz, when)
	}
	before := prepares(t, a)
	var big uint64
	if err := db.QueryRow("SELECT ? + 0", uint64(math.MaxUint64)).Scan(&big); err != nil || big != math.MaxUint64 {
		t.Errorf("uint64 argument: %d, %v", big, err)
	}
	if _, err := db.Exec("DO ?; DO ?", 1, 2); err != nil {
		t.Errorf("two statements in one call: %v", err)
	}
	if n := prepares(t, a) - before; n != 0 {
		t.Errorf("%d statements prepared; want 0 (parameters interpolated)", n)
	}
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS hb_switch_test; CREATE TABLE IF NOT EXISTS hb_switch_test.t (i INT)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Exec("DROP DATABASE hb_switch_test") })
	ro, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Exec("INSERT INTO hb_switch_test.t VALUES (1)"); err == nil {
		t.Error("a write in a read-only transaction succeeded")
	}
	ro.Rollback()

	// Idle connections, and one in a transaction, on a.
	conns := make([]*sql.Conn, 3)
	ids := make([]any, 3)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := conns[i].QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	// A fourth connection (not one of those), busy on a when it switches.
	hanging, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns[:2] {
		c.Close()
	}
	tx, err := conns[2].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	// On the server the sleep goes on (it notices no closed socket): the
	// pool's side is what matters.
	go func() { _, err := hanging.ExecContext(ctx, "DO SLEEP(60)"); slept <- err }()
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	if switched, err := sw.To(dbtest.DSN(t, "b")); err != nil || !switched {
		t.Fatalf("To: %v, %v", switched, err)
	}
	if switched, _ := sw.To(dbtest.DSN(t, "b")); switched {
		t.Error("To the same DSN switched again")
	}
	select {
	case err := <-slept:
		if err == nil {
			t.Error("a statement in flight on the old server succeeded after the switch")
		}
		t.Logf("the statement in flight failed %v after the switch: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Error("a statement in flight on the old server still waits 5 s after the switch")
	}
	hanging.Close()
	for range 8 {
		if got := port(t, db); got != pb {
			t.Fatalf("after the switch: port %d; want %d", got, pb)
		}
	}
	if err := tx.Commit(); err == nil {
		t.Error("a transaction begun on the old server committed after the switch")
	}
	conns[2].Close()
	for range 8 {
		if got := port(t, db); got != pb {
			t.Fatalf("after the old transaction: port %d; want %d", got, pb)
		}
	}
	// None of the pool's connections to a is left (closed when idle at
	// the switch, and when the transaction's came back).
	var left int
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := a.QueryRow("SELECT COUNT(*) FROM information_schema.processlist WHERE id IN (?, ?, ?)", ids...).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	if left != 0 {
		t.Errorf("%d of the pool's connections to the old server still open; want 0", left)
	}
}
