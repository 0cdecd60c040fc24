package replication_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// fenceRig is a replicated pair with a table, an idle application
// connection and the application's and the operator's pools.
type fenceRig struct {
	g         *dbtest.Group
	app, root *sql.DB
	idle      *sql.Conn
}

func newFenceRig(t *testing.T) *fenceRig {
	t.Helper()
	g := dbtest.StartReplicated(t, 0, 1)
	r := &fenceRig{g: g, app: dbtest.Open(t, g.Primary.AppDSN(), 4), root: dbtest.Open(t, g.Primary.DSN, 4)}
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY)", "INSERT INTO x.t VALUES (0)"} {
		if _, err := r.app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	idle, err := r.app.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idle.Close() })
	r.idle = idle
	return r
}

// rows counts x.t's rows as the operator sees them (committed in InnoDB).
func (r *fenceRig) rows(t *testing.T) int {
	t.Helper()
	var n int
	if err := r.root.QueryRow("SELECT COUNT(*) FROM x.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// newAppConn reports the error of a fresh application connection.
func (r *fenceRig) newAppConn(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("mysql", r.g.Primary.AppDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return db.Ping()
}

// TestFenceFinal: a primary whose replica acknowledges: Fence is final
// (read_only on, the idle application connection killed, the accounts
// locked, no write possible).
func TestFenceFinal(t *testing.T) {
	r := newFenceRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f, err := replication.Fence(ctx, r.root, []string{dbtest.AppUser})
	if err != nil || !f.Final || f.Waiting != 0 {
		t.Fatalf("Fence = %+v, %v; want final", f, err)
	}
	var ro int
	if err := r.root.QueryRow("SELECT @@GLOBAL.read_only").Scan(&ro); err != nil || ro != 1 {
		t.Errorf("read_only = %d, %v; want 1", ro, err)
	}
	if err := r.idle.PingContext(ctx); err == nil {
		t.Error("an idle application connection survived a final fence")
	}
	if err := r.newAppConn(t); err == nil || !strings.Contains(err.Error(), "4151") {
		t.Errorf("a new application connection after the fence: %v; want error 4151 (account locked)", err)
	}
	if err := replication.Unlock(ctx, r.root, []string{dbtest.AppUser}); err != nil {
		t.Fatal(err)
	}
	if err := r.newAppConn(t); err != nil {
		t.Errorf("a new application connection after Unlock: %v", err)
	}
	if _, err := r.app.Exec("INSERT INTO x.t VALUES (2)"); err == nil || !strings.Contains(err.Error(), "1290") {
		t.Errorf("the application writes after the fence: %v; want error 1290 (read-only)", err)
	}
}

// TestFenceNeverShowsAnUnacknowledgedCommit: a primary whose only replica
// is down holds a commit waiting for an acknowledgement. Fence returns
// within seconds, not final, with that commit still waiting: it is never
// made visible (killing its connection would commit it in InnoDB on this
// server alone: the measured money bug of issue #23), nor answered; no
// new application connection gets in. Once a replica acknowledges it
// (here: the same replica back) it completes as any commit would.
func TestFenceNeverShowsAnUnacknowledgedCommit(t *testing.T) {
	r := newFenceRig(t)
	ctx := context.Background()
	r.g.Replicas[0].Stop()
	waiting := make(chan error, 1)
	go func() { _, err := r.app.Exec("INSERT INTO x.t VALUES (1)"); waiting <- err }()
	for i := 0; semiSyncWaits(t, r.root) != 1; i++ {
		if i == 100 {
			t.Fatal("no commit waits for an acknowledgement")
		}
		time.Sleep(50 * time.Millisecond)
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	began := time.Now()
	f, err := replication.Fence(fctx, r.root, []string{dbtest.AppUser})
	if err != nil || f.Final || f.Waiting != 1 {
		t.Fatalf("Fence = %+v, %v; want not final, 1 commit waiting", f, err)
	}
	t.Logf("fenced in %v", time.Since(began).Round(time.Millisecond))
	time.Sleep(time.Second)
	select {
	case err := <-waiting:
		t.Fatalf("the commit waiting for an acknowledgement ended after the fence (%v): it must go on waiting", err)
	default:
	}
	if n := r.rows(t); n != 1 {
		t.Errorf("%d rows visible after the fence; want 1 (the waiting commit invisible)", n)
	}
	if err := r.newAppConn(t); err == nil || !strings.Contains(err.Error(), "4151") {
		t.Errorf("a new application connection after the fence: %v; want error 4151 (account locked)", err)
	}
	var n int
	if err := r.idle.QueryRowContext(ctx, "SELECT COUNT(*) FROM x.t").Scan(&n); err != nil || n != 1 {
		t.Errorf("an application connection left open reads %d rows (%v); want 1: only what a replica has", n, err)
	}
	if err := r.g.Replicas[0].Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waiting:
		if err != nil {
			t.Errorf("the waiting commit, acknowledged: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the waiting commit still waits after its replica is back")
	}
}

func semiSyncWaits(t *testing.T, root *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLockLogsNothingAndLeavesLoggingOn: Lock and Unlock write nothing to
// the binary log (a replica must not copy a fence), and leave every
// pooled connection logging: a promotion's epoch stamp written through the
// same pool right after Unlock must reach the binary log.
func TestLockLogsNothingAndLeavesLoggingOn(t *testing.T) {
	r := newFenceRig(t)
	ctx := context.Background()
	r.root.SetMaxOpenConns(1) // the same connection for every statement
	var before, after string
	if err := r.root.QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(context.Context, *sql.DB, []string) error{replication.Lock, replication.Unlock} {
		if err := f(ctx, r.root, []string{dbtest.AppUser}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.root.QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&after); err != nil || after != before {
		t.Fatalf("the binary log moved from %q to %q (%v): Lock or Unlock was logged", before, after, err)
	}
	var logging int
	if err := r.root.QueryRow("SELECT @@SESSION.sql_log_bin").Scan(&logging); err != nil || logging != 1 {
		t.Errorf("sql_log_bin = %d (%v) on the pool's connection after Lock and Unlock; want 1", logging, err)
	}
}
