package wallet

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// ErrNotCredit refuses a batch holding an entry Credit cannot take: a
// non-positive amount (debits go through Apply, which checks the balance)
// or a key or kind longer than the ledger's columns.
var ErrNotCredit = errors.New("wallet: not a credit")

// Credited is what Credit did with a batch.
type Credited struct {
	// Fresh are the entries this call recorded (Seq and At set).
	Fresh []hongbao.Entry
	// Existing are the entries already in the ledger under keys of the
	// batch that were not recorded by this call, as the ledger holds them
	// (a re-delivery; the caller compares them with what it meant).
	Existing []hongbao.Entry
}

// Credit records many credits (openers' shares, refunds: positive amounts)
// and moves their amounts, in one transaction, exactly once per key: a key
// the ledger already holds moves nothing and is returned in Existing. A
// credit never overdraws, so the batch needs no balance check; balances
// are changed only for the rows this transaction inserted, one upsert per
// user with the user's sum, in user ID order (two batches crediting the
// same users lock their accounts in the same order and cannot deadlock on
// them). Ledger rows are inserted in key order for the same reason.
func (w *Wallet) Credit(ctx context.Context, es []hongbao.Entry) (Credited, error) {
	if len(es) == 0 {
		return Credited{}, nil
	}
	for _, e := range es {
		if e.Amount <= 0 || len(e.Key) == 0 || len(e.Key) > maxKey || len(e.Kind) > maxKind {
			return Credited{}, fmt.Errorf("%w: %q (%d fen, kind %q)", ErrNotCredit, e.Key, e.Amount, e.Kind)
		}
	}
	at := w.now().UTC().Truncate(time.Millisecond)
	sorted := slices.Clone(es)
	slices.SortFunc(sorted, func(a, b hongbao.Entry) int { return strings.Compare(a.Key, b.Key) })
	var out Credited
	err := sqldb.InTx(ctx, w.db, func(tx *sql.Tx) error {
		out = Credited{}
		seqs, err := insertCredits(ctx, tx, sorted, at)
		if err != nil {
			return err
		}
		var old []string
		for _, e := range sorted {
			seq, ok := seqs[e.Key]
			if !ok {
				old = append(old, e.Key)
				continue
			}
			delete(seqs, e.Key) // a key twice in the batch: the second is a re-delivery
			e.Seq, e.At = seq, at
			out.Fresh = append(out.Fresh, e)
		}
		if err := addBalances(ctx, tx, out.Fresh, at); err != nil {
			return err
		}
		out.Existing, err = entries(ctx, tx, old)
		return err
	})
	if err != nil {
		return Credited{}, fmt.Errorf("wallet: credit %d entries: %w", len(es), err)
	}
	return out, nil
}

// Column widths of the ledger (schema/wallet.go): INSERT IGNORE would
// truncate a longer value with a warning instead of failing, so Credit
// refuses one before.
const (
	maxKey  = 96
	maxKind = 16
)

// insertCredits inserts es into the ledger, skipping keys it already
// holds, and returns the seq of each key it inserted. IGNORE skips only
// the duplicate keys here: Credit has checked every value fits its column,
// and RETURNING names exactly the rows inserted.
func insertCredits(ctx context.Context, tx *sql.Tx, es []hongbao.Entry, at time.Time) (map[string]int64, error) {
	args := make([]any, 0, 6*len(es))
	for _, e := range es {
		args = append(args, e.Key, e.User, e.Amount, e.Kind, e.Packet, at)
	}
	rows, err := tx.QueryContext(ctx, "INSERT IGNORE INTO ledger (entry_key, user_id, amount, kind, packet_id, created_at) VALUES "+
		sqldb.Placeholders(len(es), "(?,?,?,?,?,?)")+" RETURNING seq, entry_key", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seqs := make(map[string]int64, len(es))
	for rows.Next() {
		var seq int64
		var key string
		if err := rows.Scan(&seq, &key); err != nil {
			return nil, err
		}
		seqs[key] = seq
	}
	return seqs, rows.Err()
}

// addBalances adds the fresh credits to their users' balances: one
// multi-row upsert, users in ID order.
func addBalances(ctx context.Context, tx *sql.Tx, fresh []hongbao.Entry, at time.Time) error {
	sums := map[hongbao.UserID]int64{}
	for _, e := range fresh {
		sums[e.User] += e.Amount
	}
	if len(sums) == 0 {
		return nil
	}
	users := make([]hongbao.UserID, 0, len(sums))
	for u := range sums {
		users = append(users, u)
	}
	slices.SortFunc(users, cmp.Compare)
	args := make([]any, 0, 3*len(users))
	for _, u := range users {
		args = append(args, u, sums[u], at)
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO accounts (user_id, balance, updated_at) VALUES "+sqldb.Placeholders(len(users), "(?,?,?)")+
		" ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), updated_at = VALUES(updated_at)", args...)
	return err
}

// entries reads the ledger's entries under keys.
func entries(ctx context.Context, tx *sql.Tx, keys []string) ([]hongbao.Entry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	rows, err := tx.QueryContext(ctx, selectEntry+"WHERE entry_key IN ("+sqldb.Placeholders(len(keys), "?")+") ORDER BY entry_key", args...)
	if err != nil {
		return nil, err
	}
	return scanEntries(rows)
}
