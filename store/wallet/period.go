package wallet

import (
	"context"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Between returns the snapshot's entries written in [from, to), in ledger
// order: every user's (user 0) or one user's; at most limit (0: no limit).
// An entry's time is its commit's in the wallet: a credit delivered after
// midnight is the next day's, whenever its share was taken.
func (s *Snapshot) Between(ctx context.Context, from, to time.Time, user hongbao.UserID, limit int) ([]hongbao.Entry, error) {
	q, args := selectEntry+"WHERE created_at >= ? AND created_at < ?", []any{from.UTC(), to.UTC()}
	if user != 0 {
		q, args = q+" AND user_id = ?", append(args, user)
	}
	q += " ORDER BY seq"
	if limit > 0 {
		q, args = q+" LIMIT ?", append(args, limit)
	}
	rows, err := s.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("wallet: entries from %s to %s: %w", from, to, err)
	}
	es, err := scanEntries(rows)
	if err != nil {
		return nil, fmt.Errorf("wallet: entries from %s to %s: %w", from, to, err)
	}
	return es, nil
}

// SumsBefore returns the sum of each user's entries written before t: the
// balance the user had then (0 for a user without any).
func (s *Snapshot) SumsBefore(ctx context.Context, users []hongbao.UserID, t time.Time) (map[hongbao.UserID]int64, error) {
	out := make(map[hongbao.UserID]int64, len(users))
	for len(users) > 0 {
		n := min(len(users), 500)
		args := []any{t.UTC()}
		for _, u := range users[:n] {
			args = append(args, u)
			out[u] = 0
		}
		rows, err := s.conn.QueryContext(ctx, "SELECT user_id, SUM(amount) FROM ledger WHERE created_at < ? AND user_id IN ("+
			sqldb.Placeholders(n, "?")+") GROUP BY user_id", args...)
		if err != nil {
			return nil, fmt.Errorf("wallet: balances at %s: %w", t, err)
		}
		for rows.Next() {
			var u hongbao.UserID
			var sum int64
			if err := rows.Scan(&u, &sum); err != nil {
				rows.Close()
				return nil, fmt.Errorf("wallet: balances at %s: %w", t, err)
			}
			out[u] = sum
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("wallet: balances at %s: %w", t, err)
		}
		users = users[n:]
	}
	return out, nil
}

// KindSums returns the count and sum of user's entries written in [from,
// to), by kind.
func (s *Snapshot) KindSums(ctx context.Context, from, to time.Time, user hongbao.UserID) (map[string]sqldb.KindSum, error) {
	rows, err := s.conn.QueryContext(ctx, "SELECT kind, COUNT(*), SUM(amount) FROM ledger WHERE user_id = ? AND created_at >= ? AND created_at < ? GROUP BY kind",
		user, from.UTC(), to.UTC())
	if err != nil {
		return nil, fmt.Errorf("wallet: sums of %s: %w", user, err)
	}
	defer rows.Close()
	out := map[string]sqldb.KindSum{}
	for rows.Next() {
		var kind string
		var k sqldb.KindSum
		if err := rows.Scan(&kind, &k.N, &k.Sum); err != nil {
			return nil, fmt.Errorf("wallet: sums of %s: %w", user, err)
		}
		out[kind] = k
	}
	return out, rows.Err()
}
