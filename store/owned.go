package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Ownership picks, of the buckets a SET's fence holds (each with the
// topology version it was claimed at), those the SET may pay out, refund
// and archive: the ones the topology gives it. A fence row alone is not
// enough: a mover that died between its claim on the target and the
// source's release leaves the target a claim (and a stale copy) of a
// bucket the source still serves.
type Ownership func(ctx context.Context, fence map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error)

// trusted returns the buckets the settler and the archiver act on: those
// the fence holds, filtered by the Ownership when there is one.
func (s *Store) trusted(ctx context.Context) (map[hongbao.Bucket]bool, error) {
	claims, err := fence.Claims(ctx, s.db, s.set)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if s.ownership != nil {
		owned, err := s.ownership(ctx, claims)
		if err != nil {
			return nil, fmt.Errorf("store: buckets of SET %s: %w", s.set, err)
		}
		return owned, nil
	}
	out := make(map[hongbao.Bucket]bool, len(claims))
	for b := range claims {
		out[b] = true
	}
	return out, nil
}

// Owns reports whether the SET's fence holds bucket b now and the
// Ownership (WithOwnership) trusts it. It is a plain read, no lock: what
// depends on the answer staying true (a purge) takes the fence's lock in
// its own transaction.
func (s *Store) Owns(ctx context.Context, b hongbao.Bucket) (bool, error) {
	owned, err := s.trusted(ctx)
	if err != nil {
		return false, fmt.Errorf("store: owns bucket %d: %w", b, err)
	}
	return owned[b], nil
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
	if err != nil && !sqldb.IsMissingTable(err) {
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
	case !errors.Is(err, sql.ErrNoRows) && !sqldb.IsMissingTable(err):
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
	case errors.Is(err, sql.ErrNoRows), sqldb.IsMissingTable(err):
		return true, nil
	}
	return false, fmt.Errorf("store: absent %s from the archive: %w", id, err)
}

// ownedBuckets returns the buckets SET set's fence holds in db (a plain
// read, no lock).
func ownedBuckets(ctx context.Context, db *sql.DB, set string) (map[hongbao.Bucket]bool, error) {
	claims, err := fence.Claims(ctx, db, set)
	if err != nil {
		return nil, fmt.Errorf("store: buckets of SET %s: %w", set, err)
	}
	owned := make(map[hongbao.Bucket]bool, len(claims))
	for b := range claims {
		owned[b] = true
	}
	return owned, nil
}
