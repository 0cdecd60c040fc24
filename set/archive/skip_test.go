package archive_test

import (
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchiveSkipsUnsettledDays: a day with a packet still live, expired
// but not closed, closed with its refund in the outbox, with credits in the
// outbox, or with its debit undecided is skipped with a reason and left
// alone; settled days of other tables are archived in the same run; once
// settled, the next run archives the rest.
func TestArchiveSkipsUnsettledDays(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	d3 := func(h int) time.Time { return f.At(2025, 3, 3, h, 0, 0, 0) }
	type spec = archivetest.Spec
	settledA := f.Create(spec{At: d3(8), Bucket: 11, Total: 400, Count: 4, Opens: 4})
	live := f.Create(spec{At: d3(9), Bucket: 11, Total: 300, Count: 3, Opens: 3, Expiry: 30 * 24 * time.Hour}) // sold out, expires 04-02
	notClosed := f.Create(spec{At: d3(10), Bucket: 12, Total: 500, Count: 5, Opens: 2})
	refundWaiting := f.Create(spec{At: d3(11), Bucket: 13, Total: 600, Count: 6, Opens: 1})
	creditsWaiting := f.Create(spec{At: d3(12), Bucket: 14, Total: 300, Count: 3, Opens: 3})
	pending := f.Create(spec{At: d3(13), Bucket: 15, Total: 800, Count: 8, Pending: true})
	settledB := f.Create(spec{At: f.At(2025, 3, 4, 8, 0, 0, 0), Bucket: 11, Total: 700, Count: 7, Opens: 3})
	settledC := f.Create(spec{At: f.At(2025, 3, 5, 8, 0, 0, 0), Bucket: 500, Total: 900, Count: 9, Opens: 9})
	all := []hongbao.PacketID{settledA, live, notClosed, refundWaiting, creditsWaiting, pending, settledB, settledC}

	f.ClosePackets(settledA, refundWaiting, creditsWaiting, settledB, settledC)
	f.Deliver(func(e hongbao.Entry) bool {
		return (e.Packet == refundWaiting && e.Kind == hongbao.KindRefund) || e.Packet == creditsWaiting
	})
	if n := f.Count("SELECT COALESCE(SUM(n), 0) FROM hb_set.outbox"); n != 4 {
		t.Fatalf("outbox holds %d entries, want 4 (1 refund, 3 credits)", n)
	}
	want := f.Model(all...)
	before := f.Records(all)

	sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-03-20"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 2 || sum.Skipped != 5 || sum.Kept != 0 || sum.Packets != 2 {
		t.Errorf("summary %+v, want 2 days archived (2 packets), 5 skipped", sum)
	}
	reports := archivetest.Reports(sum)
	for _, r := range sum.Days {
		t.Logf("%s %s: %s %d packets %s", r.Table, r.Date, r.Action, r.Rows, r.Reason)
	}
	report := func(id hongbao.PacketID) (string, string) {
		d := f.DayOf(id)
		return d.Live(), d.Live() + " " + id.Time().In(f.Loc).Format(time.DateOnly)
	}
	skipped := map[hongbao.PacketID]string{
		live: "live (sold out, not expired)", notClosed: "expired, not closed", refundWaiting: "refund in the outbox",
		creditsWaiting: "credits in the outbox", pending: "debit undecided",
	}
	for id, why := range skipped {
		table, key := report(id)
		if r := reports[key]; r.Action != "skipped" || !strings.Contains(r.Reason, "not settled") {
			t.Errorf("%s (%s): report %+v, want skipped with a reason", table, why, r)
		}
	}
	// The packet counts of the reasons: one packet each where one row says so.
	for _, id := range []hongbao.PacketID{live, notClosed, refundWaiting} {
		table, key := report(id)
		if r := reports[key]; !strings.HasPrefix(r.Reason, "1 packets not settled") {
			t.Errorf("%s: reason %q, want 1 packet not settled", table, r.Reason)
		}
	}
	for _, id := range []hongbao.PacketID{settledB, settledC} {
		table, key := report(id)
		if r := reports[key]; r.Action != "archived" || r.Rows != 1 {
			t.Errorf("%s: %+v, want archived", table, r)
		}
	}
	// Skipped days: rows stay, no archive rows; the settled days of other
	// tables are archived.
	f.CheckLive(f.Model(settledA, live, notClosed, refundWaiting, creditsWaiting, pending))
	f.CheckArchived(f.Model(settledB, settledC))
	if got := f.ArchiveTables(); len(got) != 4 {
		t.Errorf("archive tables %v, want those of the 2 archived days only", got)
	}
	f.CheckReads(before)

	// Settle everything: the live one after its expiry, the pending one
	// funded then closed, all refunds and credits delivered.
	f.ClosePackets(live, notClosed)
	f.Clock.Set(pending.Time().Add(time.Minute))
	if _, err := f.Store.Fund(f.Ctx, pending, hongbao.Funded); err != nil {
		t.Fatal(err)
	}
	f.ClosePackets(pending)
	f.Deliver(nil)
	before = f.Records(all)

	// Still live at 03-20 (expires 04-02): a rerun at the same date skips it.
	sum, err = f.Archiver(7).Run(f.Ctx, f.Date("2025-03-20"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 4 || sum.Skipped != 1 {
		t.Errorf("rerun at 2025-03-20: %+v, want 4 archived and the live packet's day skipped", sum)
	}
	f.CheckLive(f.Model(settledA, live))
	sum, err = f.Archiver(7).Run(f.Ctx, f.Date("2025-04-10"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 1 || sum.Skipped != 0 || sum.Packets != 2 {
		t.Errorf("run at 2025-04-10: %+v, want the last day (2 packets) archived", sum)
	}
	f.CheckArchived(want)
	f.CheckReads(before)
	if n := f.Count("SELECT COUNT(*) FROM hb_set.outbox") + f.Count("SELECT COUNT(*) FROM hb_set.expiry") +
		f.Count("SELECT COUNT(*) FROM hb_set.pending"); n != 0 {
		t.Errorf("%d bookkeeping rows left", n)
	}
}
