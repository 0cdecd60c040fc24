package archive_test

// Integration tests of archive.Archiver against a private MariaDB per test
// (archivetest.Fixture): every count and sum covers everything in the
// server. The command line's tests are in set/archive/cron.

import (
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/settle"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// TestArchiveRunMovesSettledDays: 40 days after the packets' dates every
// day table that held them is empty, the archive holds every row with the
// same counts and money, the wallet got exactly the shares and refunds,
// and the store still answers for every archived packet with the same
// records.
func TestArchiveRunMovesSettledDays(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()

	// Settle through the real settler and wallet.
	w, err := wallet.Open(f.Ctx, f.MariaDB.DSN+"hb_wallet", nil, 4, f.Clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f.Clock.Set(f.Date("2025-03-12"))
	settler := settle.New(f.Store, w, f.Clock.Now, zap.NewNop())
	for i := 0; ; i++ {
		n, err := settler.Round(f.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if i > 20 {
			t.Fatal("settler does not finish")
		}
	}
	want := f.Model(ids...)
	if len(want) != 4 {
		t.Fatalf("data set spans %d days, want 4", len(want))
	}
	var opened, refunds int64
	var packets, details int
	for _, id := range ids {
		p := f.Packet(id)
		opened += p.Opened()
		packets++
		details += len(p.Shares)
		if p.Funding == hongbao.Funded {
			refunds += p.Total - p.Opened()
		}
	}
	if packets != 9 || details != 154 {
		t.Fatalf("data set: %d packets, %d shares; want 9, 154", packets, details)
	}
	var credits, refunded int64
	if err := w.DB().QueryRowContext(f.Ctx, "SELECT COALESCE(SUM(CASE WHEN kind='open' THEN amount END),0), COALESCE(SUM(CASE WHEN kind='refund' THEN amount END),0) FROM ledger").
		Scan(&credits, &refunded); err != nil {
		t.Fatal(err)
	}
	if credits != opened || refunded != refunds {
		t.Fatalf("wallet before archiving: credits %d refunds %d, want %d and %d", credits, refunded, opened, refunds)
	}
	for d, s := range want {
		if got := f.LiveSums(d); got != s {
			t.Fatalf("%s %s before archiving: %+v, want %+v", d.Live(), d.Date, got, s)
		}
	}
	before := f.Records(ids)

	sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 4 || sum.Packets != 9 || sum.Skipped != 0 || sum.Kept != 0 || sum.Set != "a" {
		t.Errorf("summary %+v, want 4 days and 9 packets archived", sum)
	}
	wantReports := map[string]int{
		"db_00.t_7_03 2025-03-03": 5, "db_00.t_7_04 2025-03-04": 1,
		"db_12.t_3_03 2025-03-03": 2, "db_99.t_9_10 2025-03-10": 1,
	}
	reports := archivetest.Reports(sum)
	for k, n := range wantReports {
		if r, ok := reports[k]; !ok || r.Action != "archived" || r.Rows != n {
			t.Errorf("report of %s: %+v, want archived with %d packets", k, r, n)
		}
	}
	if len(reports) != len(wantReports) {
		t.Errorf("reports %v, want exactly %v", slices.Sorted(maps.Keys(reports)), slices.Sorted(maps.Keys(wantReports)))
	}

	// Live day tables: empty; archive: every row, same money.
	for d := range want {
		if p, dt := f.TableCount(d.Table); p != 0 || dt != 0 {
			t.Errorf("%s: %d packets and %d details left", d.Live(), p, dt)
		}
	}
	f.CheckArchived(want)
	wantTables := []string{
		"db_00_archive.t_7_20250303", "db_00_archive.t_7_20250303_detail",
		"db_00_archive.t_7_20250304", "db_00_archive.t_7_20250304_detail",
		"db_12_archive.t_3_20250303", "db_12_archive.t_3_20250303_detail",
		"db_99_archive.t_9_20250310", "db_99_archive.t_9_20250310_detail",
	}
	if got := f.ArchiveTables(); !slices.Equal(got, wantTables) {
		t.Errorf("archive tables %v, want %v", got, wantTables)
	}
	// Exact totals over the whole server, by the layout's names.
	p0, p1, p3, p7 := f.Packet(ids[0]), f.Packet(ids[1]), f.Packet(ids[3]), f.Packet(ids[7])
	tot := f.Sums("db_00_archive.t_7_20250303", "", "")
	if tot != (dbtest.Sums{Packets: 5, Details: 15, Total: 3100, Remaining: 3100 - p0.Opened() - p1.Opened() - p3.Opened(),
		Opened: p0.Opened() + p1.Opened() + p3.Opened()}) {
		t.Errorf("db_00_archive.t_7_20250303: %+v", tot)
	}
	if s := f.Sums("db_12_archive.t_3_20250303", "", ""); s.Packets != 2 || s.Details != 101 || s.Total != 20999 || s.Opened != 20000+p7.Opened() {
		t.Errorf("db_12_archive.t_3_20250303: %+v", s)
	}
	// The bookkeeping of archived packets is gone with them.
	if n := f.Count("SELECT COUNT(*) FROM hb_set.expiry"); n != 0 {
		t.Errorf("%d expiry marks left", n)
	}
	if n := f.Count("SELECT COUNT(*) FROM hb_set.outbox") + f.Count("SELECT COUNT(*) FROM hb_set.pending"); n != 0 {
		t.Errorf("%d outbox/pending rows left", n)
	}
	if n := f.Count("SELECT COUNT(*) FROM db_00.t_idem") + f.Count("SELECT COUNT(*) FROM db_12.t_idem"); n != 0 {
		t.Errorf("%d idempotency keys of archived packets left", n)
	}

	// Reads follow the data; the store's verify sees every packet once.
	f.CheckReads(before)
	totals, bad, err := store.VerifySet(f.Ctx, f.DB, f.DB, func(int64) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	var fundedTotal int64
	for _, id := range f.Funded(ids) {
		fundedTotal += f.Packet(id).Total
	}
	if len(bad) > 0 || totals.Packets != 8 || totals.Funded != fundedTotal || totals.Details != 154 || totals.Held != 0 {
		t.Errorf("verify after archiving: %+v %v; want 8 funded packets, %d fen, 154 shares, nothing held", totals, bad, fundedTotal)
	}

	// A second run finds nothing to do and changes nothing.
	snap := f.Snapshot()
	sum, err = f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), false)
	if err != nil || sum.Archived != 0 || len(sum.Days) != 0 {
		t.Errorf("second run: %+v, %v; want nothing to do", sum, err)
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("second run changed tables")
	}
}
