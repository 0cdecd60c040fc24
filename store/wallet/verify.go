package wallet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Totals are the ledger's sums by kind.
type Totals struct {
	Debits, Credits, Refunds, TopUps int64
	CreditsN                         int
}

// querier is a pool or a connection holding a snapshot.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Verify sums the ledger and checks that every balance equals the
// sum of its entries and none is negative.
func (w *Wallet) Verify(ctx context.Context) (Totals, []string, error) { return verify(ctx, w.db) }

func verify(ctx context.Context, q querier) (Totals, []string, error) {
	var tot Totals
	rows, err := q.QueryContext(ctx, "SELECT kind, COUNT(*), COALESCE(SUM(amount),0) FROM ledger GROUP BY kind")
	if err != nil {
		return tot, nil, fmt.Errorf("verify ledger: %w", err)
	}
	byKind := map[string]sqldb.KindSum{}
	for rows.Next() {
		var kind string
		var k sqldb.KindSum
		if err := rows.Scan(&kind, &k.N, &k.Sum); err != nil {
			rows.Close()
			return tot, nil, fmt.Errorf("verify ledger: %w", err)
		}
		byKind[kind] = k
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return tot, nil, fmt.Errorf("verify ledger: %w", err)
	}
	tot.Debits = -byKind[hongbao.KindSend].Sum
	tot.Credits, tot.CreditsN = byKind[hongbao.KindOpen].Sum, byKind[hongbao.KindOpen].N
	tot.Refunds = byKind[hongbao.KindRefund].Sum
	tot.TopUps = byKind[hongbao.KindTopUp].Sum
	bal, err := q.QueryContext(ctx, `SELECT u.user_id, COALESCE(a.balance, 0), COALESCE(l.s, 0) FROM
		(SELECT user_id FROM accounts UNION SELECT user_id FROM ledger) u
		LEFT JOIN accounts a ON a.user_id = u.user_id
		LEFT JOIN (SELECT user_id, SUM(amount) s FROM ledger GROUP BY user_id) l ON l.user_id = u.user_id
		WHERE COALESCE(a.balance, 0) != COALESCE(l.s, 0) OR COALESCE(a.balance, 0) < 0`)
	if err != nil {
		return tot, nil, fmt.Errorf("verify balances: %w", err)
	}
	defer bal.Close()
	var bad []string
	for bal.Next() {
		var u, b, s int64
		if err := bal.Scan(&u, &b, &s); err != nil {
			return tot, nil, err
		}
		bad = append(bad, fmt.Sprintf("user %d: balance %d != ledger sum %d", u, b, s))
	}
	return tot, bad, bal.Err()
}

// LastSeq returns the seq of the ledger's last committed entry (0: none).
// An entry with a smaller seq was inserted before that one, so whatever
// it was written from (a share, a packet) had committed by then.
func (w *Wallet) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := w.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM ledger").Scan(&seq); err != nil {
		return 0, fmt.Errorf("wallet: last seq: %w", err)
	}
	return seq, nil
}

// Snapshot is the wallet as it was at one moment: a consistent-read
// transaction kept open for Verify, Since and Entries; Close ends it.
type Snapshot struct{ conn *sql.Conn }

// Snapshot opens a consistent read of the wallet.
func (w *Wallet) Snapshot(ctx context.Context) (*Snapshot, error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("wallet: snapshot: %w", err)
	}
	for _, q := range []string{"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return nil, fmt.Errorf("wallet: snapshot: %w", err)
		}
	}
	return &Snapshot{conn: conn}, nil
}

// Verify is Wallet.Verify in the snapshot.
func (s *Snapshot) Verify(ctx context.Context) (Totals, []string, error) { return verify(ctx, s.conn) }

// Since returns the snapshot's entries after seq of the kinds that move
// money between SETs and the wallet (send, open, refund).
func (s *Snapshot) Since(ctx context.Context, seq int64) ([]hongbao.Entry, error) {
	rows, err := s.conn.QueryContext(ctx, selectEntry+"WHERE seq > ? AND kind IN (?, ?, ?) ORDER BY seq",
		seq, hongbao.KindSend, hongbao.KindOpen, hongbao.KindRefund)
	if err != nil {
		return nil, fmt.Errorf("wallet: entries since %d: %w", seq, err)
	}
	return scanEntries(rows)
}

// Entries returns those of keys that the snapshot's ledger has, by key.
func (s *Snapshot) Entries(ctx context.Context, keys []string) (map[string]hongbao.Entry, error) {
	out := map[string]hongbao.Entry{}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		args := make([]any, n)
		for i, k := range keys[:n] {
			args[i] = k
		}
		rows, err := s.conn.QueryContext(ctx, selectEntry+"WHERE entry_key IN ("+sqldb.Placeholders(n, "?")+")", args...)
		if err != nil {
			return nil, fmt.Errorf("wallet: entries: %w", err)
		}
		es, err := scanEntries(rows)
		if err != nil {
			return nil, fmt.Errorf("wallet: entries: %w", err)
		}
		for _, e := range es {
			out[e.Key] = e
		}
		keys = keys[n:]
	}
	return out, nil
}

// Close ends the snapshot and gives its connection back.
func (s *Snapshot) Close() error {
	_, err := s.conn.ExecContext(context.Background(), "ROLLBACK")
	return errors.Join(err, s.conn.Close())
}
