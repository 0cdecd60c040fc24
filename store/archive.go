package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Day is the packets of one day table created on one local date: the unit
// the archiver moves. A day table holds one day of the month, so across
// months it can hold several Days until each is archived.
type Day struct {
	Table hongbao.DayTable
	Date  time.Time // local midnight in the cluster's time zone
	lo    hongbao.PacketID
	hi    hongbao.PacketID // exclusive
}

// Archive names the cold tables of the day.
func (d Day) Archive() schema.ArchiveTable {
	return schema.ArchiveTable{Bucket: d.Table.Bucket, Date: d.Date.Format("20060102")}
}

// dayOf returns the Day of the table holding id.
func dayOf(t hongbao.DayTable, id hongbao.PacketID, loc *time.Location) Day {
	lt := id.Time().In(loc)
	date := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	return Day{Table: t, Date: date, lo: idAt(date), hi: idAt(date.AddDate(0, 0, 1))}
}

// idAt is the smallest ID minted at t: IDs sort by time, so a date is a
// primary-key range.
func idAt(t time.Time) hongbao.PacketID {
	id, err := hongbao.NewPacketID(t, 0, 0)
	if err != nil {
		return 0
	}
	return id
}

// Days lists the Days in the day tables of the buckets the SET's fence
// holds (and the Ownership trusts), oldest date first per table. The tables of a bucket it gave away
// (a copy left for a grace period) or is being given (a copy in progress)
// are another SET's to archive.
func (s *Store) Days(ctx context.Context) ([]Day, error) {
	tables, err := dayTables(ctx, s.db)
	if err != nil {
		return nil, err
	}
	owned, err := s.trusted(ctx)
	if err != nil {
		return nil, err
	}
	var days []Day
	for _, name := range tables {
		t, ok := parseDayTable(name)
		if !ok || !owned[t.Bucket] {
			continue
		}
		next := hongbao.PacketID(0)
		for {
			var id hongbao.PacketID
			err := s.db.QueryRowContext(ctx, "SELECT id FROM "+t.Packets()+" WHERE id >= ? ORDER BY id LIMIT 1", next).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("store: days of %s: %w", t.Packets(), err)
			}
			d := dayOf(t, id, s.loc)
			days = append(days, d)
			next = d.hi
		}
	}
	return days, nil
}

func parseDayTable(name string) (hongbao.DayTable, bool) {
	var xx, y, dd int
	if n, err := fmt.Sscanf(name, "db_%02d.t_%1d_%02d", &xx, &y, &dd); n != 3 || err != nil {
		return hongbao.DayTable{}, false
	}
	return hongbao.DayTable{Bucket: hongbao.Bucket(xx*10 + y), Day: dd}, true
}

// DayStats describes a Day for the archiver and its status report.
type DayStats struct {
	Packets   int
	Details   int
	Unsettled int // packets still live, not closed, pending, or with undelivered credits
	Money     Checksum
}

// Checksum is the money of a set of rows, compared between live and cold.
type Checksum struct {
	Packets, Details         int
	Total, Remaining, Opened int64
}

const bucketOf = "(packet_id >> 12) & 1023"

// unsettled selects packets that may still change: not cancelled, and not
// past expiry, or not funded, or neither closed nor sold out. Its one
// argument is the time of the check.
const unsettled = "funding <> 2 AND (expires_at > ? OR funding = 0 OR (closed = 0 AND remaining_count > 0))"

// Stats counts a Day's rows and the ones not settled at now: a packet is
// settled when it is past expiry and sold out, closed or cancelled, and no
// credit, refund or funding decision of it is still waiting.
func (s *Store) Stats(ctx context.Context, d Day, now time.Time) (DayStats, error) {
	var st DayStats
	sum, err := checksum(ctx, s.db, d.Table.Packets(), d.Table.Details(), d.lo, d.hi)
	if err != nil {
		return st, err
	}
	st.Packets, st.Details, st.Money = sum.Packets, sum.Details, sum
	q := "SELECT COUNT(*) FROM " + d.Table.Packets() + " WHERE id >= ? AND id < ? AND " + unsettled
	if err := s.db.QueryRowContext(ctx, q, d.lo, d.hi, now.UTC()).Scan(&st.Unsettled); err != nil {
		return st, fmt.Errorf("store: unsettled in %s: %w", d.Table.Packets(), err)
	}
	for _, table := range []string{"hb_set.outbox", "hb_set.pending"} {
		var n int
		err := s.db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT packet_id) FROM "+table+" WHERE packet_id >= ? AND packet_id < ? AND "+bucketOf+" = ?",
			d.lo, d.hi, int(d.Table.Bucket)).Scan(&n)
		if err != nil && !sqldb.IsMissingTable(err) {
			return st, fmt.Errorf("store: waiting in %s: %w", table, err)
		}
		st.Unsettled += n
	}
	return st, nil
}

func checksum(ctx context.Context, db *sql.DB, packets, details string, lo, hi hongbao.PacketID) (Checksum, error) {
	var c Checksum
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(total),0), COALESCE(SUM(remaining_amount),0) FROM "+packets+
		" WHERE id >= ? AND id < ?", lo, hi).Scan(&c.Packets, &c.Total, &c.Remaining)
	if err != nil {
		return c, fmt.Errorf("store: checksum %s: %w", packets, err)
	}
	err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM "+details+
		" WHERE packet_id >= ? AND packet_id < ?", lo, hi).Scan(&c.Details, &c.Opened)
	if err != nil {
		return c, fmt.Errorf("store: checksum %s: %w", details, err)
	}
	return c, nil
}

// Copy copies a Day to the cold store and verifies the copy: row counts and
// money sums of the Day must be equal on both sides. Rows already in the
// cold store are replaced (the live rows are the truth until the purge), so
// a rerun after a crash adds nothing twice and fixes a stale copy.
func (s *Store) Copy(ctx context.Context, cold *sql.DB, d Day) (Checksum, error) {
	a := d.Archive()
	for _, stmt := range schema.ArchiveStatements(a) {
		if _, err := cold.ExecContext(ctx, stmt); err != nil {
			return Checksum{}, fmt.Errorf("store: archive schema %s: %w", a.Packets(), err)
		}
	}
	if err := copyRowsAs(ctx, s.db, cold, "SELECT * FROM "+d.Table.Packets()+" WHERE id >= ? AND id < ?",
		[]any{d.lo, d.hi}, "REPLACE", a.Packets()); err != nil {
		return Checksum{}, fmt.Errorf("store: archive %s: %w", d.Table.Packets(), err)
	}
	if err := copyRowsAs(ctx, s.db, cold, "SELECT * FROM "+d.Table.Details()+" WHERE packet_id >= ? AND packet_id < ?",
		[]any{d.lo, d.hi}, "REPLACE", a.Details()); err != nil {
		return Checksum{}, fmt.Errorf("store: archive %s: %w", d.Table.Details(), err)
	}
	if err := s.copyAudiences(ctx, cold, d); err != nil {
		return Checksum{}, err
	}
	live, err := checksum(ctx, s.db, d.Table.Packets(), d.Table.Details(), d.lo, d.hi)
	if err != nil {
		return Checksum{}, err
	}
	// The cold rows of exactly the live packets: the archive may hold
	// packets of the day archived by an earlier run, which must not count.
	got, err := s.coldChecksum(ctx, cold, d)
	if err != nil {
		return Checksum{}, err
	}
	if got != live {
		return live, fmt.Errorf("store: archive copy of %s on %s differs: live %+v, cold %+v",
			d.Table.Packets(), d.Date.Format(time.DateOnly), live, got)
	}
	return live, nil
}

// copyAudiences copies the audiences of the Day's packets (the database's
// audience table holds its ten buckets' and every day's) beside the
// archived packets, so an archived packet still says who it was for.
func (s *Store) copyAudiences(ctx context.Context, cold *sql.DB, d Day) error {
	if err := s.audienced(ctx, s.tables, d.Table.DB()); err != nil {
		return fmt.Errorf("store: archive %s.t_audience: %w", d.Table.DB(), err)
	}
	if err := copyRowsAs(ctx, s.db, cold, "SELECT packet_id, users FROM "+d.Table.DB()+".t_audience WHERE packet_id >= ? AND packet_id < ? AND "+
		bucketOf+" = ?", []any{d.lo, d.hi, int(d.Table.Bucket)}, "REPLACE", d.Archive().DB()+".t_audience"); err != nil {
		return fmt.Errorf("store: archive %s.t_audience: %w", d.Table.DB(), err)
	}
	return nil
}

// verifyChunk is how many packets one verification query names.
const verifyChunk = 1000

// coldChecksum sums the cold copies of the packets the Day holds live, and
// their details, naming the packets by ID in chunks.
func (s *Store) coldChecksum(ctx context.Context, cold *sql.DB, d Day) (Checksum, error) {
	a := d.Archive()
	var sum Checksum
	for after := d.lo - 1; ; {
		ids, err := liveIDs(ctx, s.db, d, after)
		if err != nil || len(ids) == 0 {
			return sum, err
		}
		after = ids[len(ids)-1]
		in := sqldb.Placeholders(len(ids), "?")
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		var c Checksum
		err = cold.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(total),0), COALESCE(SUM(remaining_amount),0) FROM "+a.Packets()+
			" WHERE id IN ("+in+")", args...).Scan(&c.Packets, &c.Total, &c.Remaining)
		if err == nil {
			err = cold.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM "+a.Details()+
				" WHERE packet_id IN ("+in+")", args...).Scan(&c.Details, &c.Opened)
		}
		if err != nil {
			return sum, fmt.Errorf("store: verify %s: %w", a.Packets(), err)
		}
		sum.Packets, sum.Details = sum.Packets+c.Packets, sum.Details+c.Details
		sum.Total, sum.Remaining, sum.Opened = sum.Total+c.Total, sum.Remaining+c.Remaining, sum.Opened+c.Opened
	}
}

// liveIDs lists up to verifyChunk IDs of the Day's live packets after after.
func liveIDs(ctx context.Context, db *sql.DB, d Day, after hongbao.PacketID) ([]hongbao.PacketID, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM "+d.Table.Packets()+" WHERE id > ? AND id < ? ORDER BY id LIMIT ?",
		after, d.hi, verifyChunk)
	if err != nil {
		return nil, fmt.Errorf("store: verify %s: %w", d.Table.Packets(), err)
	}
	defer rows.Close()
	var ids []hongbao.PacketID
	for rows.Next() {
		var id hongbao.PacketID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ErrDayChanged means a Day changed between its verified copy and its purge.
var ErrDayChanged = errors.New("the day changed after it was copied; run again")

// Purge empties a Day from the live tables after Copy verified it as
// copied, in one transaction, with the Day's leftover bookkeeping
// (idempotency keys, the expiry marks of sold-out packets). It takes the
// SET's fence of the Day's bucket first, as every write does, and fails
// with ErrWrongSet when the SET no longer owns it (the bucket moved away
// since the copy: its new owner archives it); then it locks the Day's rows
// and refuses if they no longer match the copy.
func (s *Store) Purge(ctx context.Context, d Day, copied Checksum, asOf time.Time) error {
	return sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := fence.Lock(ctx, tx, s.set, d.Table.Bucket); err != nil {
			return fmt.Errorf("store: purge %s: %w", d.Table.Packets(), err)
		}
		var now Checksum
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(total),0), COALESCE(SUM(remaining_amount),0) FROM "+d.Table.Packets()+
			" WHERE id >= ? AND id < ? FOR UPDATE", d.lo, d.hi).Scan(&now.Packets, &now.Total, &now.Remaining)
		if err == nil {
			err = tx.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM "+d.Table.Details()+
				" WHERE packet_id >= ? AND packet_id < ? FOR UPDATE", d.lo, d.hi).Scan(&now.Details, &now.Opened)
		}
		if err != nil {
			return fmt.Errorf("store: purge %s: %w", d.Table.Packets(), err)
		}
		if now != copied {
			return fmt.Errorf("store: purge %s %s: %w", d.Table.Packets(), d.Date.Format(time.DateOnly), ErrDayChanged)
		}
		// The rows are locked now: none can be opened, closed or added
		// while the settlement is checked again.
		var live int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.Table.Packets()+" WHERE id >= ? AND id < ? AND "+unsettled,
			d.lo, d.hi, asOf.UTC()).Scan(&live); err != nil {
			return fmt.Errorf("store: purge %s: %w", d.Table.Packets(), err)
		}
		if live > 0 {
			return fmt.Errorf("store: purge %s %s: %d packets not settled: %w", d.Table.Packets(), d.Date.Format(time.DateOnly), live, ErrDayChanged)
		}
		for _, q := range []string{
			"DELETE FROM " + d.Table.Details() + " WHERE packet_id >= ? AND packet_id < ?",
			"DELETE FROM " + d.Table.Packets() + " WHERE id >= ? AND id < ?",
		} {
			if _, err := tx.ExecContext(ctx, q, d.lo, d.hi); err != nil {
				return fmt.Errorf("store: purge %s: %w", d.Table.Packets(), err)
			}
		}
		for _, table := range []string{d.Table.DB() + ".t_idem", d.Table.DB() + ".t_audience", "hb_set.expiry"} {
			_, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE packet_id >= ? AND packet_id < ? AND "+bucketOf+" = ?",
				d.lo, d.hi, int(d.Table.Bucket))
			if err != nil && !sqldb.IsMissingTable(err) {
				return fmt.Errorf("store: purge %s: %w", table, err)
			}
		}
		return nil
	})
}

// ArchivedDay is a day in the cold store.
type ArchivedDay struct {
	Table   string
	Date    string // yyyy-mm-dd
	Packets int
}

// ArchivedDays lists the archive tables of cold with their row counts.
func ArchivedDays(ctx context.Context, cold *sql.DB) ([]ArchivedDay, error) {
	rows, err := cold.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema LIKE 'db\_%\_archive' AND table_name REGEXP '^t_[0-9]_[0-9]{8}$' ORDER BY table_name, table_schema`)
	if err != nil {
		return nil, fmt.Errorf("store: archived days: %w", err)
	}
	var out []ArchivedDay
	for rows.Next() {
		var db, t string
		if err := rows.Scan(&db, &t); err != nil {
			rows.Close()
			return nil, err
		}
		d := t[len(t)-8:]
		out = append(out, ArchivedDay{Table: db + "." + t, Date: d[:4] + "-" + d[4:6] + "-" + d[6:]})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if err := cold.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+out[i].Table).Scan(&out[i].Packets); err != nil {
			return nil, fmt.Errorf("store: count %s: %w", out[i].Table, err)
		}
	}
	return out, nil
}
