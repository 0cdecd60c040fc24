package archivetest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// Day is one local date of one day table: a table holds a day of one month
// until it is archived, then the same day of a later month.
type Day struct {
	Table hongbao.DayTable
	Date  string // yyyymmdd
}

// Live names the live day table, db_xx.t_y_dd.
func (d Day) Live() string { return d.Table.Packets() }

// Cold names the archive table by the layout: db_xx_archive.t_y_yyyymmdd.
func (d Day) Cold() string {
	return fmt.Sprintf("db_%02d_archive.t_%d_%s", int(d.Table.Bucket)/10, int(d.Table.Bucket)%10, d.Date)
}

// DayOf is the day a packet's ID puts it in.
func (f *Fixture) DayOf(id hongbao.PacketID) Day {
	lt := id.Time().In(f.Loc)
	return Day{Table: hongbao.DayTable{Bucket: id.Bucket(), Day: lt.Day()}, Date: lt.Format("20060102")}
}

// Model sums the packets the test created, per day: what the tables must
// hold.
func (f *Fixture) Model(ids ...hongbao.PacketID) map[Day]dbtest.Sums {
	out := map[Day]dbtest.Sums{}
	for _, id := range ids {
		p := f.Packet(id)
		d := f.DayOf(id)
		s := out[d]
		s.Packets++
		s.Details += len(p.Shares)
		s.Total += p.Total
		s.Opened += p.Opened()
		s.Remaining += p.Total - p.Opened()
		out[d] = s
	}
	return out
}

// IDRange is [lo, hi) of the IDs minted on the local date of d, from the
// layout: 41 bits ms since 2024-01-01Z | 10 bits bucket | 12 bits seq.
func (f *Fixture) IDRange(d Day) (int64, int64) {
	f.t.Helper()
	day, err := time.ParseInLocation("20060102", d.Date, f.Loc)
	if err != nil {
		f.t.Fatal(err)
	}
	at := func(t time.Time) int64 { return (t.UnixMilli() - dbtest.EpochMs) << 22 }
	return at(day), at(day.AddDate(0, 0, 1))
}

// LiveSums sums the rows of date d in its live day table.
func (f *Fixture) LiveSums(d Day) dbtest.Sums {
	f.t.Helper()
	lo, hi := f.IDRange(d)
	return f.Sums(d.Live(), "WHERE id >= ? AND id < ?", "WHERE packet_id >= ? AND packet_id < ?", lo, hi)
}

// ColdSums sums the whole archive table of d; ok is false when it does not
// exist. A detail table without its packets table fails the test.
func (f *Fixture) ColdSums(d Day) (sums dbtest.Sums, ok bool) {
	f.t.Helper()
	if !dbtest.TableExists(f.t, f.DB, d.Cold()) {
		if dbtest.TableExists(f.t, f.DB, d.Cold()+"_detail") {
			f.t.Errorf("%s_detail exists without %s", d.Cold(), d.Cold())
		}
		return dbtest.Sums{}, false
	}
	return f.Sums(d.Cold(), "", ""), true
}

// TableCount counts every row of a live day table and its detail.
func (f *Fixture) TableCount(t hongbao.DayTable) (packets, details int) {
	f.t.Helper()
	s := f.Sums(t.Packets(), "", "")
	return s.Packets, s.Details
}

// Sums sums a packets table and its _detail table, each filtered by its
// WHERE clause ("" for every row) with args.
func (f *Fixture) Sums(packets, wherePackets, whereDetails string, args ...any) dbtest.Sums {
	f.t.Helper()
	return dbtest.TableSums(f.t, f.DB, packets, wherePackets, whereDetails, args...)
}

// Tables lists db.table names in schemas matching like whose name matches
// re, sorted.
func (f *Fixture) Tables(like, re string) []string {
	f.t.Helper()
	return dbtest.TablesLike(f.t, f.DB, like, re)
}

// ArchiveTables lists every day table (packets and details) of every
// db_xx_archive database: not their audience tables (t_audience), made
// with the first day archived into each.
func (f *Fixture) ArchiveTables() []string {
	f.t.Helper()
	return f.Tables(`db\_%\_archive`, `^t_[0-9]_`)
}

// IDs lists the packet IDs of a table, sorted.
func (f *Fixture) IDs(table string) []hongbao.PacketID {
	f.t.Helper()
	rows, err := f.DB.QueryContext(f.Ctx, "SELECT id FROM "+table+" ORDER BY id")
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []hongbao.PacketID
	for rows.Next() {
		var id hongbao.PacketID
		if err := rows.Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// Count runs a COUNT query.
func (f *Fixture) Count(q string, args ...any) int {
	f.t.Helper()
	return dbtest.Count(f.t, f.DB, q, args...)
}

// Snapshot is the content checksum of every table of the day tables, the
// archives and hb_set: equal snapshots mean nothing changed.
func (f *Fixture) Snapshot() map[string]int64 {
	f.t.Helper()
	return dbtest.Checksums(f.t, f.DB)
}

// Read is a packet as the store reads it.
type Read struct {
	P    hongbao.Packet
	Recs []hongbao.Record
}

// Records reads every packet through the store (which follows archived
// days to the cold store).
func (f *Fixture) Records(ids []hongbao.PacketID) map[hongbao.PacketID]Read {
	f.t.Helper()
	out := map[hongbao.PacketID]Read{}
	for _, id := range ids {
		p, recs, err := f.Store.Packet(f.Ctx, id)
		if err != nil {
			f.t.Fatalf("read %s: %v", id, err)
		}
		out[id] = Read{*p, recs}
	}
	return out
}

// CheckReads asserts every packet reads as it did before, and still keeps
// invariant 1 as read: its records and what remains add up to the packet.
func (f *Fixture) CheckReads(before map[hongbao.PacketID]Read) {
	f.t.Helper()
	after := f.Records(slices.Collect(maps.Keys(before)))
	for id, b := range before {
		a := after[id]
		if !reflect.DeepEqual(a, b) {
			f.t.Errorf("packet %s reads differently after archiving:\n before %+v\n after  %+v", id, b, a)
		}
		var sum int64
		for _, r := range a.Recs {
			sum += r.Amount
		}
		if sum+a.P.RemainingAmount != a.P.Total || len(a.Recs)+a.P.RemainingCount != a.P.Count {
			f.t.Errorf("packet %s as read: records %d fen in %d + remaining %d fen / %d != %d fen / %d",
				id, sum, len(a.Recs), a.P.RemainingAmount, a.P.RemainingCount, a.P.Total, a.P.Count)
		}
		if len(a.Recs) != len(f.Packet(id).Shares) {
			f.t.Errorf("packet %s: %d records read, %d opened", id, len(a.Recs), len(f.Packet(id).Shares))
		}
	}
}

// CheckArchived asserts each day of want is gone from its live table and
// sits whole in its archive table.
func (f *Fixture) CheckArchived(want map[Day]dbtest.Sums) {
	f.t.Helper()
	for d, w := range want {
		if got := f.LiveSums(d); got != (dbtest.Sums{}) {
			f.t.Errorf("%s on %s: still live after archiving: %+v", d.Live(), d.Date, got)
		}
		got, ok := f.ColdSums(d)
		if !ok {
			f.t.Errorf("%s: archive table missing", d.Cold())
			continue
		}
		if got != w {
			f.t.Errorf("%s: archive holds %+v, want %+v", d.Cold(), got, w)
		}
	}
}

// CheckLive asserts each day of want is whole in its live table and has no
// archive table.
func (f *Fixture) CheckLive(want map[Day]dbtest.Sums) {
	f.t.Helper()
	for d, w := range want {
		if got := f.LiveSums(d); got != w {
			f.t.Errorf("%s on %s: live rows %+v, want %+v", d.Live(), d.Date, got, w)
		}
		if got, ok := f.ColdSums(d); ok {
			f.t.Errorf("%s: archive table exists for a day not archived (%+v)", d.Cold(), got)
		}
	}
}

// CheckDayTables asserts the live day tables and their details in every
// db_xx database are exactly want (in any order), and all empty: what
// ensure must leave.
func (f *Fixture) CheckDayTables(want []string) {
	f.t.Helper()
	want = slices.Sorted(slices.Values(want))
	got := f.Tables(`db\_%`, `^t_[0-9]_[0-9]{2}(_detail)?$`)
	if !slices.Equal(got, want) {
		f.t.Errorf("day tables %v, want %v", got, want)
	}
	for _, table := range want {
		if n := f.Count("SELECT COUNT(*) FROM " + table); n != 0 {
			f.t.Errorf("%s has %d rows", table, n)
		}
	}
}
