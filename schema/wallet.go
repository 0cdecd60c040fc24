package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// walletDDL: the balances and the append-only ledger; the unique entry key
// makes a second delivery of an entry a no-op.
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
	// Added for the daily statement (a day's entries by time) and the
	// user's monthly one (by user and time); a ledger without them gets
	// them.
	`ALTER TABLE ledger ADD INDEX IF NOT EXISTS by_time (created_at), ADD INDEX IF NOT EXISTS by_user_time (user_id, created_at)`,
	// daily_usage: what each user sent and received per day of the
	// cluster's time zone, counted in the transaction that debits the send
	// (or reserves the open), so the daily limits hold under concurrency.
	`CREATE TABLE IF NOT EXISTS daily_usage (
  user_id       BIGINT NOT NULL,
  day           DATE   NOT NULL,
  send_count    BIGINT NOT NULL DEFAULT 0,
  send_total    BIGINT NOT NULL DEFAULT 0,
  receive_total BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, day)
) ENGINE=InnoDB`,
	// user_limits: an operator's per-user daily limits (hbctl limits set);
	// a NULL keeps the configured limit, 0 is none.
	`CREATE TABLE IF NOT EXISTS user_limits (
  user_id             BIGINT      NOT NULL PRIMARY KEY,
  daily_send_count    BIGINT      NULL,
  daily_send_total    BIGINT      NULL,
  daily_receive_total BIGINT      NULL,
  updated_at          DATETIME(3) NOT NULL
) ENGINE=InnoDB`,
}

// EnsureWallet creates the wallet's tables if missing.
func EnsureWallet(ctx context.Context, db *sql.DB) error {
	for _, stmt := range walletDDL {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: wallet: %w", err)
		}
	}
	return nil
}
