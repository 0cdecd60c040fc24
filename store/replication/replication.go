// Package replication drives MariaDB's own replication of a SET's
// database: GTID positions, semi-synchronous settings, fencing a primary,
// waiting until a replica applied what it received, promoting it, pointing
// a server at a new primary, and the errant transactions that forbid it.
// It holds no policy: set/failover decides the order. Files by subject:
// this one the servers' options and DSNs, fence.go fencing a primary,
// status.go what a replica says and waiting for it, promote.go promoting
// and repointing.
package replication

import (
	"fmt"
	"net"
	"strconv"
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
		SlaveArg(!primary), RoleArg(primary),
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

// RoleArg is the option that tells a server's crash recovery its role.
// MariaDB 10.11.14 drops a replica's uncommitted binary log tail (SlaveArg)
// only when it is started with init_rpl_role=SLAVE: with
// rpl_semi_sync_slave_enabled alone, an old primary restarted as a
// replica committed the 29 commits that had waited for an
// acknowledgement, errant, and was rebuilt instead of rejoined (the chaos
// run of 2026-11-28). loose-: a MariaDB without the option starts all the
// same (and recovers by SlaveArg).
func RoleArg(primary bool) string {
	if primary {
		return "--loose-init-rpl-role=MASTER"
	}
	return "--loose-init-rpl-role=SLAVE"
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
