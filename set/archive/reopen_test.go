package archive_test

import (
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchivedOpenerKeepsTheirShare: after its day is archived, a packet's
// earlier opener who opens again is answered with their share (the
// server's over path asks Store.Opened), not expired; a user who never
// opened it has none. Issue 13's defect 3.
func TestArchivedOpenerKeepsTheirShare(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(ids...)
	f.Clock.Set(f.Date("2025-04-19"))
	if _, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), false); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, id := range ids {
		_, recs, err := f.Store.Packet(f.Ctx, id) // from the archive
		if err != nil {
			t.Fatalf("packet %s after archiving: %v", id, err)
		}
		for _, r := range recs {
			amount, ok, err := f.Store.Opened(f.Ctx, id, r.User)
			if err != nil || !ok || amount != r.Amount {
				t.Errorf("Opened(%s, %s) after archiving = %d, %v, %v; want their %d", id, r.User, amount, ok, err, r.Amount)
			}
			checked++
		}
		if _, ok, err := f.Store.Opened(f.Ctx, id, 1); ok || err != nil {
			t.Errorf("Opened(%s) by a user who never opened it = %v, %v; want none", id, ok, err)
		}
	}
	if checked != 154 {
		t.Errorf("checked %d archived shares, want the data set's 154", checked)
	}
}
