package archive_test

import (
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestYoungArchivedOpenerKeepsTheirShare: a packet with a short expiry,
// archived less than a day after it was created (retention 1 just after
// local midnight, or an --as-of ahead), still answers its earlier openers
// with their share (Store.Opened, the server's over path), never nothing
// (which the server answers 410 expired). Issue 23, finding 8.
func TestYoungArchivedOpenerKeepsTheirShare(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	// 23:50 local, 5 minutes' expiry: archived at 00:30 the next day with
	// retention 1 (its day is due), 40 minutes old.
	late := f.Create(archivetest.Spec{At: f.At(2025, 3, 3, 23, 50, 0, 0), Bucket: 41, Total: 900, Count: 9, Opens: 4, Expiry: 5 * time.Minute})
	// Noon, an --as-of two days ahead: archived 3 hours old.
	ahead := f.Create(archivetest.Spec{At: f.At(2025, 3, 5, 12, 0, 0, 0), Bucket: 42, Total: 500, Count: 5, Opens: 5, Expiry: time.Hour})
	f.Settle(late, ahead)
	runs := []struct {
		id          hongbao.PacketID
		clock, asOf time.Time
	}{
		{late, f.At(2025, 3, 4, 0, 30, 0, 0), f.At(2025, 3, 4, 0, 30, 0, 0)},
		{ahead, f.At(2025, 3, 5, 15, 0, 0, 0), f.Date("2025-03-07")},
	}
	for _, r := range runs {
		f.Clock.Set(r.clock)
		if sum, err := f.Archiver(1).Run(f.Ctx, r.asOf, false); err != nil || sum.Archived < 1 {
			t.Fatalf("archive as of %s: %+v, %v; want the packet's day archived", r.asOf, sum, err)
		}
		if age := r.clock.Sub(r.id.Time()); age >= 24*time.Hour {
			t.Fatalf("packet %s is %s old: the test needs one archived younger than a day", r.id, age)
		}
		f.CheckArchived(f.Model(r.id))
		shares := f.Packet(r.id).Shares
		_, recs, err := f.Store.Packet(f.Ctx, r.id) // from the archive
		if err != nil || len(recs) != len(shares) {
			t.Fatalf("packet %s after archiving: %d records, %v; want %d", r.id, len(recs), err, len(shares))
		}
		for i, rec := range recs {
			amount, ok, err := f.Store.Opened(f.Ctx, r.id, rec.User)
			if err != nil || !ok || amount != shares[i] {
				t.Errorf("Opened(%s, %s) %s after its creation, archived = %d, %v, %v; want their %d",
					r.id, rec.User, r.clock.Sub(r.id.Time()), amount, ok, err, shares[i])
			}
		}
		if _, ok, err := f.Store.Opened(f.Ctx, r.id, 1); ok || err != nil {
			t.Errorf("Opened(%s) by a user who never opened it = %v, %v; want none", r.id, ok, err)
		}
	}
}
