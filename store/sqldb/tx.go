package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
)

// MySQL error numbers the adapters react to.
const (
	errDupEntry     = 1062
	errNoSuchTable  = 1146
	errBadDB        = 1049
	errDeadlock     = 1213
	errLockWaitTime = 1205
	// errTableDefChanged: the transaction's snapshot is older than a
	// table it read (created after it, e.g. by a move's copy or the
	// day tables' creation): "please retry transaction".
	errTableDefChanged = 1412
)

// isError reports whether err is a MySQL error with one of the numbers.
func isError(err error, numbers ...uint16) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	for _, n := range numbers {
		if me.Number == n {
			return true
		}
	}
	return false
}

// IsDupEntry reports whether err is a unique key violation.
func IsDupEntry(err error) bool { return isError(err, errDupEntry) }

// IsMissingTable reports whether err says a table (or its database) does
// not exist, which for a read of a day table means the packet does not exist.
func IsMissingTable(err error) bool { return isError(err, errNoSuchTable, errBadDB) }

// IsNoSuchTable reports whether err says a table does not exist in a
// database that does.
func IsNoSuchTable(err error) bool { return isError(err, errNoSuchTable) }

// IsRetryable reports whether a transaction failed before commit in a way
// a fresh attempt can succeed: a deadlock, a lock wait timeout, or a
// snapshot older than a table it read.
func IsRetryable(err error) bool { return retryable(err) }

// IsLockWait reports whether err is a lock wait that timed out.
func IsLockWait(err error) bool { return isError(err, errLockWaitTime) }

// retryable reports whether a transaction failed before commit in a way a
// fresh attempt can succeed.
func retryable(err error) bool { return isError(err, errDeadlock, errLockWaitTime, errTableDefChanged) }

// InTx runs fn in one transaction: BeginTx, fn, Commit, with Rollback
// deferred. A deadlock before commit is retried a few times; an error from
// Commit itself is returned as is, since the outcome is then unknown.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return InTxRetrying(ctx, db, nil, fn)
}

// InTxRetrying is InTx calling retrying (when not nil) before each retry
// after a deadlock or lock wait timeout, for the metrics.
func InTxRetrying(ctx context.Context, db *sql.DB, retrying func(), fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := range 6 {
		if attempt > 0 {
			if retrying != nil {
				retrying()
			}
			// Jittered backoff, so the transactions that deadlocked do
			// not meet again at once.
			pause := time.Duration(1+rand.IntN(5<<attempt)) * time.Millisecond
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
		if err = tryTx(ctx, db, fn); err == nil || !retryable(err) {
			return err
		}
	}
	// Still fighting after every retry: tell the client to come back.
	return fmt.Errorf("%v: %w", err, hongbao.ErrBusy)
}

func tryTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// IsUnreachable reports whether err says the database could not be reached
// or dropped the connection (refused, reset, timed out dialling, shut
// down): a dependency's outage, which clients should retry, not a fault of
// the request or of the server.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var ne *net.OpError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	// 1053: server shutdown in progress; 1927: connection killed; 1290:
	// the server is read-only, 4151: the account is locked (a fenced
	// primary during a failover: the SET's servers follow the new one
	// within a second).
	return isError(err, 1053, 1927, 1290, 4151)
}
