package store

import (
	"context"
	"database/sql"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// CopyBucket copies every row of bucket b (its day tables, their details and
// its idempotency keys) from one SET's MySQL to another's. It is idempotent
// (rows already there are kept), so an interrupted move can be run again.
// The caller must have fenced b on the source first, so nothing changes
// under the copy. It returns the number of packets copied.
func CopyBucket(ctx context.Context, from, to *sql.DB, b hongbao.Bucket) (int, error) {
	dst := schema.NewEnsurer(to)
	if err := dst.EnsureSet(ctx); err != nil {
		return 0, err
	}
	total := 0
	for day := 1; day <= 31; day++ {
		t := hongbao.DayTable{Bucket: b, Day: day}
		n, err := copyDay(ctx, from, to, dst, t)
		if err != nil {
			return total, fmt.Errorf("store: copy %s: %w", t.Packets(), err)
		}
		total += n
	}
	// Idempotency keys of the bucket: t_idem is shared by the ten buckets
	// of a database, so select by the bucket bits of the packet ID.
	err := copyRows(ctx, from, to, "SELECT sender, idem_key, packet_id, req_hash, created_at FROM "+b.DB()+
		".t_idem WHERE (packet_id >> 12) & 1023 = ?", []any{int(b)}, b.DB()+".t_idem")
	if err != nil && !schema.IsMissingTable(err) {
		return total, fmt.Errorf("store: copy idempotency keys of bucket %d: %w", b, err)
	}
	for _, table := range []string{"hb_set.expiry", "hb_set.pending"} {
		err := copyRows(ctx, from, to, "SELECT * FROM "+table+" WHERE (packet_id >> 12) & 1023 = ?", []any{int(b)}, table)
		if err != nil && !schema.IsMissingTable(err) {
			return total, fmt.Errorf("store: copy %s of bucket %d: %w", table, b, err)
		}
	}
	return total, nil
}

func copyDay(ctx context.Context, from, to *sql.DB, dst *schema.Ensurer, t hongbao.DayTable) (int, error) {
	var n int
	err := from.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.Packets()).Scan(&n)
	if schema.IsMissingTable(err) || (err == nil && n == 0) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := dst.Ensure(ctx, t); err != nil {
		return 0, err
	}
	if err := copyRows(ctx, from, to, "SELECT * FROM "+t.Packets(), nil, t.Packets()); err != nil {
		return 0, err
	}
	return n, copyRows(ctx, from, to, "SELECT * FROM "+t.Details(), nil, t.Details())
}

// copyRows streams the rows of query into table, in chunks, keeping rows
// the destination already has. Both sides have the same columns.
func copyRows(ctx context.Context, from, to *sql.DB, query string, args []any, table string) error {
	return copyRowsAs(ctx, from, to, query, args, "INSERT IGNORE", table)
}

// copyRowsAs is copyRows with the insert verb: "INSERT IGNORE" keeps rows
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
		tuple := "(" + schema.Placeholders(cols, "?") + ")"
		q := verb + " INTO " + table + " VALUES " + schema.Placeholders(len(batch)/cols, tuple)
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

// DropBucket deletes the rows of bucket b after a move copied them away.
func DropBucket(ctx context.Context, db *sql.DB, b hongbao.Bucket) error {
	for day := 1; day <= 31; day++ {
		t := hongbao.DayTable{Bucket: b, Day: day}
		for _, q := range []string{"DELETE FROM " + t.Details(), "DELETE FROM " + t.Packets()} {
			if _, err := db.ExecContext(ctx, q); err != nil && !schema.IsMissingTable(err) {
				return fmt.Errorf("store: drop %s: %w", t.Packets(), err)
			}
		}
	}
	for _, table := range []string{b.DB() + ".t_idem", "hb_set.expiry", "hb_set.pending"} {
		_, err := db.ExecContext(ctx, "DELETE FROM "+table+" WHERE (packet_id >> 12) & 1023 = ?", int(b))
		if err != nil && !schema.IsMissingTable(err) {
			return fmt.Errorf("store: drop %s of bucket %d: %w", table, b, err)
		}
	}
	return nil
}
