package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Why a failover run again never promotes a second replica. A failover
// promotes a replica (writable, replicating from nobody) and only then
// publishes it; between the two it may die, or its publish may fail. The
// group then has a writable member the meta database does not name, and
// on it the replica status a second run reads is empty: judged by what it
// received, it looks least advanced, and the second run would promote
// another replica (two writable members, the first one's repointed
// replicas following it). So a failover records its promotion in the meta
// database first (RecordPromotion: the SET, the primary it fails over
// from, the replica it promotes), a compare-and-set like Failover; the
// publish deletes the record in its transaction. A run that finds a
// record for the primary it starts from resumes that promotion: it
// promotes (again) the recorded replica and publishes it, and refuses any
// other.

// ErrPromoted is RecordPromotion's refusal: a failover from the same
// primary promoted another replica and has not published it.
var ErrPromoted = errors.New("topology: a failover from this primary promoted another replica")

// RecordPromotion records that a failover of SET name from primary from
// promotes to. It fails with ErrPublished when the SET's MySQL is no
// longer from, and with ErrPromoted when a failover from from recorded
// another replica. A record of to itself is kept (a run resumed).
func RecordPromotion(ctx context.Context, meta *sql.DB, name, from, to string) error {
	if err := schema.EnsureMeta(ctx, meta); err != nil {
		return err
	}
	tx, err := meta.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("topology: promotion: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var now string
	if err := tx.QueryRowContext(ctx, "SELECT mysql_dsn FROM sets WHERE name = ? FOR UPDATE", name).Scan(&now); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNoSet, name)
		}
		return fmt.Errorf("topology: promotion: %w", err)
	}
	if now != from {
		return fmt.Errorf("%w: SET %s's primary is %s, not %s this failover started from; %s was not promoted",
			ErrPublished, name, sqldb.Addr(now), sqldb.Addr(from), sqldb.Addr(to))
	}
	if had, ok, err := promotion(ctx, tx, name, from); err != nil {
		return err
	} else if ok && had != to {
		return fmt.Errorf("%w: %s was promoted from %s and not published: run the failover again, it publishes %s",
			ErrPromoted, sqldb.Addr(had), sqldb.Addr(from), sqldb.Addr(had))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO promotions (set_name, from_dsn, to_dsn, promoted_at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))
		ON DUPLICATE KEY UPDATE from_dsn = VALUES(from_dsn), to_dsn = VALUES(to_dsn), promoted_at = VALUES(promoted_at)`, name, from, to); err != nil {
		return fmt.Errorf("topology: promotion: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("topology: promotion: %w", err)
	}
	return nil
}

// Promotion returns the replica a failover of SET name from primary from
// promoted and has not published (ok false: none). It only reads: the
// startup step of a replica calls it while the core primary's commits may
// wait for a replica (no promotions table yet: none).
func Promotion(ctx context.Context, meta *sql.DB, name, from string) (to string, ok bool, err error) {
	tx, err := meta.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", false, fmt.Errorf("topology: promotion: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	to, ok, err = promotion(ctx, tx, name, from)
	if sqldb.IsMissingTable(err) {
		return "", false, nil
	}
	return to, ok, err
}

// promotion reads SET name's promotion record in tx; a record from
// another primary (a failover published since) is none.
func promotion(ctx context.Context, tx *sql.Tx, name, from string) (string, bool, error) {
	var had, to string
	err := tx.QueryRowContext(ctx, "SELECT from_dsn, to_dsn FROM promotions WHERE set_name = ?", name).Scan(&had, &to)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("topology: promotion: %w", err) // wrapped: IsMissingTable sees it
	}
	return to, had == from, nil
}
