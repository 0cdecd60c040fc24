// Package sqldb is the MySQL plumbing under every adapter: pools opened
// with the session settings hongbao relies on, switchable pools that follow
// a SET's failover (Switch), the core group's pools that follow its writable
// member (OpenGroup, with the failover epoch), the one transaction shape with
// its deadlock retries (InTx), and the classification of MySQL's errors.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Open opens a pool on dsn with the session settings every hongbao database
// relies on: times parsed in UTC, a UTC session time zone, one round trip
// per statement and the pool size given.
func Open(dsn string, maxConns int) (*sql.DB, error) {
	c, err := connector(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	tune(db, maxConns)
	return db, nil
}

// connector is the driver's connector of dsn with hongbao's session
// settings (see Open).
func connector(dsn string) (driver.Connector, error) { return connectorDial(dsn, nil) }

// connectorDial is connector with its own dial function (nil: the
// driver's).
func connectorDial(dsn string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (driver.Connector, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("schema: parse dsn: %w", err)
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
	// A write waits only when the server stopped reading (a paused or
	// wedged mariadbd: its kernel still acknowledges, so neither the
	// keepalive nor TCP_USER_TIMEOUT ends it); every statement is small
	// enough to leave at once. No default read timeout: a live server may
	// rightly take long to answer (a semi-sync commit waits for its
	// replica forever by design, MASTER_GTID_WAIT, a big copy), and a
	// vanished one is noticed by the connection's keepalive (liveDial).
	// Callers that want a bound on answers set readTimeout in the DSN
	// (the failover's operator pools, the group's probes) or use a
	// context.
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	cfg.DialFunc = liveDial(dial)
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("schema: connector: %w", err)
	}
	return c, nil
}

// Addr is dsn's network address (host:port), for messages and logs: never
// its password. It is "?" when dsn does not parse, so that a message about
// a bad DSN still reads.
func Addr(dsn string) string {
	if c, err := mysql.ParseDSN(dsn); err == nil {
		return c.Addr
	}
	return "?"
}

// tune sizes a pool.
func tune(db *sql.DB, maxConns int) {
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(30 * time.Minute)
}

// OpenCreate opens the database named in dsn as Open does, creating the
// database first if it is missing.
func OpenCreate(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("schema: parse dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("schema: dsn names no database")
	}
	name := cfg.DBName
	cfg.DBName = ""
	admin, err := Open(cfg.FormatDSN(), 1)
	if err != nil {
		return nil, err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"`")
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("schema: create database %s: %w", name, err)
	}
	return Open(dsn, conns)
}
