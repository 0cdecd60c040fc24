package store

import (
	"context"
	"database/sql"
	"errors"
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

// Absent settles a not-found answer for packet id: in one snapshot, the
// SET's fence holds the packet's bucket and the packet is not in its day
// table as a funded packet (nor in the archive). Every write of a bucket
// commits where its fence is, and a move's target claims the fence only
// after it holds the bucket's every row, so a packet missing from a
// snapshot in which the SET owns its bucket did not exist at that moment:
// an open or a read asked after the packet's send was answered then gets a
// true 404. A read that missed the packet earlier, in a race with the
// bucket arriving here, sees it now (false). Not owned: ErrWrongSet.
func (s *Store) Absent(ctx context.Context, id hongbao.PacketID) (bool, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, fmt.Errorf("store: absent %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	var owned int
	// The first read of the transaction fixes its snapshot.
	err = tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", s.set, int(id.Bucket())).Scan(&owned)
	if err != nil && !schema.IsMissingTable(err) {
		return false, fmt.Errorf("store: absent %s: %w", id, err)
	}
	if owned == 0 {
		return false, fmt.Errorf("bucket %d not owned by SET %s: %w", id.Bucket(), s.set, hongbao.ErrWrongSet)
	}
	var funding hongbao.Funding
	err = tx.QueryRowContext(ctx, "SELECT funding FROM "+s.Table(id).Packets()+" WHERE id = ?", id).Scan(&funding)
	switch {
	case err == nil:
		return funding != hongbao.Funded, nil
	case !errors.Is(err, sql.ErrNoRows) && !schema.IsMissingTable(err):
		return false, fmt.Errorf("store: absent %s: %w", id, err)
	case s.cold == nil:
		return true, nil
	}
	// Archived packets left the day table after they were over; the
	// archive copies before it purges, so a packet gone from the snapshot
	// above is in the archive now if it was archived.
	a := dayOf(s.Table(id), id, s.loc).Archive()
	err = s.cold.QueryRowContext(ctx, "SELECT funding FROM "+a.Packets()+" WHERE id = ?", id).Scan(&funding)
	switch {
	case err == nil:
		return funding != hongbao.Funded, nil
	case errors.Is(err, sql.ErrNoRows), schema.IsMissingTable(err):
		return true, nil
	}
	return false, fmt.Errorf("store: absent %s from the archive: %w", id, err)
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
