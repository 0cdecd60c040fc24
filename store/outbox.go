package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// OutboxBacklog returns how many entries of the SET (and unnamed ones, as
// Outbox; a packed row counts its credits) wait in the outbox and when the
// oldest was written (zero when none): the settler's lag, for its metrics.
func (s *Store) OutboxBacklog(ctx context.Context) (int, time.Time, error) {
	var n int
	var oldest sql.NullTime
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(n), 0), MIN(created_at) FROM hb_set.outbox WHERE "+ownRows, ownNames(s.set)...).Scan(&n, &oldest)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return 0, time.Time{}, nil
		}
		return 0, time.Time{}, fmt.Errorf("store: outbox backlog: %w", err)
	}
	return n, oldest.Time, nil
}
