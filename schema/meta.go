package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// MetaStatements is the DDL of the topology database (the database of the
// meta DSN): the SETs, the bucket -> SET map and its version.
var MetaStatements = []string{
	`CREATE TABLE IF NOT EXISTS sets (
  name      VARCHAR(64) NOT NULL PRIMARY KEY,
  servers   TEXT        NOT NULL,
  mysql_dsn TEXT        NOT NULL,
  memcached TEXT        NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS buckets (
  bucket   INT         NOT NULL PRIMARY KEY,
  set_name VARCHAR(64) NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS version (
  id      TINYINT NOT NULL PRIMARY KEY,
  version BIGINT  NOT NULL
) ENGINE=InnoDB`,
}

// EnsureMeta creates the topology tables in db's current database.
func EnsureMeta(ctx context.Context, db *sql.DB) error {
	for _, stmt := range MetaStatements {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: meta: %w", err)
		}
	}
	return nil
}
