// Package replication drives MariaDB's own replication of a SET's
// database: GTID positions, semi-synchronous settings, fencing a primary,
// waiting until a replica applied what it received, promoting it, pointing
// a server at a new primary, and the errant transactions that forbid it.
// It holds no policy: hbctl's failover and rejoin decide the order.
package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// WaitForever is the semi-sync timeout that stands for "never degrade to
// asynchronous replication": a year, in effect forever (MariaDB's largest
// value, 2^64-1 ms, risks overflowing its deadline arithmetic).
const WaitForever = 365 * 24 * time.Hour

// TimeoutMS returns MariaDB's rpl_semi_sync_master_timeout (milliseconds)
// for d; 0 is WaitForever.
func TimeoutMS(d time.Duration) int64 {
	if d <= 0 {
		d = WaitForever
	}
	return d.Milliseconds()
}

// ServerArgs are the mariadbd options of a member of a replicated SET
// database (a replica may become the primary and the old primary its
// replica): the binary log with GTIDs in strict mode,
// every replicated transaction logged again (log_slave_updates, so a
// promoted replica can feed the others), durable binary log, and
// semi-synchronous replication in both roles, waiting AFTER_SYNC: a commit
// is written to the binary log, then waits until a replica has the event
// in its relay log, and only then commits in InnoDB and answers the
// client. The timeout decides what happens when no replica acknowledges:
// wait (the default for money, TimeoutMS(0)) or, after it, degrade to
// asynchronous replication, when acknowledged commits may exist on the
// primary alone.
//
// Only the primary is a semi-sync master: MariaDB makes a replica that
// logs what it applies and is a semi-sync master wait for an
// acknowledgement of its own, which no one sends, so its applier would
// stall. Promote turns it on, Follow off; a server's role across restarts
// is whether it has a primary configured (master.info in its data
// directory): see MasterArg.
//
// No member starts replicating by itself (SkipSlaveStart): a replica that
// comes back after a failover it missed (down, or restarted during it)
// still has the old primary configured, and replicating from it again
// would acknowledge the old primary's commits, which the promoted replica
// lacks: two primaries acknowledging money. Replication is started by
// whoever checked the topology first: hbctl replica start (the startup
// step: scripts/dev.sh runs it after each replica's start) and hbctl set
// rejoin (core rejoin).
func ServerArgs(serverID int, timeout time.Duration, primary bool) []string {
	return []string{
		MasterArg(primary),
		"--server-id=" + strconv.Itoa(serverID),
		"--log-bin", "--log-slave-updates=1", "--binlog-format=ROW", "--sync-binlog=1",
		"--gtid-strict-mode=1",
		SlaveArg(!primary),
		"--rpl-semi-sync-master-wait-point=AFTER_SYNC",
		"--rpl-semi-sync-master-timeout=" + strconv.FormatInt(TimeoutMS(timeout), 10),
		// What a replica acknowledged and did not apply is in its relay
		// log only: kept across a restart (MariaDB's GTID replication
		// would discard it at its start) and applied before replication
		// starts again (StartReplica). See relaylog.go. Nobody but a
		// startup step that checks the topology starts it (above).
		SkipSlaveStart, "--relay-log-recovery=0",
	}
}

// SkipSlaveStart is the option that keeps a server from starting its
// replication threads when it starts (see ServerArgs).
const SkipSlaveStart = "--skip-slave-start"

// SlaveArg is the option that makes a server a semi-sync replica or not.
// It also decides its crash recovery: a semi-sync replica drops from its
// binary log the transactions it had not committed (an old primary's
// commits that waited for an acknowledgement, which no client was told
// of), a primary commits them (its replicas may have them already).
func SlaveArg(replica bool) string {
	if replica {
		return "--rpl-semi-sync-slave-enabled=1"
	}
	return "--rpl-semi-sync-slave-enabled=0"
}

// MasterArg is the option that makes a server a semi-sync master
// (primary) or not.
func MasterArg(primary bool) string {
	if primary {
		return "--rpl-semi-sync-master-enabled=1"
	}
	return "--rpl-semi-sync-master-enabled=0"
}

// Addr returns the host and port of a DSN's TCP address.
func Addr(dsn string) (host string, port int, err error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", 0, fmt.Errorf("replication: dsn: %w", err)
	}
	h, p, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return "", 0, fmt.Errorf("replication: dsn %q: address: %w", cfg.Addr, err)
	}
	port, err = strconv.Atoi(p)
	return h, port, err
}

// WithUser returns dsn's address and database with another user and
// password: the operator's (administrator) or the replication account.
func WithUser(dsn, user, password string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("replication: dsn: %w", err)
	}
	cfg.User, cfg.Passwd = user, password
	return cfg.FormatDSN(), nil
}

// readOnlyPatience is how long Fence lets SET GLOBAL read_only wait for
// the commits in progress: each normally ends within milliseconds, once a
// replica acknowledges it; one still waiting after a second waits for an
// acknowledgement that no replica sends.
const readOnlyPatience = time.Second

// Fenced is what Fence achieved.
type Fenced struct {
	// Final: read_only is on and every application connection is gone, so
	// the server's binary log is final: nothing can commit there any more.
	Final bool
	// Waiting is how many commits wait for a semi-sync acknowledgement
	// (when not Final): in the binary log, invisible, never answered.
	Waiting int
}

// Fence takes db's server away from the application (the accounts named
// users, on every host) without ever making visible a commit that no
// replica acknowledged.
//
// A commit waiting AFTER_SYNC for an acknowledgement is in the binary log
// but not in InnoDB: nobody can read it. Killing its connection (or
// switching semi-sync off) ends the wait and commits it in InnoDB on this
// server alone, where any reader would see it: a settler would pay it, a
// re-asked open would answer already_opened with it, and the promoted
// replica lacks it. So Fence never kills a connection that may be
// committing. Instead:
//
//  1. the application's accounts are locked (not logged: a DDL in the
//     binary log would itself wait for an acknowledgement): no new
//     connection is let in, on this server, from now on and across restarts,
//     until Unlock (a rejoin, a promotion);
//  2. SET GLOBAL read_only = 1, which waits for every commit in progress.
//     When it returns within readOnlyPatience no commit waits: the
//     application's connections are killed (twice, for those that slipped
//     in between the list and the kill) and the fence is Final;
//  3. otherwise commits wait for an acknowledgement nobody sends: the
//     statement is cancelled and nothing is killed. The connections left
//     can only read what replicas acknowledged, and their commits wait
//     like the others; the caller must make sure no replica acknowledges
//     this server any more (stop their receiving threads) before it
//     promotes one.
func Fence(ctx context.Context, db *sql.DB, users []string) (Fenced, error) {
	if err := Lock(ctx, db, users); err != nil {
		return Fenced{}, err
	}
	roConn, err := db.Conn(ctx)
	if err != nil {
		return Fenced{}, fmt.Errorf("replication: fence: %w", err)
	}
	defer roConn.Close()
	var roID int64
	if err := roConn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&roID); err != nil {
		return Fenced{}, fmt.Errorf("replication: fence: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := roConn.ExecContext(ctx, "SET GLOBAL read_only = 1")
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(readOnlyPatience):
		// Only the statement: its connection (and the commits) stay.
		if _, kerr := db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(roID, 10)); kerr != nil && !isError(kerr, 1094) {
			return Fenced{}, fmt.Errorf("replication: fence: cancel read_only: %w", kerr)
		}
		<-done
		n, werr := waitingCommits(ctx, db)
		if werr != nil {
			return Fenced{}, werr
		}
		return Fenced{Waiting: n}, nil
	}
	if err != nil {
		return Fenced{}, fmt.Errorf("replication: fence: read_only: %w", err)
	}
	for range 2 {
		if err := KillApplication(ctx, db, roID); err != nil {
			return Fenced{}, err
		}
	}
	return Fenced{Final: true}, nil
}

// waitingCommits counts the commits waiting for a semi-sync
// acknowledgement on db's server.
func waitingCommits(ctx context.Context, db *sql.DB) (int, error) {
	var name string
	var n int
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(&name, &n)
	if err != nil {
		return 0, fmt.Errorf("replication: fence: waiting commits: %w", err)
	}
	return n, nil
}

// Lock locks every account of db's server named one of users (on every
// host), so the application cannot connect there; existing connections
// stay. It is not written to the binary log: it is this server's own
// state, not data its replicas should copy.
func Lock(ctx context.Context, db *sql.DB, users []string) error {
	return setLock(ctx, db, users, "LOCK")
}

// Unlock undoes Lock: the application may connect to db's server again
// (a replica it reads from, or a promoted primary).
func Unlock(ctx context.Context, db *sql.DB, users []string) error {
	return setLock(ctx, db, users, "UNLOCK")
}

func setLock(ctx context.Context, db *sql.DB, users []string, how string) error {
	if len(users) == 0 {
		return nil
	}
	rows, err := db.QueryContext(ctx, "SELECT user, host FROM mysql.user WHERE user IN ("+placeholders(len(users))+")", anys(users)...)
	if err != nil {
		return fmt.Errorf("replication: account %s: %w", strings.ToLower(how), err)
	}
	var accounts [][2]string
	for rows.Next() {
		var a [2]string
		if err := rows.Scan(&a[0], &a[1]); err != nil {
			rows.Close()
			return fmt.Errorf("replication: account %s: %w", strings.ToLower(how), err)
		}
		accounts = append(accounts, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replication: account %s: %w", strings.ToLower(how), err)
	}
	for _, a := range accounts {
		// Unlogged for this statement only (SET STATEMENT): a session
		// variable would stay off on the pooled connection, and the
		// next write through it (a promotion's epoch stamp) would be
		// missing from the binary log. ALTER USER is not preparable:
		// the names are quoted here.
		q := "SET STATEMENT sql_log_bin = 0 FOR ALTER USER " + quote(a[0]) + "@" + quote(a[1]) + " ACCOUNT " + how
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("replication: account %s %s@%s: %w", strings.ToLower(how), a[0], a[1], err)
		}
	}
	return nil
}

// quote is s as a MariaDB string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// KillApplication kills every connection to db's server but the caller's
// own, except's, the server's threads, the replication threads and the
// replicas' binlog dumps.
func KillApplication(ctx context.Context, db *sql.DB, except ...int64) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("replication: kill: %w", err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `SELECT id FROM information_schema.processlist
		WHERE id <> CONNECTION_ID() AND user NOT IN ('system user', 'event_scheduler')
		AND command NOT LIKE 'Binlog Dump%' AND command NOT IN ('Daemon', 'Slave_IO', 'Slave_SQL', 'Slave_worker')`)
	if err != nil {
		return fmt.Errorf("replication: kill: processlist: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("replication: kill: %w", err)
		}
		if !slices.Contains(except, id) {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replication: kill: processlist: %w", err)
	}
	for _, id := range ids {
		// Gone already: 1094 unknown thread.
		if _, err := conn.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err != nil && !isError(err, 1094) {
			return fmt.Errorf("replication: kill %d: %w", id, err)
		}
	}
	return nil
}

// Status is what a replica says of its replication (SHOW SLAVE STATUS).
type Status struct {
	Configured bool   // a primary is configured
	MasterHost string // the primary it replicates from
	MasterPort int
	IORunning  string // Slave_IO_Running: Yes, No, Connecting
	SQLRunning string // Slave_SQL_Running
	IOPos      string // Gtid_IO_Pos: the GTIDs received into the relay log
	SlavePos   string // @@gtid_slave_pos: the GTIDs applied (SHOW SLAVE STATUS lacks Gtid_Slave_Pos)
	LastError  string // the IO or SQL thread's last error
	// Lag is Seconds_Behind_Master, whole seconds; LagKnown is false when
	// MariaDB reports none (NULL: a thread is not running).
	Lag      time.Duration
	LagKnown bool
}

// Fresh reports whether the replica replicates (both threads running)
// and applies within max of its primary: fit to serve reads that may
// trail the primary by that much.
func (s Status) Fresh(max time.Duration) bool {
	return s.Configured && s.IORunning == "Yes" && s.SQLRunning == "Yes" && s.LagKnown && s.Lag <= max
}

// ReplicaStatus reads db's SHOW SLAVE STATUS.
func ReplicaStatus(ctx context.Context, db *sql.DB) (Status, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return Status{}, fmt.Errorf("replication: status: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Status{}, err
	}
	if !rows.Next() {
		return Status{}, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return Status{}, fmt.Errorf("replication: status: %w", err)
	}
	get := func(name string) string {
		if i := slices.Index(cols, name); i >= 0 {
			return vals[i].String
		}
		return ""
	}
	s := Status{Configured: true, MasterHost: get("Master_Host"), IORunning: get("Slave_IO_Running"),
		SQLRunning: get("Slave_SQL_Running"), IOPos: get("Gtid_IO_Pos")}
	s.MasterPort, _ = strconv.Atoi(get("Master_Port"))
	if secs, err := strconv.Atoi(get("Seconds_Behind_Master")); err == nil {
		s.Lag, s.LagKnown = time.Duration(secs)*time.Second, true
	}
	s.LastError = strings.TrimSpace(get("Last_IO_Error") + " " + get("Last_SQL_Error"))
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return Status{}, fmt.Errorf("replication: status: %w", err)
	}
	// Only SHOW ALL SLAVES STATUS has a Gtid_Slave_Pos column: the
	// applied position is the global variable.
	if s.SlavePos, err = SlavePos(ctx, db); err != nil {
		return Status{}, err
	}
	return s, nil
}

// SlavePos returns the GTIDs db's server applied as a replica
// (@@gtid_slave_pos), where it goes on replicating from.
func SlavePos(ctx context.Context, db *sql.DB) (string, error) {
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_slave_pos").Scan(&pos); err != nil {
		return "", fmt.Errorf("replication: gtid_slave_pos: %w", err)
	}
	return pos, nil
}

// BinlogPos returns the last GTID db's server wrote to its binary log per
// domain (@@gtid_binlog_pos), what MASTER_GTID_WAIT waits for.
func BinlogPos(ctx context.Context, db *sql.DB) (string, error) {
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		return "", fmt.Errorf("replication: gtid_binlog_pos: %w", err)
	}
	return pos, nil
}

// BinlogState returns every GTID db's server has in its binary log, as the
// last one per domain and server (@@gtid_binlog_state).
func BinlogState(ctx context.Context, db *sql.DB) (State, error) {
	var s string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_state").Scan(&s); err != nil {
		return nil, fmt.Errorf("replication: gtid_binlog_state: %w", err)
	}
	return ParseState(s)
}

// ErrWaitTimeout is WaitApplied's timeout.
var ErrWaitTimeout = errors.New("replication: the replica did not apply the position in time")

// WaitApplied waits until db's replica has applied pos (MASTER_GTID_WAIT),
// at most timeout.
func WaitApplied(ctx context.Context, db *sql.DB, pos string, timeout time.Duration) error {
	if pos == "" {
		return nil
	}
	var r sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds()).Scan(&r); err != nil {
		return fmt.Errorf("replication: MASTER_GTID_WAIT(%s): %w", pos, err)
	}
	if !r.Valid || r.Int64 != 0 {
		return fmt.Errorf("%w: %s after %v", ErrWaitTimeout, pos, timeout)
	}
	return nil
}

// StopIO stops the replica's receiving thread: from then on it
// acknowledges nothing to its primary, which (semi-sync without degrade)
// can then acknowledge no commit to its clients.
func StopIO(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		return fmt.Errorf("replication: stop io thread: %w", err)
	}
	return nil
}

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
