package archive_test

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestArchiveDayAgain: rows that reach a day after it was archived (a
// skewed clock, a late send) are archived by the next run beside the rows
// archived before, whose copy the check must not count again; every
// packet stays readable. Issue 13's defect 4: the check compared the whole
// archive date range and failed the day for ever.
func TestArchiveDayAgain(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	first := f.Create(archivetest.Spec{At: f.At(2025, 3, 3, 10, 0, 0, 0), Bucket: 7, Total: 300, Count: 3, Opens: 2})
	f.Settle(first)
	if sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), false); err != nil || sum.Archived != 1 {
		t.Fatalf("first run: %+v, %v; want the day archived", sum, err)
	}
	late := f.Create(archivetest.Spec{At: f.At(2025, 3, 3, 11, 0, 0, 0), Bucket: 7, Total: 500, Count: 5, Opens: 5})
	f.Settle(late)
	sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-20"), false)
	if err != nil || sum.Archived != 1 || sum.Packets != 1 || sum.Skipped != 0 {
		t.Fatalf("second run: %+v, %v; want the late packet's day archived again, 1 packet", sum, err)
	}
	d := f.DayOf(late)
	if p, dt := f.TableCount(d.Table); p != 0 || dt != 0 {
		t.Errorf("%s: %d packets and %d details left live", d.Live(), p, dt)
	}
	want := dbtest.Sums{Packets: 2, Details: 7, Total: 800, Remaining: 300 - f.Packet(first).Opened(), Opened: f.Packet(first).Opened() + 500}
	if got := f.Sums(d.Cold(), "", ""); got != want {
		t.Errorf("archive %s: %+v, want both packets %+v", d.Cold(), got, want)
	}
	for _, id := range []hongbao.PacketID{first, late} {
		p, recs, err := f.Store.Packet(f.Ctx, id)
		if err != nil || p.ID != id || len(recs) != len(f.Packet(id).Shares) {
			t.Errorf("packet %s after two runs: %v, %d records, %v; want %d records", id, p, len(recs), err, len(f.Packet(id).Shares))
		}
	}
}
