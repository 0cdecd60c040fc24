package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// SetStatements is the DDL of a SET's own bookkeeping (database hb_set in
// the SET's MySQL, so it shares local transactions with the day tables):
//   - outbox: wallet entries (credits to openers, refunds) written in the
//     same transaction as the open or the close, delivered by the settler;
//     an open transaction's credits of one packet are one row, packed
//     (store/outboxrows.go).
//     Its keys need no unique index here: the detail row (one per user)
//     and the closed flag already make each entry once, and the ledger's
//     unique key makes delivery exactly once. Each row names the SET that
//     wrote it (set_name, empty for rows written before the column existed):
//     SETs sharing a MySQL server deliver only their own rows, and the rows
//     of a bucket moved away stay with the SET that wrote them, whose
//     settler delivers them;
//   - expiry: every packet until it is closed, so the settler finds expired
//     packets without scanning day tables;
//   - pending: packets whose debit is not settled yet, for the sweeper;
//   - events: webhook events (packet.sent, packet.opened, ...) written in
//     the same transaction as the change they report, while webhooks are
//     configured, and deleted once every endpoint accepted them; state 1
//     marks one that failed for a day of retries (hbctl webhook replay).
//     Like the outbox's, its rows stay with the SET that wrote them.
var SetStatements = []string{
	"CREATE DATABASE IF NOT EXISTS hb_set",
	`CREATE TABLE IF NOT EXISTS hb_set.outbox (
  id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  entry_key  VARCHAR(96) NOT NULL,
  user_id    BIGINT      NOT NULL,
  amount     BIGINT      NOT NULL,
  kind       VARCHAR(16) NOT NULL,
  packet_id  BIGINT      NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY by_packet (packet_id)
) ENGINE=InnoDB`,
	// Added after the first release: a MySQL that has the table without
	// the column gets it, its old rows named ''.
	`ALTER TABLE hb_set.outbox
  ADD COLUMN IF NOT EXISTS set_name VARCHAR(64) NOT NULL DEFAULT '',
  ADD INDEX IF NOT EXISTS by_set (set_name, id)`,
	// Added for packed credits (store/outboxrows.go): a row of the
	// credits of one packet's opens in one transaction holds them in
	// shares ("user:amount,..."), n of them; a row of one entry has
	// shares NULL and n 1, as every row written before.
	`ALTER TABLE hb_set.outbox
  ADD COLUMN IF NOT EXISTS n INT NOT NULL DEFAULT 1,
  ADD COLUMN IF NOT EXISTS shares MEDIUMTEXT NULL`,
	`CREATE TABLE IF NOT EXISTS hb_set.events (
  id           BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
  event_key    VARCHAR(96)   NOT NULL,
  type         VARCHAR(24)   NOT NULL,
  packet_id    BIGINT        NOT NULL,
  data         VARCHAR(1024) NOT NULL,
  created_at   DATETIME(3)   NOT NULL,
  set_name     VARCHAR(64)   NOT NULL,
  state        TINYINT       NOT NULL DEFAULT 0,
  attempts     INT           NOT NULL DEFAULT 0,
  next_at      DATETIME(3)   NOT NULL,
  delivered_to VARCHAR(512)  NOT NULL DEFAULT '',
  last_error   VARCHAR(255)  NOT NULL DEFAULT '',
  KEY by_due (set_name, state, next_at),
  KEY by_packet (packet_id, id)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS hb_set.expiry (
  packet_id  BIGINT      NOT NULL PRIMARY KEY,
  expires_at DATETIME(3) NOT NULL,
  KEY by_time (expires_at)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS hb_set.pending (
  packet_id  BIGINT      NOT NULL PRIMARY KEY,
  created_at DATETIME(3) NOT NULL,
  KEY by_time (created_at)
) ENGINE=InnoDB`,
}

// EnsureSet creates the SET's bookkeeping tables and its fence.
func EnsureSet(ctx context.Context, db *sql.DB) error {
	for _, stmt := range SetStatements {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: hb_set: %w", err)
		}
	}
	return EnsureFence(ctx, db)
}
