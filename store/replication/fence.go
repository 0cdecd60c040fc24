package replication

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
