package schema_test

import (
	"database/sql"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
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
func creates(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRowContext(t.Context(), "SHOW SESSION STATUS LIKE 'Com_create_table'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
