package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
