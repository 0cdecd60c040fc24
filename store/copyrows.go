package store

import (
	"context"
	"database/sql"

	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// copyRowsAs streams the rows of query from one MySQL into table of another,
// in chunks (both sides have the same columns). verb says what happens to
// rows the target has: "INSERT IGNORE" keeps rows
// the destination has, "REPLACE" overwrites them with the source's.
func copyRowsAs(ctx context.Context, from, to *sql.DB, query string, args []any, verb, table string) error {
	rows, err := from.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return err
	}
	cols := len(names)
	const chunk = 200
	batch := make([]any, 0, chunk*cols)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		tuple := "(" + sqldb.Placeholders(cols, "?") + ")"
		q := verb + " INTO " + table + " VALUES " + sqldb.Placeholders(len(batch)/cols, tuple)
		_, err := to.ExecContext(ctx, q, batch...)
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		vals := make([]any, cols)
		ptrs := make([]any, cols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		batch = append(batch, vals...)
		if len(batch) == chunk*cols {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}
