package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// sqlCtx bounds one helper's SQL, so a stuck database fails the test
// instead of hanging it.
func sqlCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Count runs a query answering one number, such as a COUNT(*).
func Count(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	ctx, cancel := sqlCtx()
	defer cancel()
	var n int
	if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TablesLike lists the tables (db.table, sorted) of the databases whose name
// is LIKE like and whose own name matches the regular expression re.
func TablesLike(t testing.TB, db *sql.DB, like, re string) []string {
	t.Helper()
	ctx, cancel := sqlCtx()
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
		WHERE table_schema LIKE ? AND table_name REGEXP ? ORDER BY 1`, like, re)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// DayTables lists the live packet tables db_xx.t_y_dd of the given days of
// month, or of every day when none is given.
func DayTables(t testing.TB, db *sql.DB, days ...int) []string {
	t.Helper()
	dd := `[0-9]{2}`
	if len(days) > 0 {
		alt := make([]string, len(days))
		for i, d := range days {
			alt[i] = fmt.Sprintf("%02d", d)
		}
		dd = "(" + strings.Join(alt, "|") + ")"
	}
	return TablesLike(t, db, `db\_%`, `^t_[0-9]_`+dd+`$`)
}

// TableExists reports whether table (db.table) exists.
func TableExists(t testing.TB, db *sql.DB, table string) bool {
	t.Helper()
	schema, name, _ := strings.Cut(table, ".")
	return Count(t, db, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", schema, name) == 1
}

// Checksums returns the content checksum of every table of the day
// tables, the archives and hb_set: equal checksums mean nothing changed.
func Checksums(t testing.TB, db *sql.DB) map[string]int64 {
	t.Helper()
	ctx, cancel := sqlCtx()
	defer cancel()
	names := append(TablesLike(t, db, `db\_%`, "."), TablesLike(t, db, "hb_set", ".")...)
	out := map[string]int64{}
	for _, n := range names {
		var table string
		var sum sql.NullInt64
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+n).Scan(&table, &sum); err != nil {
			t.Fatal(err)
		}
		out[n] = sum.Int64
	}
	return out
}

// Sums are the rows and money of a packet table and its detail table.
type Sums struct {
	Packets, Details         int
	Total, Remaining, Opened int64
}

// TableSums sums the packet table packets (db.table) and its _detail
// table, each restricted by its WHERE clause ("" for every row) with args.
func TableSums(t testing.TB, db *sql.DB, packets, wherePackets, whereDetails string, args ...any) Sums {
	t.Helper()
	ctx, cancel := sqlCtx()
	defer cancel()
	var s Sums
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(total),0), COALESCE(SUM(remaining_amount),0) FROM "+
		packets+" "+wherePackets, args...).Scan(&s.Packets, &s.Total, &s.Remaining); err != nil {
		t.Fatalf("sums of %s: %v", packets, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM "+packets+"_detail "+whereDetails,
		args...).Scan(&s.Details, &s.Opened); err != nil {
		t.Fatalf("sums of %s_detail: %v", packets, err)
	}
	return s
}
