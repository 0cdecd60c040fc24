package archive_test

import (
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchiveDayTableReusedNextMonth: db_04.t_2_15 holds March 15, is
// emptied, then holds April 15 and May 15 (the cron ran late, so two
// months share it): each run takes exactly the due month, and the archive
// keeps each month in its own t_2_yyyymmdd table, all readable.
func TestArchiveDayTableReusedNextMonth(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	table := hongbao.DayTable{Bucket: 42, Day: 15}
	mk := func(mo time.Month, h, mi, s, ms, opens int) hongbao.PacketID {
		return f.Create(archivetest.Spec{At: f.At(2025, mo, 15, h, mi, s, ms), Bucket: 42, Total: 1000, Count: 10, Opens: opens})
	}
	// 00:30 local is still the 14th in UTC; 23:59:59.999 the last ms.
	march := []hongbao.PacketID{mk(3, 0, 30, 0, 0, 10), mk(3, 12, 0, 0, 0, 4), mk(3, 23, 59, 59, 999, 0)}
	eve := f.Create(archivetest.Spec{At: f.At(2025, 3, 14, 23, 59, 59, 999), Bucket: 42, Total: 100, Count: 1, Opens: 1}) // t_2_14
	for _, id := range march {
		if got := id.Table(f.Loc); got != table {
			t.Fatalf("packet at %s lands in %s", id.Time().In(f.Loc), got.Packets())
		}
	}
	f.Settle(append(slices.Clone(march), eve)...)
	marchBefore := f.Records(append(slices.Clone(march), eve))

	sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-03-23"), false)
	if err != nil || sum.Archived != 2 || sum.Packets != 4 {
		t.Fatalf("March run: %+v, %v; want 2 days (4 packets)", sum, err)
	}
	if p, d := f.TableCount(table); p != 0 || d != 0 {
		t.Fatalf("%s after archiving March: %d packets, %d details; want empty before reuse", table.Packets(), p, d)
	}

	april := []hongbao.PacketID{mk(4, 0, 0, 0, 0, 2), mk(4, 9, 0, 0, 0, 10), mk(4, 15, 0, 0, 0, 0), mk(4, 23, 59, 59, 999, 5)}
	may := []hongbao.PacketID{mk(5, 0, 0, 0, 0, 3), mk(5, 20, 0, 0, 0, 10)}
	f.Settle(append(slices.Clone(april), may...)...)
	aprilBefore, mayBefore := f.Records(april), f.Records(may)
	wantApril, wantMay := f.Model(april...), f.Model(may...)

	// The cron ran late: April and May share the table; as of 05-16 April
	// is due and May within retention.
	sum, err = f.Archiver(7).Run(f.Ctx, f.Date("2025-05-16"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 1 || sum.Kept != 1 || sum.Packets != 4 {
		t.Errorf("April run: %+v, want April archived (4 packets) and May kept", sum)
	}
	if got, wantIDs := f.IDs(table.Packets()), slices.Sorted(slices.Values(may)); !slices.Equal(got, wantIDs) {
		t.Errorf("%s holds %v, want exactly May's %v", table.Packets(), got, wantIDs)
	}
	if n := f.Count("SELECT COUNT(*) FROM "+table.Details()+" WHERE packet_id NOT IN (?, ?)", may[0], may[1]); n != 0 {
		t.Errorf("%s holds %d details of other months", table.Details(), n)
	}
	f.CheckLive(wantMay)
	f.CheckArchived(wantApril)
	if got := f.IDs("db_04_archive.t_2_20250415"); !slices.Equal(got, slices.Sorted(slices.Values(april))) {
		t.Errorf("April archive holds %v, want %v", got, april)
	}
	if got := f.IDs("db_04_archive.t_2_20250315"); !slices.Equal(got, slices.Sorted(slices.Values(march))) {
		t.Errorf("March archive holds %v, want %v", got, march)
	}
	f.CheckReads(marchBefore)
	f.CheckReads(aprilBefore)
	f.CheckReads(mayBefore)

	sum, err = f.Archiver(7).Run(f.Ctx, f.Date("2025-06-01"), false)
	if err != nil || sum.Archived != 1 || sum.Packets != 2 {
		t.Errorf("May run: %+v, %v; want May archived", sum, err)
	}
	if p, d := f.TableCount(table); p != 0 || d != 0 {
		t.Errorf("%s: %d packets, %d details left", table.Packets(), p, d)
	}
	f.CheckArchived(f.Model(march...))
	f.CheckArchived(wantApril)
	f.CheckArchived(wantMay)
	want := []string{"db_04_archive.t_2_20250314", "db_04_archive.t_2_20250315", "db_04_archive.t_2_20250415", "db_04_archive.t_2_20250515"}
	if got := f.Tables(`db\_%\_archive`, `^t_[0-9]_[0-9]{8}$`); !slices.Equal(got, want) {
		t.Errorf("archive tables %v, want %v", got, want)
	}
	f.CheckReads(marchBefore)
	f.CheckReads(aprilBefore)
	f.CheckReads(mayBefore)
}
