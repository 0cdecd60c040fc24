package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// RemoveStaleClaims deletes the rows of the SET's fence that nothing
// backs: a mover killed between its claim on the target and the source's
// release leaves the target such a claim (the source rolled back and
// serves the bucket). Nothing acts on it (the settler and archiver act
// only on buckets the topology gives them), but it is in the way of verify
// and of an operator reading the fence. The Recovery's owner (a bucket's
// SET as the server last saw the topology) only picks the candidates: each
// is decided under the row's lock against meta read then (removeClaim). It
// returns the buckets whose claim it deleted.
func (r *Recovery) RemoveStaleClaims(ctx context.Context, meta *sql.DB) ([]hongbao.Bucket, error) {
	set := r.set
	fence, err := fence.Claims(ctx, r.db, set)
	if err != nil {
		return nil, err
	}
	var removed []hongbao.Bucket
	var errs []error
	for b := range fence {
		if r.owner(b) == set {
			continue
		}
		// Asked first without the lock: a claim the caller's stale view
		// mistook (a bucket just moved here) is not locked, which would
		// stall the bucket's opens behind it.
		if backed, err := topology.ClaimBacked(ctx, meta, set, b); err != nil || backed {
			errs = append(errs, err)
			continue
		}
		gone, err := r.removeClaim(ctx, meta, b)
		if err != nil {
			errs = append(errs, err)
		} else if gone {
			removed = append(removed, b)
		}
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// removeClaim deletes the SET's claim of bucket b unless the meta database
// backs it (topology.ClaimBacked), in one transaction on the SET's MySQL
// that locks the row first. A live mover cannot lose its claim to this: it
// records its move Disowning before it claims, so either the journal read
// here (after the lock) shows it Disowning, and the row stays, or the
// mover claims later, and its INSERT waits for this transaction to end
// and writes the row again. A publish after the lock shows as the
// topology naming this SET. It reports whether it deleted the row.
func (r *Recovery) removeClaim(ctx context.Context, meta *sql.DB, b hongbao.Bucket) (bool, error) {
	set := r.set
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("stale claim of bucket %d by %s: %w", b, set, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var v int64
	err = tx.QueryRowContext(ctx, "SELECT version FROM hb_fence.owned WHERE set_name = ? AND bucket = ? FOR UPDATE WAIT 5",
		set, int(b)).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil // gone meanwhile
	case err != nil:
		return false, fmt.Errorf("stale claim of bucket %d by %s: lock: %w", b, set, err)
	}
	backed, err := topology.ClaimBacked(ctx, meta, set, b)
	if err != nil || backed {
		return false, err
	}
	if r.Knobs.AfterStaleCheck != nil {
		r.Knobs.AfterStaleCheck(b)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", set, int(b)); err != nil {
		return false, fmt.Errorf("stale claim of bucket %d by %s: delete: %w", b, set, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("stale claim of bucket %d by %s: commit: %w", b, set, err)
	}
	return true, nil
}
