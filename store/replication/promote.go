package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Promote turns a replica that applied everything into a primary: its
// replication stopped and forgotten, a semi-sync primary with timeout,
// writable. waitNoReplica is rpl_semi_sync_master_wait_no_slave: true (the
// default for money) makes its commits wait while no replica is connected;
// false makes it replicate asynchronously while it has none (a lone
// primary keeps writing, on one machine), semi-sync again as soon as a
// replica connects. stamp (when not nil) runs once replication is
// forgotten and before the server is a semi-sync primary and writable:
// its writes (the operator's, through read_only) wait for no
// acknowledgement and precede every application write in its binary log.
func Promote(ctx context.Context, db *sql.DB, timeout time.Duration, waitNoReplica bool, stamp func(context.Context, *sql.DB) error) error {
	// A replica restarted and not started yet holds in its relay log
	// commits it acknowledged: applied before RESET SLAVE ALL discards it.
	if err := ApplyIfStopped(ctx, db); err != nil {
		return fmt.Errorf("replication: promote: %w", err)
	}
	if err := execAll(ctx, db, "promote", "STOP SLAVE", "RESET SLAVE ALL"); err != nil {
		return err
	}
	if stamp != nil {
		if err := stamp(ctx, db); err != nil {
			return fmt.Errorf("replication: promote: %w", err)
		}
	}
	// wait_no_slave before enabled: enabling the master with it off and
	// no replica switches semi-sync off at once.
	return execAll(ctx, db, "promote",
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_timeout = %d", TimeoutMS(timeout)),
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_wait_no_slave = %d", boolInt(waitNoReplica)),
		"SET GLOBAL rpl_semi_sync_master_enabled = 1", "SET GLOBAL read_only = 0")
}

// execAll runs stmts on db in order; what names the step in errors.
func execAll(ctx context.Context, db *sql.DB, what string, stmts ...string) error {
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("replication: %s: %s: %w", what, stmt, err)
		}
	}
	return nil
}

// Source is a primary to replicate from, with the replication account.
type Source struct {
	Host           string
	Port           int
	User, Password string
}

// Follow makes db's server a read-only replica of src, starting after
// the GTIDs it has itself (fromBinlog: an old primary rejoining, whose own
// writes are in its binary log) or those it applied as a replica.
func Follow(ctx context.Context, db *sql.DB, src Source, fromBinlog bool) error {
	stmts := []string{"SET GLOBAL read_only = 1", "SET GLOBAL rpl_semi_sync_master_enabled = 0",
		"SET GLOBAL rpl_semi_sync_slave_enabled = 1", "STOP SLAVE"}
	if fromBinlog {
		stmts = append(stmts, "RESET SLAVE ALL", "SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos")
	}
	if err := execAll(ctx, db, "follow", stmts...); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, "+
		"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", src.Host, src.Port, src.User, src.Password); err != nil {
		return fmt.Errorf("replication: change master: %w", err)
	}
	if _, err := db.ExecContext(ctx, "START SLAVE"); err != nil {
		return fmt.Errorf("replication: start slave: %w", err)
	}
	return nil
}

// Resume starts replication again on db's server, a read-only semi-sync
// replica of the primary it has configured (after a restart: no member
// starts replicating by itself, see ServerArgs): its relay log applied
// first, at most timeout (StartReplica). The caller checked that this
// primary is the published one.
func Resume(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	if err := execAll(ctx, db, "resume", "SET GLOBAL read_only = 1", "SET GLOBAL rpl_semi_sync_master_enabled = 0",
		"SET GLOBAL rpl_semi_sync_slave_enabled = 1"); err != nil {
		return err
	}
	_, err := StartReplica(ctx, db, timeout)
	return err
}

// WaitNoReplica sets db's rpl_semi_sync_master_wait_no_slave (see
// Promote).
func WaitNoReplica(ctx context.Context, db *sql.DB, wait bool) error {
	if _, err := db.ExecContext(ctx, "SET GLOBAL rpl_semi_sync_master_wait_no_slave = ?", boolInt(wait)); err != nil {
		return fmt.Errorf("replication: wait_no_slave: %w", err)
	}
	return nil
}

// SemiSync reports whether db's server is a semi-sync primary now
// (Rpl_semi_sync_master_status: off when it degraded to asynchronous
// replication) and how many semi-sync replicas are connected to it.
func SemiSync(ctx context.Context, db *sql.DB) (on bool, clients int, err error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_clients')")
	if err != nil {
		return false, 0, fmt.Errorf("replication: semi-sync status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return false, 0, fmt.Errorf("replication: semi-sync status: %w", err)
		}
		switch strings.ToLower(name) {
		case "rpl_semi_sync_master_status":
			on = value == "ON"
		case "rpl_semi_sync_master_clients":
			clients, _ = strconv.Atoi(value)
		}
	}
	return on, clients, rows.Err()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetTimeout sets db's semi-sync timeout (see ServerArgs).
func SetTimeout(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	if _, err := db.ExecContext(ctx, "SET GLOBAL rpl_semi_sync_master_timeout = ?", TimeoutMS(timeout)); err != nil {
		return fmt.Errorf("replication: semi-sync timeout: %w", err)
	}
	return nil
}

func isError(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}

// Unacknowledged reports why db's server, as a primary, could acknowledge
// a commit that no replica has received ("" when it cannot): semi-sync
// master off, a wait point other than AFTER_SYNC (the commit is visible
// before a replica has it), rpl_semi_sync_master_wait_no_slave off (it
// commits alone while no replica is connected), or a timeout short of
// WaitForever (it degrades to asynchronous replication). An automatic
// failover is safe only while it cannot: a primary cut off from its
// replicas, and only from them, then commits nothing.
func Unacknowledged(ctx context.Context, db *sql.DB) (string, error) {
	var enabled, waitNoSlave int
	var timeoutMS int64
	var point string
	err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.rpl_semi_sync_master_enabled, @@GLOBAL.rpl_semi_sync_master_wait_point, "+
		"@@GLOBAL.rpl_semi_sync_master_wait_no_slave, @@GLOBAL.rpl_semi_sync_master_timeout").Scan(&enabled, &point, &waitNoSlave, &timeoutMS)
	if err != nil {
		return "", fmt.Errorf("replication: semi-sync settings: %w", err)
	}
	var why []string
	if enabled != 1 {
		why = append(why, "rpl_semi_sync_master_enabled off")
	}
	if point != "AFTER_SYNC" {
		why = append(why, "rpl_semi_sync_master_wait_point "+point)
	}
	if waitNoSlave != 1 {
		why = append(why, "rpl_semi_sync_master_wait_no_slave off (--accept-single-copy until a rejoin)")
	}
	if timeoutMS < TimeoutMS(0) {
		why = append(why, fmt.Sprintf("rpl_semi_sync_master_timeout %d ms (degrades to asynchronous)", timeoutMS))
	}
	return strings.Join(why, ", "), nil
}
