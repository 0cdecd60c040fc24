package archive_test

import (
	"slices"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchiveKeepsAudiences: a packet's audience is archived with it (and
// only its own bucket's and day's), so an archived packet still says who it
// was for; the live rows of archived packets are gone with them.
func TestArchiveKeepsAudiences(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	group := hongbao.Audience{901, 902, 903}
	archived := f.Create(archivetest.Spec{At: f.At(2025, 3, 3, 9, 0, 0, 0), Bucket: 7, Total: 300, Count: 3, Type: hongbao.Fixed,
		Opens: 2, Audience: group})
	plain := f.Create(archivetest.Spec{At: f.At(2025, 3, 3, 9, 5, 0, 0), Bucket: 7, Total: 100, Count: 1, Opens: 1})
	// Same database (db_00), another bucket, a later day: stays live.
	other := f.Create(archivetest.Spec{At: f.At(2025, 3, 14, 9, 0, 0, 0), Bucket: 3, Total: 100, Count: 1, Audience: hongbao.Audience{904}})
	f.Clock.Set(f.Date("2025-03-12"))
	f.Settle(archived, plain)
	if sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-01"), false); err != nil || sum.Packets != 2 {
		t.Fatalf("archive run: %+v, %v; want the two packets of 2025-03-03", sum, err)
	}
	if n := f.Count("SELECT COUNT(*) FROM db_00.t_7_03"); n != 0 {
		t.Fatalf("%d packets left in the day table", n)
	}
	for _, tt := range []struct {
		id   hongbao.PacketID
		want hongbao.Audience
	}{{archived, group}, {plain, nil}, {other, hongbao.Audience{904}}} {
		p, recs, err := f.Store.Packet(f.Ctx, tt.id)
		if err != nil || !slices.Equal(p.Audience, tt.want) || (p.Audience == nil) != (tt.want == nil) {
			t.Errorf("packet %s: audience %v (%v), want %v", tt.id, p.Audience, err, tt.want)
		}
		if tt.id == archived && (len(recs) != 2 || recs[0].User != 901 || recs[1].User != 902) {
			t.Errorf("archived records %+v, want the two members'", recs)
		}
		h, err := f.Store.Head(f.Ctx, tt.id)
		if err != nil || !slices.Equal(h.Audience, tt.want) {
			t.Errorf("head of %s: audience %v (%v), want %v", tt.id, h.Audience, err, tt.want)
		}
	}
	if n := f.Count("SELECT COUNT(*) FROM db_00.t_audience WHERE packet_id = ?", archived); n != 0 {
		t.Errorf("the archived packet's live audience row is left")
	}
	if n := f.Count("SELECT COUNT(*) FROM db_00_archive.t_audience"); n != 1 {
		t.Errorf("%d audience rows archived, want the archived packet's alone", n)
	}
}
