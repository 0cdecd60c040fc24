package schema

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// MetaStatements is the DDL of the topology database (the database of the
// meta DSN): the SETs, the bucket -> SET map and its version, and the
// journal of rebalances (one row per rebalance, one per bucket it moves),
// which lets an interrupted apply continue where it stopped.
var MetaStatements = []string{
	`CREATE TABLE IF NOT EXISTS sets (
  name      VARCHAR(64) NOT NULL PRIMARY KEY,
  servers   TEXT        NOT NULL,
  mysql_dsn TEXT        NOT NULL,
  memcached TEXT        NOT NULL
) ENGINE=InnoDB`,
	// A SET's lifecycle: active (may receive buckets) or draining (every
	// bucket is to leave it); its weight scales its share of the load.
	`ALTER TABLE sets ADD COLUMN IF NOT EXISTS state VARCHAR(16) NOT NULL DEFAULT 'active'`,
	`ALTER TABLE sets ADD COLUMN IF NOT EXISTS weight INT NOT NULL DEFAULT 1`,
	`ALTER TABLE sets ADD COLUMN IF NOT EXISTS archive_dsn TEXT NOT NULL DEFAULT ''`,
	// The DSNs of the SET's MySQL replicas, one per line; failover swaps
	// the promoted one with mysql_dsn.
	`ALTER TABLE sets ADD COLUMN IF NOT EXISTS replicas TEXT NOT NULL DEFAULT ''`,
	`CREATE TABLE IF NOT EXISTS buckets (
  bucket   INT         NOT NULL PRIMARY KEY,
  set_name VARCHAR(64) NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS version (
  id      TINYINT NOT NULL PRIMARY KEY,
  version BIGINT  NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS rebalances (
  id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  kind       VARCHAR(16) NOT NULL,
  state      VARCHAR(16) NOT NULL,
  reverses   BIGINT      NOT NULL DEFAULT 0,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  note       TEXT        NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS moves (
  rebalance_id BIGINT      NOT NULL,
  bucket       INT         NOT NULL,
  from_set     VARCHAR(64) NOT NULL,
  to_set       VARCHAR(64) NOT NULL,
  step         VARCHAR(16) NOT NULL,
  rows_planned BIGINT      NOT NULL DEFAULT 0,
  rows_copied  BIGINT      NOT NULL DEFAULT 0,
  passes       INT         NOT NULL DEFAULT 0,
  freeze_ms    INT         NOT NULL DEFAULT 0,
  lease_until  DATETIME(3) NULL,
  started_at   DATETIME(3) NULL,
  updated_at   DATETIME(3) NOT NULL,
  error        TEXT        NOT NULL,
  PRIMARY KEY (rebalance_id, bucket),
  KEY by_step (step)
) ENGINE=InnoDB`,
	// A failover's promotion of a SET's replica until it is published
	// (topology.RecordPromotion): a failover run again resumes it and
	// never promotes a second replica of the same primary.
	`CREATE TABLE IF NOT EXISTS promotions (
  set_name    VARCHAR(64) NOT NULL PRIMARY KEY,
  from_dsn    TEXT        NOT NULL,
  to_dsn      TEXT        NOT NULL,
  promoted_at DATETIME(3) NOT NULL
) ENGINE=InnoDB`,
}

// EnsureMeta creates the topology tables in db's current database, and
// the failover epochs' table of the core group the database lives on.
func EnsureMeta(ctx context.Context, db *sql.DB) error {
	for _, stmt := range MetaStatements {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: meta: %w", err)
		}
	}
	// The core group's failover epochs (sqldb.Epoch): empty until its
	// first failover, but there, so the probes of its members by every
	// process's pools are one statement each.
	return sqldb.EnsureEpochTable(ctx, db)
}
