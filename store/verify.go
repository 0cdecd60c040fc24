package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// SetTotals are one SET's money as its MySQL sees it.
type SetTotals struct {
	Packets     int   // funded packets checked
	Funded      int64 // sum of totals of funded packets (their debits)
	Held        int64 // left in live packets (funded, not closed)
	PendingPaid int64 // totals of pending packets whose debit is in the ledger
	Details     int   // shares taken
	OutboxOpen  int64 // credits not yet delivered
	OutboxRef   int64 // refunds not yet delivered
	OutboxOpenN int   // number of undelivered credits
}

// VerifySet checks invariants 1 and 2 on every day table of a SET's MySQL
// and every table of its archive (cold), and sums its money, outbox
// included. paid reports whether a pending packet's debit is recorded. It
// returns one line per violation. It counts everything the MySQL holds:
// for a MySQL that one SET has to itself and that keeps no copy of a
// bucket moved away; VerifyOwned counts one SET's share of it.
func VerifySet(ctx context.Context, db, cold *sql.DB, paid func(packet int64) (bool, error)) (SetTotals, []string, error) {
	return verify(ctx, db, cold, nil, "TRUE", paid)
}

// VerifyOwned is VerifySet of SET set's share of its MySQL and archive:
// the tables of the buckets its fence holds, and the outbox rows it wrote
// (and those written before the outbox named its SETs, which every SET
// sharing the MySQL counts: run it with the outbox drained, as VerifySet).
// Summed over SETs it counts every row once, even when SETs share a MySQL
// server or a SET still holds the copy of a bucket it gave away; the rows
// of a bucket nobody's fence holds (in the middle of a move) are in no
// SET's share.
func VerifyOwned(ctx context.Context, db, cold *sql.DB, set string, paid func(packet int64) (bool, error)) (SetTotals, []string, error) {
	owned, err := ownedBuckets(ctx, db, set)
	if err != nil {
		return SetTotals{}, nil, err
	}
	return verify(ctx, db, cold, owned, ownRows, paid, ownNames(set)...)
}

// querier is a pool, a connection or a transaction: what verification reads
// through (a connection holding a consistent snapshot, for Snapshot).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// verify checks the tables of the buckets in owned (nil: every table) and
// sums the outbox rows matching where (their entries: a packed row is n
// credits).
func verify(ctx context.Context, db, cold *sql.DB, owned map[hongbao.Bucket]bool, where string,
	paid func(packet int64) (bool, error), args ...any) (SetTotals, []string, error) {
	tot, bad, err := verifyTables(ctx, db, cold, owned, func(id, _ int64) (bool, error) { return paid(id) })
	if err != nil {
		return tot, nil, err
	}
	byKind, err := sqldb.SumsByKindWhere(ctx, db, "hb_set.outbox", "SUM(n)", where, args...)
	if err != nil && !sqldb.IsMissingTable(err) {
		return tot, nil, fmt.Errorf("verify outbox: %w", err)
	}
	tot.OutboxOpen, tot.OutboxOpenN = byKind[hongbao.KindOpen].Sum, byKind[hongbao.KindOpen].N
	tot.OutboxRef = byKind[hongbao.KindRefund].Sum
	return tot, bad, nil
}

// verifyTables checks the day and archive tables of the buckets in owned
// (nil: every table) and sums their money.
func verifyTables(ctx context.Context, db, cold querier, owned map[hongbao.Bucket]bool,
	paid func(packet, total int64) (bool, error)) (SetTotals, []string, error) {
	var tot SetTotals
	var bad []string
	err := walkTables(ctx, db, cold, owned, func(q querier, t string, skip map[int64]bool) error {
		b, err := verifyTable(ctx, q, t, &tot, paid, skip)
		bad = append(bad, b...)
		return err
	})
	if err != nil {
		return tot, nil, err
	}
	return tot, bad, nil
}

// walkTables calls fn on each day table of db and archive table of cold of
// the buckets in owned (nil: every table), with the IDs fn must skip: a
// day copied to the archive but not yet purged (an interrupted run) is in
// both places, and only its live rows count. A table created after the
// snapshot began (or its detail table not yet) is empty: left out.
func walkTables(ctx context.Context, db, cold querier, owned map[hongbao.Bucket]bool,
	fn func(q querier, table string, skip map[int64]bool) error) error {
	for _, src := range []struct {
		db      querier
		pattern string
	}{{db, dayTablePattern}, {cold, archiveTablePattern}} {
		tables, err := listTables(ctx, src.db, src.pattern)
		if err != nil {
			return err
		}
		for _, t := range tables {
			if b, ok := tableBucket(t); owned != nil && (!ok || !owned[b]) {
				continue
			}
			var skip map[int64]bool
			if src.pattern == archiveTablePattern {
				if skip, err = stillLive(ctx, db, t); err != nil {
					return err
				}
			}
			err := fn(src.db, t, skip)
			if isTableDefChanged(err) || sqldb.IsMissingTable(err) {
				if err := younger(ctx, src.db, t, err); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("verify %s: %w", t, err)
			}
		}
	}
	return nil
}

// younger checks that table t, whose read with its detail table failed
// with cause (1412: created after the snapshot began; or missing), has no
// row the snapshot sees: then it was created after the snapshot too, and
// is rightly left out. A day table whose packets the snapshot sees but
// whose detail table is younger is no consistent view (its shares may be
// in it): an error, so that the snapshot is opened again.
func younger(ctx context.Context, q querier, t string, cause error) error {
	n, err := countRows(ctx, q, t)
	switch {
	case isTableDefChanged(err) || sqldb.IsMissingTable(err) || err == nil && n == 0:
		return nil
	case err != nil:
		return fmt.Errorf("verify %s: %w", t, err)
	}
	return fmt.Errorf("verify %s: the snapshot sees %d packets in it, but its detail table was created after the snapshot began (%v): %w", t, n, cause, ErrYounger)
}

// ErrYounger is a snapshot's error when a table it must read was created
// after it began while rows it sees depend on it: opened again, it sees
// both.
var ErrYounger = errors.New("no consistent view: a table is younger than the snapshot; open it again")

// countRows counts the rows of table t through q.
func countRows(ctx context.Context, q querier, t string) (int, error) {
	rows, err := q.QueryContext(ctx, "SELECT COUNT(*) FROM "+t)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// tableBucket returns the bucket of a day table (db_xx.t_y_dd) or an
// archive table (db_xx_archive.t_y_yyyymmdd).
func tableBucket(name string) (hongbao.Bucket, bool) {
	var xx, y int
	if n, err := fmt.Sscanf(name, "db_%02d", &xx); n != 1 || err != nil {
		return 0, false
	}
	i := strings.Index(name, ".t_")
	if i < 0 || i+3 >= len(name) || name[i+3] < '0' || name[i+3] > '9' {
		return 0, false
	}
	y = int(name[i+3] - '0')
	return hongbao.Bucket(xx*10 + y), true
}

// Patterns of (database, table) names: live day tables and archive tables.
const (
	dayTablePattern     = `^db_[0-9]{2}[.]t_[0-9]_[0-9]{2}$`
	archiveTablePattern = `^db_[0-9]{2}_archive[.]t_[0-9]_[0-9]{8}$`
)

// dayTables lists db_xx.t_y_dd tables that exist.
func dayTables(ctx context.Context, db *sql.DB) ([]string, error) {
	return listTables(ctx, db, dayTablePattern)
}

// listTables lists the qualified tables matching pattern.
func listTables(ctx context.Context, db querier, pattern string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT CONCAT(table_schema, '.', table_name) t FROM information_schema.tables
		WHERE table_schema LIKE 'db\_%' HAVING t REGEXP ? ORDER BY 1`, pattern)
	if err != nil {
		return nil, fmt.Errorf("list day tables: %w", err)
	}
	defer rows.Close()
	var ts []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

// stillLive returns the IDs of archive table t (db_xx_archive.t_y_yyyymmdd)
// that are still in their live day table.
func stillLive(ctx context.Context, live querier, t string) (map[int64]bool, error) {
	var xx, y int
	var date string
	if n, err := fmt.Sscanf(t, "db_%02d_archive.t_%1d_%8s", &xx, &y, &date); n != 3 || err != nil {
		return nil, fmt.Errorf("verify: archive table name %q", t)
	}
	d, err := time.Parse("20060102", date)
	if err != nil {
		return nil, fmt.Errorf("verify: archive table name %q: %w", t, err)
	}
	// The live table of that day; the whole day of IDs, with a day of
	// margin for the time zone (the ID's bucket and day pin it anyway).
	lt := hongbao.DayTable{Bucket: hongbao.Bucket(xx*10 + y), Day: d.Day()}
	lo, hi := idAt(d.Add(-24*time.Hour)), idAt(d.Add(48*time.Hour))
	rows, err := live.QueryContext(ctx, "SELECT p.id FROM "+lt.Packets()+" p JOIN "+t+" a ON a.id = p.id WHERE p.id >= ? AND p.id < ?", lo, hi)
	if sqldb.IsMissingTable(err) {
		return nil, nil
	}
	if err != nil {
		// Cold storage on another server: compare ID lists instead.
		return stillLiveApart(ctx, live, lt, lo, hi)
	}
	defer rows.Close()
	return scanIDs(rows)
}

func stillLiveApart(ctx context.Context, live querier, lt hongbao.DayTable, lo, hi hongbao.PacketID) (map[int64]bool, error) {
	rows, err := live.QueryContext(ctx, "SELECT id FROM "+lt.Packets()+" WHERE id >= ? AND id < ?", lo, hi)
	if sqldb.IsMissingTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanIDs(rows)
}

func scanIDs(rows *sql.Rows) (map[int64]bool, error) {
	ids := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// packetRow is a packet of a day or archive table with its shares.
type packetRow struct {
	id, total, remAmount, sum, minShare int64
	count, remCount, n, closed, funding int
}

// eachPacket calls fn on every packet of table t with its shares.
func eachPacket(ctx context.Context, db querier, t string, fn func(r packetRow) error) error {
	rows, err := db.QueryContext(ctx, `SELECT p.id, p.total, p.count, p.remaining_amount, p.remaining_count, p.closed, p.funding,
		COALESCE(d.s, 0), COALESCE(d.n, 0), COALESCE(d.m, 1)
		FROM `+t+` p LEFT JOIN (SELECT packet_id, SUM(amount) s, COUNT(*) n, MIN(amount) m FROM `+t+`_detail GROUP BY packet_id) d
		ON d.packet_id = p.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r packetRow
		if err := rows.Scan(&r.id, &r.total, &r.count, &r.remAmount, &r.remCount, &r.closed, &r.funding, &r.sum, &r.n, &r.minShare); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

func verifyTable(ctx context.Context, db querier, t string, tot *SetTotals, paid func(packet, total int64) (bool, error), skip map[int64]bool) ([]string, error) {
	var bad []string
	err := eachPacket(ctx, db, t, func(r packetRow) error {
		id, total, remAmount, sum, minShare := r.id, r.total, r.remAmount, r.sum, r.minShare
		count, remCount, n, closed, funding := r.count, r.remCount, r.n, r.closed, r.funding
		if skip[id] {
			return nil
		}
		if sum+remAmount != total || n+remCount != count || minShare < 1 {
			bad = append(bad, fmt.Sprintf("packet %d (%s): shares %d + remaining %d != total %d, or %d opens + %d left != count %d, or a share < 1 fen (%d)",
				id, t, sum, remAmount, total, n, remCount, count, minShare))
		}
		switch funding {
		case 1:
			tot.Packets++
			tot.Funded += total
			tot.Details += n
			if closed == 0 {
				tot.Held += remAmount
			}
		case 0:
			ok, err := paid(id, total)
			if err != nil {
				return err
			}
			if ok {
				tot.PendingPaid += total
			}
			if n > 0 {
				bad = append(bad, fmt.Sprintf("packet %d (%s): %d shares opened before it was funded", id, t, n))
			}
		default:
			if n > 0 {
				bad = append(bad, fmt.Sprintf("packet %d (%s): %d shares opened in a cancelled packet", id, t, n))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dup, err := db.QueryContext(ctx, "SELECT packet_id, user_id, COUNT(*) FROM "+t+"_detail GROUP BY packet_id, user_id HAVING COUNT(*) > 1")
	if err != nil {
		return nil, err
	}
	defer dup.Close()
	for dup.Next() {
		var p, u int64
		var c int
		if err := dup.Scan(&p, &u, &c); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("packet %d: user %d has %d shares", p, u, c))
	}
	return bad, dup.Err()
}
