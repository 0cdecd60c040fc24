package store

import (
	"context"
	"database/sql"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// Owns reports whether the SET's fence holds bucket b now. It is a plain
// read, no lock: what depends on the answer staying true (a purge) takes
// the fence's lock in its own transaction.
func (s *Store) Owns(ctx context.Context, b hongbao.Bucket) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", s.set, int(b)).Scan(&one)
	if err != nil && !schema.IsMissingTable(err) {
		return false, fmt.Errorf("store: owns bucket %d: %w", b, err)
	}
	return one > 0, nil
}

// ownedBuckets returns the buckets SET set's fence holds in db (a plain
// read, no lock).
func ownedBuckets(ctx context.Context, db *sql.DB, set string) (map[hongbao.Bucket]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT bucket FROM hb_fence.owned WHERE set_name = ?", set)
	if schema.IsMissingTable(err) {
		return map[hongbao.Bucket]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: buckets of SET %s: %w", set, err)
	}
	defer rows.Close()
	owned := map[hongbao.Bucket]bool{}
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("store: buckets of SET %s: %w", set, err)
		}
		owned[hongbao.Bucket(b)] = true
	}
	return owned, rows.Err()
}
