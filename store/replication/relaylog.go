package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Why a restarted replica must apply its relay log itself.
//
// A semi-sync replica acknowledges a commit once the event is in its
// relay log, before it has applied it: a client was told "committed" for
// every transaction in there. MariaDB throws the relay log away whenever
// replication starts in GTID mode (MASTER_USE_GTID) with both threads
// stopped (start_slave_threads: "relay logs are not very useful when using
// GTID"), which is every server start without --skip-slave-start, whatever
// relay_log_recovery says, and every START SLAVE after a STOP SLAVE; the
// replica then fetches again from the primary from gtid_slave_pos. With the
// primary lost before it has (a double fault: the replica restarted, then
// the primary died), the acknowledged commits that were not yet applied
// are gone: the promoted replica lacks them. ApplyRelayLog applies them
// first, outside GTID mode (where nothing is purged), from exactly the
// first transaction gtid_slave_pos lacks.

// relayApplyPatience bounds how long Promote waits for a stopped
// replica's relay log to be applied.
const relayApplyPatience = 5 * time.Minute

// ApplyIfStopped applies db's relay log (ApplyRelayLog) when db is a
// replica whose threads are both stopped (restarted, not started yet);
// with a thread running the relay log is in use and the applier goes on
// by itself. A failover calls it before it reads what a replica received:
// such a replica's Gtid_IO_Pos is empty, its relay log applied is in
// gtid_slave_pos. Promote calls it before forgetting the replication.
func ApplyIfStopped(ctx context.Context, db *sql.DB) error {
	st, err := ReplicaStatus(ctx, db)
	if err != nil || !st.Configured || st.IORunning != "No" || st.SQLRunning != "No" {
		return err
	}
	_, err = ApplyRelayLog(ctx, db, relayApplyPatience)
	return err
}

// RelayPos is a position in a replica's relay log.
type RelayPos struct {
	File string
	Pos  int64
}

// relayScan is what a replica's relay log holds beyond what it applied:
// where the first transaction it has not applied starts, the last
// complete transaction per domain (what applying it all reaches), and
// how many complete transactions it has not applied.
type relayScan struct {
	start   *RelayPos
	last    map[uint32]GTID
	pending int
}

var gtidInfo = regexp.MustCompile(`GTID (\d+)-(\d+)-(\d+)`)

// ApplyRelayLog applies what db's replica has in its relay log and has
// not applied yet (acknowledged to its primary, maybe answered to a
// client), with both replication threads stopped (a server started with
// --skip-slave-start, or after STOP SLAVE) and without its primary: the
// SQL thread alone, outside GTID mode, from the first transaction
// gtid_slave_pos lacks, until it applied the last complete one (a partial
// transaction at the end, cut off by a crash, was never acknowledged). It
// leaves both threads stopped and the replica in GTID mode
// (MASTER_USE_GTID = slave_pos), its relay log applied and discarded, and
// returns the GTID position it applied up to (@@gtid_slave_pos). A server
// that is no replica is left alone; one with nothing left to apply is
// only put back in GTID mode (a failed run left it outside). Running
// threads are refused: the relay log is in use.
func ApplyRelayLog(ctx context.Context, db *sql.DB, timeout time.Duration) (string, error) {
	st, err := ReplicaStatus(ctx, db)
	if err != nil || !st.Configured {
		return "", err
	}
	if st.IORunning != "No" || st.SQLRunning != "No" {
		return "", fmt.Errorf("replication: apply relay log: replication threads running (IO %s, SQL %s): stop them first", st.IORunning, st.SQLRunning)
	}
	applied, err := alignSlavePos(ctx, db, st.SlavePos)
	if err != nil {
		return "", err
	}
	scan, err := scanRelayLog(ctx, db, byDomain(applied))
	if err != nil {
		return "", err
	}
	if scan.pending > 0 {
		if err := applyFrom(ctx, db, *scan.start, scan.last, timeout); err != nil {
			return "", err
		}
	}
	// GTID mode again: the relay log, all applied, is discarded at the
	// next START SLAVE and the primary is asked for what follows
	// gtid_slave_pos.
	if err := execAll(ctx, db, "apply relay log", "CHANGE MASTER TO MASTER_USE_GTID = slave_pos"); err != nil {
		return "", err
	}
	return SlavePos(ctx, db)
}

// alignSlavePos returns what db's replica applied, per domain the later
// of gtid_slave_pos and its binary log (gtid_binlog_pos), and moves
// gtid_slave_pos up to it where it lags.
//
// Why: with log_slave_updates a replica's binary log holds every
// transaction it committed, applied from its primary or not, while
// MariaDB records a DDL's GTID in gtid_slave_pos apart from the DDL
// itself: a kill -9 between the two leaves gtid_slave_pos behind the
// binary log. Applying or fetching from there again applies that DDL a
// second time, which gtid_strict_mode refuses ("would create an
// out-of-order sequence number") and replication stops for good, its
// primary's writes waiting for an acknowledgement that never comes. A
// semi-sync replica's crash recovery leaves only committed transactions
// in its binary log (SlaveArg), so the binary log is what it applied.
// Both replication threads are stopped (the caller checked).
func alignSlavePos(ctx context.Context, db *sql.DB, slavePos string) (State, error) {
	applied, err := ParseState(slavePos)
	if err != nil {
		return nil, err
	}
	binlogPos, err := BinlogPos(ctx, db)
	if err != nil {
		return nil, err
	}
	written, err := ParseState(binlogPos)
	if err != nil {
		return nil, err
	}
	merged, lagged := laterPerDomain(applied, written)
	if !lagged {
		return applied, nil
	}
	if _, err := db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ?", merged.String()); err != nil {
		return nil, fmt.Errorf("replication: gtid_slave_pos %s behind the binary log %s: set it to %s: %w", slavePos, binlogPos, merged, err)
	}
	return merged, nil
}

// laterPerDomain returns, per domain, the GTID with the higher sequence
// number of a's and b's (one GTID per domain each, as gtid_slave_pos and
// gtid_binlog_pos hold), and whether b's was higher anywhere.
func laterPerDomain(a, b State) (State, bool) {
	top := func(s State) map[uint32]GTID {
		m := map[uint32]GTID{}
		for k, seq := range s {
			if cur, ok := m[k[0]]; !ok || seq > cur.Seq {
				m[k[0]] = GTID{k[0], k[1], seq}
			}
		}
		return m
	}
	ta := top(a)
	later := false
	for d, g := range top(b) {
		if cur, ok := ta[d]; !ok || g.Seq > cur.Seq {
			ta[d], later = g, true
		}
	}
	out := State{}
	for _, g := range ta {
		out[[2]uint32{g.Domain, g.Server}] = g.Seq
	}
	return out, later
}

// applyFrom runs the SQL thread alone from start, outside GTID mode (the
// relay log is kept), until every GTID of last is applied, then stops it.
func applyFrom(ctx context.Context, db *sql.DB, start RelayPos, last map[uint32]GTID, timeout time.Duration) error {
	if _, err := db.ExecContext(ctx, "CHANGE MASTER TO MASTER_USE_GTID = no, RELAY_LOG_FILE = ?, RELAY_LOG_POS = ?", start.File, start.Pos); err != nil {
		return fmt.Errorf("replication: apply relay log from %s:%d: %w", start.File, start.Pos, err)
	}
	if err := execAll(ctx, db, "apply relay log", "START SLAVE SQL_THREAD"); err != nil {
		return err
	}
	var want []string
	for _, g := range last {
		want = append(want, g.String())
	}
	waitErr := WaitApplied(ctx, db, strings.Join(want, ","), timeout)
	if err := execAll(ctx, db, "apply relay log", "STOP SLAVE SQL_THREAD"); err != nil {
		return errors.Join(waitErr, err)
	}
	if waitErr != nil {
		// Left outside GTID mode with the relay log kept: running this
		// again goes on from gtid_slave_pos.
		st, _ := ReplicaStatus(ctx, db)
		return fmt.Errorf("replication: apply relay log up to %s (the SQL thread says %q): %w", strings.Join(want, ","), st.LastError, waitErr)
	}
	return nil
}

// byDomain is the applied sequence number per GTID domain: under
// gtid_strict_mode a domain's numbers only grow, whichever server wrote
// them.
func byDomain(s State) map[uint32]uint64 {
	out := map[uint32]uint64{}
	for k, seq := range s {
		out[k[0]] = max(out[k[0]], seq)
	}
	return out
}

// scanRelayLog reads every relay log file of db's replica (SHOW RELAYLOG
// EVENTS, from the first file of its index on, in sequence) against the
// applied positions.
func scanRelayLog(ctx context.Context, db *sql.DB, applied map[uint32]uint64) (*relayScan, error) {
	var first string
	if err := db.QueryRowContext(ctx, "SHOW RELAYLOG EVENTS LIMIT 1").Scan(&first, new(any), new(any), new(any), new(any), new(any)); err != nil {
		return nil, fmt.Errorf("replication: relay log: %w", err)
	}
	scan := &relayScan{last: map[uint32]GTID{}}
	var open *openGroup
	for file := first; ; {
		done, err := scanRelayFile(ctx, db, file, applied, scan, &open)
		if err != nil {
			return nil, err
		}
		if done {
			return scan, nil
		}
		if file, err = nextRelayFile(file); err != nil {
			return nil, err
		}
	}
}

// openGroup is a transaction whose end the scan has not seen yet.
type openGroup struct {
	gtid       GTID
	at         RelayPos
	standalone bool // a GTID without BEGIN: one statement (DDL) is the whole group
}

// scanRelayFile scans one relay log file; done at the end of the relay
// log: the file does not exist (MariaDB says so with error 1220 after the
// result's columns), or its last event is torn (a crash while it was
// written; never acknowledged) and nothing can follow it.
func scanRelayFile(ctx context.Context, db *sql.DB, file string, applied map[uint32]uint64, scan *relayScan, open **openGroup) (done bool, err error) {
	rows, err := db.QueryContext(ctx, "SHOW RELAYLOG EVENTS IN '"+strings.ReplaceAll(file, "'", "")+"'")
	if isError(err, 1220) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("replication: relay log %s: %w", file, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name, typ, info string
		var pos, serverID, end int64
		if err := rows.Scan(&name, &pos, &typ, &serverID, &end, &info); err != nil {
			return false, fmt.Errorf("replication: relay log %s: %w", file, err)
		}
		n++
		if err := scanEvent(RelayPos{name, pos}, typ, info, applied, scan, open); err != nil {
			return false, err
		}
	}
	if err := rows.Err(); isError(err, 1220) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("replication: relay log %s: %w", file, err)
	}
	if n == 0 {
		return true, nil
	}
	return false, nil
}

// scanEvent follows the transactions of the relay log: a Gtid event opens
// one, an Xid or a COMMIT (or the single statement of a standalone GTID)
// completes it.
func scanEvent(at RelayPos, typ, info string, applied map[uint32]uint64, scan *relayScan, open **openGroup) error {
	if typ == "Gtid" {
		m := gtidInfo.FindStringSubmatch(info)
		if m == nil {
			return fmt.Errorf("replication: relay log %s:%d: a Gtid event without a GTID: %q", at.File, at.Pos, info)
		}
		d, _ := strconv.ParseUint(m[1], 10, 32)
		s, _ := strconv.ParseUint(m[2], 10, 32)
		seq, _ := strconv.ParseUint(m[3], 10, 64)
		*open = &openGroup{gtid: GTID{uint32(d), uint32(s), seq}, at: at, standalone: !strings.HasPrefix(info, "BEGIN")}
		return nil
	}
	g := *open
	if g == nil || (typ != "Xid" && typ != "Query") {
		return nil
	}
	if typ == "Query" && !g.standalone && info != "COMMIT" && info != "ROLLBACK" {
		return nil
	}
	*open = nil
	return complete(g, applied, scan)
}

// complete counts a whole transaction g of the relay log: applied
// already, or to apply. The ones to apply must follow every applied one
// (a relay log is received in order): otherwise applying from the first
// would apply some twice.
func complete(g *openGroup, applied map[uint32]uint64, scan *relayScan) error {
	if g.gtid.Seq <= applied[g.gtid.Domain] {
		if scan.start != nil {
			return fmt.Errorf("replication: relay log: %s (applied) follows %s (not applied): not a prefix, refusing to apply it", g.gtid, scan.last[g.gtid.Domain])
		}
		return nil
	}
	if scan.start == nil {
		scan.start = &g.at
	}
	scan.last[g.gtid.Domain] = g.gtid
	scan.pending++
	return nil
}

// nextRelayFile names the relay log file after file (name.000041 ->
// name.000042).
func nextRelayFile(file string) (string, error) {
	i := strings.LastIndexByte(file, '.')
	n, err := strconv.Atoi(file[i+1:])
	if i < 0 || err != nil {
		return "", fmt.Errorf("replication: relay log file %q: no sequence number", file)
	}
	return fmt.Sprintf("%s.%0*d", file[:i], len(file)-i-1, n+1), nil
}

// StartReplica starts the replication of db's server after a start with
// --skip-slave-start, when it is a replica: what it received and did not
// apply first (ApplyRelayLog, at most timeout), then both threads, the
// receiving one asking its primary for what follows. It returns the GTID
// position applied before replication started. A server that is no
// replica is left alone.
func StartReplica(ctx context.Context, db *sql.DB, timeout time.Duration) (string, error) {
	st, err := ReplicaStatus(ctx, db)
	if err != nil || !st.Configured {
		return "", err
	}
	pos := st.SlavePos
	if st.IORunning == "No" && st.SQLRunning == "No" {
		if pos, err = ApplyRelayLog(ctx, db, timeout); err != nil {
			return "", err
		}
	}
	return pos, execAll(ctx, db, "start replica", "START SLAVE")
}
