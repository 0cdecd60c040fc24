package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// The fence lives in each SET's own MySQL: the buckets that SET owns. Every
// write transaction of a packet takes a shared lock on its bucket's row and
// fails without it, and moving a bucket away deletes the row (waiting for
// those locks), so once a move has begun no write for the bucket can commit
// on the old SET. The set name is part of the key so several SETs may share
// one MySQL server in tests.
const fenceDDL = `CREATE TABLE IF NOT EXISTS hb_fence.owned (
  set_name VARCHAR(64) NOT NULL,
  bucket   INT         NOT NULL,
  version  BIGINT      NOT NULL,
  PRIMARY KEY (set_name, bucket)
) ENGINE=InnoDB`

// EnsureFence creates the fence table.
func EnsureFence(ctx context.Context, db *sql.DB) error {
	for _, stmt := range []string{"CREATE DATABASE IF NOT EXISTS hb_fence", fenceDDL} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: fence: %w", err)
		}
	}
	return nil
}
