package schema_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"database/sql"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// freshDB creates a database of its own on test SET a's MariaDB through
// OpenCreate, dropped when the test ends.
func freshDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_schema_test_")
	db, err := sqldb.OpenCreate(context.Background(), cfg.FormatDSN(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE `" + cfg.DBName + "`")
		db.Close()
	})
	return db
}

func TestOpenSessionSettings(t *testing.T) {
	db := freshDB(t)
	var tz string
	if err := db.QueryRow("SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+00:00" {
		t.Errorf("session time zone %q, %v; want +00:00", tz, err)
	}
	if _, err := sqldb.OpenCreate(context.Background(), "hongbao:hongbao@tcp(127.0.0.1:1)/", 1); err == nil {
		t.Error("OpenCreate of a DSN without a database succeeded")
	}
}

func TestErrorsClassified(t *testing.T) {
	db := freshDB(t)
	if _, err := db.Exec("CREATE TABLE t (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec("INSERT INTO t VALUES (1), (1)")
	if !sqldb.IsDupEntry(err) || sqldb.IsMissingTable(err) {
		t.Errorf("duplicate key: IsDupEntry %v, IsMissingTable %v (%v)", sqldb.IsDupEntry(err), sqldb.IsMissingTable(err), err)
	}
	_, err = db.Exec("SELECT * FROM no_such_table")
	if !sqldb.IsMissingTable(err) || sqldb.IsDupEntry(err) {
		t.Errorf("missing table: IsMissingTable %v (%v)", sqldb.IsMissingTable(err), err)
	}
	_, err = db.Exec("SELECT * FROM no_such_db_hb.t")
	if !sqldb.IsMissingTable(err) {
		t.Errorf("missing database: IsMissingTable false (%v)", err)
	}
	if sqldb.IsDupEntry(errors.New("1062")) || sqldb.IsMissingTable(nil) {
		t.Error("a non-MySQL error classified as a MySQL one")
	}
}

func TestInTxCommitsOrRollsBack(t *testing.T) {
	ctx := context.Background()
	db := freshDB(t)
	if _, err := db.Exec("CREATE TABLE t (k INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want boom", err)
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM t"); n != 0 {
		t.Fatalf("%d rows after a failed transaction, want 0", n)
	}
	if err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (2)"); return err }); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM t WHERE k = 2"); n != 1 {
		t.Fatalf("%d rows after a committed transaction, want 1", n)
	}
}

// TestInTxRetriesDeadlocks: two transactions lock two rows in opposite
// orders; MariaDB kills one, and InTx runs it again, so both commit.
func TestInTxRetriesDeadlocks(t *testing.T) {
	ctx := context.Background()
	db := freshDB(t)
	if _, err := db.Exec("CREATE TABLE t (k INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	var ready sync.WaitGroup
	ready.Add(2)
	run := func(first, second int) error {
		tries := 0
		return sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
			attempts.Add(1)
			tries++
			if _, err := tx.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE k = ?", first); err != nil {
				return err
			}
			if tries == 1 { // only the first attempts meet
				ready.Done()
				once.Do(func() { go func() { ready.Wait(); close(both) }() })
				<-both
			}
			_, err := tx.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE k = ?", second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(1, 2) }()
	go func() { errs <- run(2, 1) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("InTx: %v", err)
		}
	}
	if a := attempts.Load(); a < 3 {
		t.Errorf("%d attempts: want the deadlock victim run again", a)
	}
	if n := dbtest.Count(t, db, "SELECT SUM(v) FROM t"); n != 4 {
		t.Errorf("sum %d, want 4: each transaction's two updates exactly once", n)
	}
}

func TestSumsByKind(t *testing.T) {
	db := freshDB(t)
	if _, err := db.Exec("CREATE TABLE outbox (id INT AUTO_INCREMENT PRIMARY KEY, kind VARCHAR(8), amount BIGINT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO outbox (kind, amount) VALUES ('open', 5), ('open', 7), ('refund', 100)"); err != nil {
		t.Fatal(err)
	}
	got, err := sqldb.SumsByKind(context.Background(), db, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	if got["open"] != (sqldb.KindSum{N: 2, Sum: 12}) || got["refund"] != (sqldb.KindSum{N: 1, Sum: 100}) || len(got) != 2 {
		t.Errorf("SumsByKind = %+v", got)
	}
}

// TestIsUnreachable: a refused dial and a server killed under an open
// connection both read as unreachable; a query's own error does not.
func TestIsUnreachable(t *testing.T) {
	ctx := context.Background()
	refused, err := sqldb.Open("hongbao:hongbao@tcp(127.0.0.1:1)/?timeout=500ms", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if err := refused.PingContext(ctx); !sqldb.IsUnreachable(err) {
		t.Errorf("dial refused: IsUnreachable false (%v)", err)
	}
	m := dbtest.StartMariaDB(t)
	db, err := sqldb.Open(m.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "SELECT * FROM no_such_db_hb.t"); err == nil || sqldb.IsUnreachable(err) {
		t.Errorf("a missing table read as unreachable (%v)", err)
	}
	// A fenced old primary locks the application's accounts
	// (replication.Fence): a dependency's outage (503), never a 500.
	if _, err := db.ExecContext(ctx, "CREATE USER 'locked_hb'@'127.0.0.1' IDENTIFIED BY 'x' ACCOUNT LOCK"); err != nil {
		t.Fatal(err)
	}
	locked, err := sqldb.Open(strings.Replace(m.DSN, "root@", "locked_hb:x@", 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer locked.Close()
	if err := locked.PingContext(ctx); err == nil || !sqldb.IsUnreachable(err) {
		t.Errorf("a locked account: IsUnreachable false (%v)", err)
	}
	m.Stop()
	if _, err := db.ExecContext(ctx, "SELECT 1"); !sqldb.IsUnreachable(err) {
		t.Errorf("server killed: IsUnreachable false (%v)", err)
	}
	if sqldb.IsUnreachable(nil) || sqldb.IsUnreachable(errors.New("connection refused")) {
		t.Error("nil or a plain error read as unreachable")
	}
}
