package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Ledger entry kinds.
const (
	KindTopUp  = "topup"  // operator credit
	KindSend   = "send"   // debit of a packet's total at send
	KindVoid   = "void"   // a send abandoned before its debit: takes its key, moves nothing
	KindOpen   = "open"   // credit of a share to its opener
	KindRefund = "refund" // what nobody took, back to the sender
)

// Entry is one ledger entry. Key makes it unique: applying an entry twice
// is a no-op, which turns at-least-once delivery into exactly-once.
type Entry struct {
	Key    string
	User   hongbao.UserID
	Amount int64 // fen; negative for debits
	Kind   string
	Packet hongbao.PacketID // 0 for top-ups
	At     time.Time
	Seq    int64 // ledger order, for paging
}

// Keys of the entries of a packet.
func SendKey(id hongbao.PacketID) string   { return "send:" + id.String() }
func RefundKey(id hongbao.PacketID) string { return "refund:" + id.String() }
func OpenKey(id hongbao.PacketID, u hongbao.UserID) string {
	return "open:" + id.String() + ":" + u.String()
}

var walletDDL = []string{
	`CREATE TABLE IF NOT EXISTS accounts (
  user_id    BIGINT      NOT NULL PRIMARY KEY,
  balance    BIGINT      NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  CONSTRAINT no_overdraft CHECK (balance >= 0)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS ledger (
  seq        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  entry_key  VARCHAR(96) NOT NULL,
  user_id    BIGINT      NOT NULL,
  amount     BIGINT      NOT NULL,
  kind       VARCHAR(16) NOT NULL,
  packet_id  BIGINT      NOT NULL DEFAULT 0,
  created_at DATETIME(3) NOT NULL,
  UNIQUE KEY by_key (entry_key),
  KEY by_user (user_id, kind, seq)
) ENGINE=InnoDB`,
}

// Wallet is the accounts and append-only ledger, in their own database.
type Wallet struct {
	db  *sql.DB
	now func() time.Time
}

// OpenWallet opens (creating if needed) the wallet database of dsn.
func OpenWallet(ctx context.Context, dsn string, conns int, now func() time.Time) (*Wallet, error) {
	db, err := OpenDatabase(ctx, dsn, conns)
	if err != nil {
		return nil, fmt.Errorf("wallet: %w", err)
	}
	for _, stmt := range walletDDL {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("wallet: schema: %w", err)
		}
	}
	return &Wallet{db: db, now: now}, nil
}

// Close closes the pool.
func (w *Wallet) Close() error { return w.db.Close() }

// DB returns the pool, for verification.
func (w *Wallet) DB() *sql.DB { return w.db }

// Apply records e and moves its amount, in one transaction. If an entry
// with e's key exists, nothing moves and that entry is returned with
// fresh=false. A debit the balance does not cover fails with
// ErrInsufficientFunds and records nothing.
func (w *Wallet) Apply(ctx context.Context, e Entry) (Entry, bool, error) {
	e.At = w.now().UTC().Truncate(time.Millisecond)
	err := inTx(ctx, w.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO ledger (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
			e.Key, e.User, e.Amount, e.Kind, e.Packet, e.At)
		if err != nil {
			return err
		}
		e.Seq, _ = res.LastInsertId() // the driver always has it for an insert
		return move(ctx, tx, e)
	})
	switch {
	case mysqlErr(err, errDupEntry):
		old, err := w.entry(ctx, e.Key)
		return old, false, err
	case err != nil:
		return Entry{}, false, fmt.Errorf("wallet: apply %s: %w", e.Key, err)
	}
	return e, true, nil
}

// move changes the balance by e.Amount, refusing an overdraft.
func move(ctx context.Context, tx *sql.Tx, e Entry) error {
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

func (w *Wallet) entry(ctx context.Context, key string) (Entry, error) {
	var e Entry
	err := w.db.QueryRowContext(ctx, "SELECT seq, entry_key, user_id, amount, kind, packet_id, created_at FROM ledger WHERE entry_key = ?", key).
		Scan(&e.Seq, &e.Key, &e.User, &e.Amount, &e.Kind, &e.Packet, &e.At)
	if err != nil {
		return Entry{}, fmt.Errorf("wallet: entry %s: %w", key, err)
	}
	return e, nil
}

// Entry returns the entry with key, if any.
func (w *Wallet) Entry(ctx context.Context, key string) (Entry, bool, error) {
	e, err := w.entry(ctx, key)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
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
func (w *Wallet) History(ctx context.Context, user hongbao.UserID, kind string, cursor int64, limit int) ([]Entry, int64, error) {
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	rows, err := w.db.QueryContext(ctx, "SELECT seq, entry_key, user_id, amount, kind, packet_id, created_at FROM ledger "+
		"WHERE user_id = ? AND kind = ? AND seq < ? ORDER BY seq DESC LIMIT ?", user, kind, cursor, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("wallet: history of %s: %w", user, err)
	}
	defer rows.Close()
	var es []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Seq, &e.Key, &e.User, &e.Amount, &e.Kind, &e.Packet, &e.At); err != nil {
			return nil, 0, fmt.Errorf("wallet: history of %s: %w", user, err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("wallet: history of %s: %w", user, err)
	}
	if len(es) > limit {
		return es[:limit], es[limit-1].Seq, nil
	}
	return es, 0, nil
}

// OpenDatabase opens the database named in dsn, creating it if missing.
func OpenDatabase(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("dsn: names no database")
	}
	name := cfg.DBName
	cfg.DBName = ""
	admin, err := OpenDB(cfg.FormatDSN(), 1)
	if err != nil {
		return nil, err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"`")
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return OpenDB(dsn, conns)
}
