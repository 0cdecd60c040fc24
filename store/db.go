// Package store is the MySQL adapter: it creates packets, runs the open
// transaction and reads packets with their records, turning driver errors
// into the domain errors of package hongbao.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
)

// MySQL error numbers the store reacts to.
const (
	errDupEntry     = 1062
	errNoSuchTable  = 1146
	errBadDB        = 1049
	errDeadlock     = 1213
	errLockWaitTime = 1205
)

// OpenDB opens a pool on dsn with the session settings the store relies on:
// times parsed in UTC, a UTC session time zone and the pool size given.
func OpenDB(dsn string, maxConns int) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse dsn: %w", err)
	}
	cfg.ParseTime = true
	// One round trip per statement instead of prepare + execute + close:
	// the open transaction is a handful of statements, each on the hot path.
	cfg.InterpolateParams = true
	// Several statements per round trip where the open transaction sends
	// them together (every value is still escaped by the driver).
	cfg.MultiStatements = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connector: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// mysqlErr reports whether err is a MySQL error with one of the numbers.
func mysqlErr(err error, numbers ...uint16) bool {
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

// missingTable reports whether err says the day table (or its database) does
// not exist, which for a read means the packet does not exist.
func missingTable(err error) bool { return mysqlErr(err, errNoSuchTable, errBadDB) }

// retryable reports whether a transaction failed before commit in a way a
// fresh attempt can succeed.
func retryable(err error) bool {
	var r *mysqlRetry
	return errors.As(err, &r) || mysqlErr(err, errDeadlock, errLockWaitTime)
}

// inTx runs fn in one transaction: BeginTx, fn, Commit, with Rollback
// deferred. A deadlock before commit is retried a few times; an error from
// Commit itself is returned as is, since the outcome is then unknown.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := range 6 {
		if attempt > 0 {
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
