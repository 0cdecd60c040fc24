package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Package fence's rows say which buckets a SET owns, in that SET's own
// MySQL (schema.EnsureFence creates the table); see schema for why every
// write takes a shared lock on its bucket's row.

// Own records that set owns buckets (at topology version), in set's MySQL,
// creating the fence table first if needed.
func Own(ctx context.Context, db *sql.DB, set string, version int64, buckets []hongbao.Bucket) error {
	if err := schema.EnsureFence(ctx, db); err != nil {
		return err
	}
	return Claim(ctx, db, set, version, buckets)
}

// Claim is Own where the fence table exists: no DDL, for a move's freeze.
func Claim(ctx context.Context, db *sql.DB, set string, version int64, buckets []hongbao.Bucket) error {
	for len(buckets) > 0 {
		n := min(len(buckets), 500)
		args := make([]any, 0, 3*n)
		for _, b := range buckets[:n] {
			args = append(args, set, int(b), version)
		}
		q := "INSERT INTO hb_fence.owned (set_name, bucket, version) VALUES (?,?,?)" + strings.Repeat(",(?,?,?)", n-1) +
			" ON DUPLICATE KEY UPDATE version = VALUES(version)"
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("schema: own buckets for %s: %w", set, err)
		}
		buckets = buckets[n:]
	}
	return nil
}

// Disown removes set's claim on buckets. It waits for every transaction
// holding the fence of those buckets; after it, none can commit.
func Disown(ctx context.Context, tx *sql.Tx, set string, buckets []hongbao.Bucket) error {
	for _, b := range buckets {
		if _, err := tx.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", set, int(b)); err != nil {
			return fmt.Errorf("schema: disown bucket %d of %s: %w", b, set, err)
		}
	}
	return nil
}

// AllBuckets lists every bucket.
func AllBuckets() []hongbao.Bucket {
	bs := make([]hongbao.Bucket, hongbao.Buckets)
	for i := range bs {
		bs[i] = hongbao.Bucket(i)
	}
	return bs
}

// Holds reports whether set's fence in db has bucket b, reading the row
// with a shared lock that waits at most a second: busy means a mover holds
// the row (a bucket's freeze is under way), so neither answer is known yet.
func Holds(ctx context.Context, db *sql.DB, set string, b hongbao.Bucket) (held, busy bool, err error) {
	// One attempt, not InTx: a lock wait is the answer here, not a fault.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, false, fmt.Errorf("schema: fence of %s: %w", set, err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	var n int
	err = tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ? LOCK IN SHARE MODE WAIT 1",
		set, int(b)).Scan(&n)
	held = n > 0
	if sqldb.IsLockWait(err) {
		return false, true, nil
	}
	if sqldb.IsMissingTable(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("schema: fence of %s, bucket %d: %w", set, b, err)
	}
	return held, false, nil
}

// Claims returns the buckets set's fence in db holds, each with the
// topology version it was claimed at (a plain read, no lock; no table: none).
func Claims(ctx context.Context, db *sql.DB, set string) (map[hongbao.Bucket]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT bucket, version FROM hb_fence.owned WHERE set_name = ?", set)
	if sqldb.IsMissingTable(err) {
		return map[hongbao.Bucket]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schema: fence of %s: %w", set, err)
	}
	defer rows.Close()
	out := map[hongbao.Bucket]int64{}
	for rows.Next() {
		var b int
		var v int64
		if err := rows.Scan(&b, &v); err != nil {
			return nil, fmt.Errorf("schema: fence of %s: %w", set, err)
		}
		out[hongbao.Bucket(b)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schema: fence of %s: %w", set, err)
	}
	return out, nil
}

// Lock takes a shared lock on the SET's claim to bucket b for the rest of
// the transaction, or fails with ErrWrongSet when the SET does not own it.
func Lock(ctx context.Context, tx *sql.Tx, set string, b hongbao.Bucket) error {
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM hb_fence.owned WHERE set_name = ? AND bucket = ? LOCK IN SHARE MODE",
		set, int(b)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) || sqldb.IsMissingTable(err) {
		return fmt.Errorf("bucket %d not owned by SET %s: %w", b, set, hongbao.ErrWrongSet)
	}
	return err
}

// Forget deletes every row of set's fence in db, for a SET removed from
// the topology (it owns no bucket by then; a row left would read as a
// claim). A MySQL without the fence table has nothing to forget.
func Forget(ctx context.Context, db *sql.DB, set string) error {
	_, err := db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", set)
	if err != nil && !sqldb.IsMissingTable(err) {
		return fmt.Errorf("fence: forget %s: %w", set, err)
	}
	return nil
}
