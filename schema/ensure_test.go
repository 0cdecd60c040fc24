package schema_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// An ensure of day tables that exist runs no DDL (each statement, even an
// IF NOT EXISTS that finds its table, is written to the binary log: on a
// primary killed before a replica acknowledged it, that is a transaction
// the replicas lack, and the old primary cannot rejoin them); a table
// that is missing is created, alone. Counted on the pool's one session
// (Com_create_table counts every CREATE TABLE it ran).
func TestEnsureRunsNoDDLForWhatExists(t *testing.T) {
	db := dbtest.DB(t, "a", 1)
	ctx := t.Context()
	// A day tests do not send on (a fortnight away), a bucket of its own.
	from := time.Now().AddDate(0, 0, 15)
	b := hongbao.Bucket(997)
	if _, err := schema.NewEnsurer(db).EnsureDays(ctx, []hongbao.Bucket{b}, from, 1); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		ensure func(*schema.Ensurer) error
	}{
		{"EnsureDays", func(e *schema.Ensurer) error {
			n, err := e.EnsureDays(ctx, []hongbao.Bucket{b}, from, 1)
			if err == nil && n != 2 {
				t.Errorf("EnsureDays ensured %d day tables; want 2", n)
			}
			return err
		}},
		{"Ensure", func(e *schema.Ensurer) error {
			return e.Ensure(ctx, hongbao.DayTable{Bucket: b, Day: from.Day()})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := creates(t, db)
			if err := c.ensure(schema.NewEnsurer(db)); err != nil { // a new process's
				t.Fatal(err)
			}
			if n := creates(t, db) - before; n != 0 {
				t.Errorf("ensure of existing day tables ran %d CREATE TABLE; want none", n)
			}
			day := hongbao.DayTable{Bucket: b, Day: from.Day()}
			if _, err := db.ExecContext(ctx, "DROP TABLE "+day.Details()); err != nil {
				t.Fatal(err)
			}
			before = creates(t, db)
			if err := c.ensure(schema.NewEnsurer(db)); err != nil {
				t.Fatal(err)
			}
			if n := creates(t, db) - before; n != 1 {
				t.Errorf("ensure with %s dropped ran %d CREATE TABLE; want 1", day.Details(), n)
			}
			if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM "+day.Details()); n != 0 {
				t.Errorf("%s recreated with %d rows", day.Details(), n)
			}
		})
	}
}

// creates is how many CREATE TABLE statements db's one session has run.
func creates(t *testing.T, db *sql.DB) int { return createsIn(t, db, "SESSION") }

// createsIn is Com_create_table in scope: SESSION (the pool's one
// session) or GLOBAL (since the server started).
func createsIn(t *testing.T, db *sql.DB, scope string) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRowContext(t.Context(), "SHOW "+scope+" STATUS LIKE 'Com_create_table'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ensure waits for a CREATE of one of its tables that another session has
// under way (a slow one: here a CREATE ... SELECT, in production one
// waiting for its semi-sync acknowledgement), though information_schema
// lists the table already: a caller that wrote into the table before that
// CREATE commits would hide its row from every snapshot opened meanwhile
// (error 1412, the audit's skip of "a table created after it").
func TestEnsureWaitsForACreateUnderWay(t *testing.T) {
	db := dbtest.DB(t, "a", 4)
	ctx := t.Context()
	day := hongbao.DayTable{Bucket: 996, Day: time.Now().AddDate(0, 0, 16).Day()}
	if err := schema.NewEnsurer(db).Ensure(ctx, day); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the real table back, for other runs
		_, _ = db.Exec("DROP TABLE IF EXISTS " + day.Details())
		_ = schema.NewEnsurer(db).Ensure(context.Background(), day)
	})
	if _, err := db.ExecContext(ctx, "DROP TABLE "+day.Details()); err != nil {
		t.Fatal(err)
	}
	created := make(chan time.Time, 1)
	go func() {
		_, err := db.ExecContext(ctx, "CREATE TABLE "+day.Details()+" ENGINE=InnoDB AS SELECT SLEEP(2) AS slow")
		if err != nil {
			t.Error(err)
		}
		created <- time.Now()
	}()
	for deadline := time.Now().Add(2 * time.Second); dbtest.Count(t, db,
		"SELECT COUNT(*) FROM information_schema.tables WHERE CONCAT(table_schema, '.', table_name) = ?", day.Details()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow CREATE's table never showed in information_schema")
		}
	}
	if err := schema.NewEnsurer(db).Ensure(ctx, day); err != nil {
		t.Fatal(err)
	}
	ensured := time.Now()
	snap, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if _, err := snap.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		t.Fatal(err)
	}
	// Ensure and the CREATE's own client hear of its end together (give
	// or take the scheduler); without the wait, Ensure returns 2 s early.
	if early := (<-created).Sub(ensured); early > 500*time.Millisecond {
		t.Errorf("Ensure returned %v before the CREATE under way committed", early)
	}
	var n int
	if err := snap.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+day.Details()).Scan(&n); err != nil {
		t.Errorf("a snapshot opened after Ensure cannot read %s: %v", day.Details(), err)
	}
	_, _ = snap.ExecContext(ctx, "ROLLBACK")
}

// EnsureAudience (every restarted server's first read of each database)
// runs no DDL for an audience table that exists, creates a missing one,
// and never a database.
func TestEnsureAudienceRunsNoDDLForWhatExists(t *testing.T) {
	db := dbtest.DB(t, "a", 1)
	ctx := t.Context()
	day := hongbao.DayTable{Bucket: 995, Day: time.Now().AddDate(0, 0, 17).Day()}
	if err := schema.NewEnsurer(db).Ensure(ctx, day); err != nil {
		t.Fatal(err)
	}
	before := creates(t, db)
	if err := schema.NewEnsurer(db).EnsureAudience(ctx, day.DB()); err != nil {
		t.Fatal(err)
	}
	if n := creates(t, db) - before; n != 0 {
		t.Errorf("EnsureAudience of an existing table ran %d CREATE TABLE; want none", n)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE "+day.DB()+".t_audience"); err != nil {
		t.Fatal(err)
	}
	before = creates(t, db)
	if err := schema.NewEnsurer(db).EnsureAudience(ctx, day.DB()); err != nil {
		t.Fatal(err)
	}
	if n := creates(t, db) - before; n != 1 || dbtest.Count(t, db, "SELECT COUNT(*) FROM "+day.DB()+".t_audience") != 0 {
		t.Errorf("EnsureAudience of a dropped table ran %d CREATE TABLE; want 1", n)
	}
	if err := schema.NewEnsurer(db).EnsureAudience(ctx, "db_no_such_db"); !sqldb.IsMissingTable(err) {
		t.Errorf("EnsureAudience of a missing database: %v; want unknown database", err)
	}
}
