// Package wallet is the wallet database's adapter: accounts and the
// append-only ledger whose unique entry keys make delivery exactly once.
package wallet

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Wallet is the accounts and append-only ledger, in their own database.
type Wallet struct {
	db  *sql.DB
	now func() time.Time
	// daily are the configured daily limits (WithDaily; zero: none but
	// the users' overrides), over the days of loc.
	daily hongbao.DailyLimits
	loc   *time.Location
}

// Open opens (creating if needed) the wallet database of dsn. core are the
// addresses of the core group's members (none: dsn's server alone): the
// pool follows the group's primary through a failover (sqldb.OpenGroup,
// with opts).
func Open(ctx context.Context, dsn string, core []string, conns int, now func() time.Time, opts ...sqldb.GroupOption) (*Wallet, error) {
	db, err := sqldb.OpenGroup(ctx, dsn, core, conns, true, opts...)
	if err != nil {
		return nil, fmt.Errorf("wallet: %w", err)
	}
	if err := schema.EnsureWallet(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("wallet: %w", err)
	}
	return &Wallet{db: db, now: now, loc: time.UTC}, nil
}

// Close closes the pool.
func (w *Wallet) Close() error { return w.db.Close() }

// DB returns the pool, for verification.
func (w *Wallet) DB() *sql.DB { return w.db }

// Apply records e and moves its amount, in one transaction. If an entry
// with e's key exists, nothing moves and that entry is returned with
// fresh=false. A debit the balance does not cover fails with
// ErrInsufficientFunds and records nothing; a send's debit that would pass
// a daily limit of its sender (WithDaily) fails with a *hongbao.LimitError
// and records nothing.
func (w *Wallet) Apply(ctx context.Context, e hongbao.Entry) (hongbao.Entry, bool, error) {
	e.At = w.now().UTC().Truncate(time.Millisecond)
	err := sqldb.InTx(ctx, w.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO ledger (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
			e.Key, e.User, e.Amount, e.Kind, e.Packet, e.At)
		if err != nil {
			return err
		}
		e.Seq, _ = res.LastInsertId() // the driver always has it for an insert
		if err := move(ctx, tx, e); err != nil {
			return err
		}
		if e.Kind == hongbao.KindSend && e.Amount < 0 {
			// Counted even with no limit configured: an override set
			// later in the day then sees the day's true usage.
			return w.countSend(ctx, tx, e)
		}
		return nil
	})
	switch {
	case sqldb.IsDupEntry(err):
		old, err := w.entry(ctx, e.Key)
		return old, false, err
	case err != nil:
		return hongbao.Entry{}, false, fmt.Errorf("wallet: apply %s: %w", e.Key, err)
	}
	return e, true, nil
}

// move changes the balance by e.Amount, refusing an overdraft.
func move(ctx context.Context, tx *sql.Tx, e hongbao.Entry) error {
	switch {
	case e.Amount > 0:
		// An upsert: crediting a user without an account yet must not
		// take the gap locks an UPDATE-then-INSERT would deadlock on.
		_, err := tx.ExecContext(ctx, "INSERT INTO accounts (user_id, balance, updated_at) VALUES (?,?,?) "+
			"ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), updated_at = VALUES(updated_at)", e.User, e.Amount, e.At)
		return err
	case e.Amount < 0:
		res, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ?, updated_at = ? WHERE user_id = ? AND balance + ? >= 0",
			e.Amount, e.At, e.User, e.Amount)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return hongbao.ErrInsufficientFunds
		}
	}
	return nil
}

func (w *Wallet) entry(ctx context.Context, key string) (hongbao.Entry, error) {
	e, err := scanEntry(w.db.QueryRowContext(ctx, selectEntry+"WHERE entry_key = ?", key))
	if err != nil {
		return hongbao.Entry{}, fmt.Errorf("wallet: entry %s: %w", key, err)
	}
	return e, nil
}

// Entry returns the entry with key, if any.
func (w *Wallet) Entry(ctx context.Context, key string) (hongbao.Entry, bool, error) {
	e, err := w.entry(ctx, key)
	if errors.Is(err, sql.ErrNoRows) {
		return hongbao.Entry{}, false, nil
	}
	return e, err == nil, err
}

// Balance returns user's balance (0 for a user never credited).
func (w *Wallet) Balance(ctx context.Context, user hongbao.UserID) (int64, error) {
	var b int64
	err := w.db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE user_id = ?", user).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wallet: balance of %s: %w", user, err)
	}
	return b, nil
}

// History returns user's entries of kind, newest first, older than the
// cursor (a ledger seq; 0 for the newest), and the cursor of the next page
// (0 when there is none).
func (w *Wallet) History(ctx context.Context, user hongbao.UserID, kind string, cursor int64, limit int) ([]hongbao.Entry, int64, error) {
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	rows, err := w.db.QueryContext(ctx, selectEntry+"WHERE user_id = ? AND kind = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
		user, kind, cursor, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("wallet: history of %s: %w", user, err)
	}
	es, err := scanEntries(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("wallet: history of %s: %w", user, err)
	}
	if len(es) > limit {
		return es[:limit], es[limit-1].Seq, nil
	}
	return es, 0, nil
}

// selectEntry reads ledger rows as scanEntry takes them.
const selectEntry = "SELECT seq, entry_key, user_id, amount, kind, packet_id, created_at FROM ledger "

// scanEntry reads one row of selectEntry.
func scanEntry(row interface{ Scan(...any) error }) (hongbao.Entry, error) {
	var e hongbao.Entry
	err := row.Scan(&e.Seq, &e.Key, &e.User, &e.Amount, &e.Kind, &e.Packet, &e.At)
	return e, err
}

// scanEntries reads every row of selectEntry and closes rows.
func scanEntries(rows *sql.Rows) ([]hongbao.Entry, error) {
	defer rows.Close()
	var es []hongbao.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, rows.Err()
}

// TopUp credits user amount fen from an operator, exactly once per key:
// the entry's key is "topup:"+key, and a key applied before moves
// nothing (fresh false). An empty key is a new random one. It returns the
// key used.
func (w *Wallet) TopUp(ctx context.Context, user hongbao.UserID, amount int64, key string) (used string, fresh bool, err error) {
	if key == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b) // never fails
		key = hex.EncodeToString(b)
	}
	_, fresh, err = w.Apply(ctx, hongbao.Entry{Key: "topup:" + key, User: user, Amount: amount, Kind: hongbao.KindTopUp})
	return key, fresh, err // Apply's errors name the entry
}
