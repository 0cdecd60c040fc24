package topology

import (
	"context"
	"database/sql"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Trusted returns the buckets of fence (a SET's fence rows: bucket ->
// version claimed at) that SET name may pay out, refund and archive: those
// t gives it, claimed at a version t is not older than. A fence row alone
// is not enough: a mover killed between its claim on the target and the
// source's release leaves the target a stale claim of a bucket the source
// still serves. And a map older than the claim may name this SET from
// before the bucket left it: a claim is made at the version its mover
// loaded plus one, which is above every version that knew the bucket's
// earlier departure, so such a map is not trusted for that bucket.
func (t *Map) Trusted(name string, fence map[hongbao.Bucket]int64) map[hongbao.Bucket]bool {
	out := make(map[hongbao.Bucket]bool, len(fence))
	for b, v := range fence {
		if v <= t.Version && t.Owner(b).Name == name {
			out[b] = true
		}
	}
	return out
}

// Trusted is Map.Trusted on the topology read again first (one query of
// its version; the map when it changed): for a SET's settler.
func (w *Watcher) Trusted(name string) func(context.Context, map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) {
	return func(ctx context.Context, fence map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) {
		if err := w.Refresh(ctx); err != nil {
			return nil, err
		}
		return w.Current().Trusted(name, fence), nil
	}
}

// TrustedIn is Map.Trusted on the topology loaded from meta at each call:
// for a SET's archiver, which asks once per day table.
func TrustedIn(meta *sql.DB, name string) func(context.Context, map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) {
	return func(ctx context.Context, fence map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) {
		t, err := Load(ctx, meta)
		if err != nil {
			return nil, err
		}
		return t.Trusted(name, fence), nil
	}
}

// ClaimBacked reports whether SET name's claim of bucket b is backed: the
// topology gives b to name, or a move of b to name is Disowning (its mover
// records that step before it claims, and the source's servers finish or
// send back a move whose mover died). One statement, so one snapshot of
// the meta database: a publish, which changes both in one transaction, is
// seen whole or not at all.
func ClaimBacked(ctx context.Context, meta *sql.DB, name string, b hongbao.Bucket) (bool, error) {
	var owner string
	var moving int
	err := meta.QueryRowContext(ctx, `SELECT (SELECT set_name FROM buckets WHERE bucket = ?),
		(SELECT COUNT(*) FROM moves WHERE bucket = ? AND to_set = ? AND step = ?)`, int(b), int(b), name, Disowning).Scan(&owner, &moving)
	if sqldb.IsMissingTable(err) { // no move ever: the topology alone
		err = meta.QueryRowContext(ctx, "SELECT set_name FROM buckets WHERE bucket = ?", int(b)).Scan(&owner)
	}
	if err != nil {
		return false, fmt.Errorf("topology: claim of bucket %d by %s: %w", b, name, err)
	}
	return owner == name || moving > 0, nil
}
