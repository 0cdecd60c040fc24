package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestInTxRetriesAnOlderSnapshot: a transaction whose snapshot is older
// than a table it reads (created after its first read, as a move's copy or
// the day tables' creation does) fails with MySQL's 1412, "please retry
// transaction"; that is retryable, and InTx's second attempt reads it.
// Before, the error went up as is, and a server answered it 500.
func TestInTxRetriesAnOlderSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := dbtest.DB(t, "a", 4)
	schema := fmt.Sprintf("hb_tx1412_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE " + schema) })
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+schema+".old (x INT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	attempts, got := 0, 0
	err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		attempts++
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+schema+".old").Scan(&n); err != nil { // the snapshot
			return err
		}
		if attempts == 1 {
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+schema+".young (x INT) ENGINE=InnoDB"); err != nil {
				return err
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+schema+".young VALUES (7)"); err != nil {
				return err
			}
		}
		err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(x), 0) FROM "+schema+".young").Scan(&got)
		if attempts == 1 && !sqldb.IsRetryable(err) {
			return fmt.Errorf("the first attempt read a table younger than its snapshot: %v, want error 1412", err)
		}
		return err
	})
	if err != nil || attempts != 2 || got != 7 {
		t.Fatalf("InTx = %v after %d attempts, read %d; want the second attempt to read 7", err, attempts, got)
	}
}
