package archive_test

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestArchiveOnlyOwnedBuckets: a SET archives only the days of buckets its
// fence holds, checked again at each copy and under the fence's lock at
// each purge. Of FourDays' buckets, 123 leaves SET a before the run (its
// day is not even listed), 7 leaves between the copy and the purge of its
// first day (that purge is refused, its second day is not copied) and 999
// stays (archived).
func TestArchiveOnlyOwnedBuckets(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	disown := func(b hongbao.Bucket) {
		t.Helper()
		if _, err := f.DB.ExecContext(f.Ctx, "DELETE FROM hb_fence.owned WHERE set_name = 'a' AND bucket = ?", int(b)); err != nil {
			t.Fatal(err)
		}
	}
	disown(123)
	a := f.Archiver(7)
	var copied []archivetest.Day
	a.AfterCopy = func(d store.Day) error {
		copied = append(copied, archivetest.Day{Table: d.Table, Date: d.Date.Format("20060102")})
		if d.Table.Bucket == 7 {
			disown(7)
		}
		return nil
	}
	sum, err := a.Run(f.Ctx, f.Date("2025-04-19"), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Archived != 1 || sum.Skipped != 2 || len(sum.Days) != 3 {
		t.Errorf("run: %+v; want 3 days listed (none of bucket 123), 1 archived, 2 skipped", sum)
	}
	reports := archivetest.Reports(sum)
	for key, action := range map[string]string{
		"db_00.t_7_03 2025-03-03": "skipped",
		"db_00.t_7_04 2025-03-04": "skipped",
		"db_99.t_9_10 2025-03-10": "archived",
	} {
		if r := reports[key]; r.Action != action {
			t.Errorf("%s: %+v, want %s", key, r, action)
		}
	}
	if len(copied) != 2 || copied[0].Table.Bucket != 7 || copied[1].Table.Bucket != 999 {
		t.Fatalf("days copied: %v, want bucket 7's first day and bucket 999's", copied)
	}
	live, archived := map[archivetest.Day]dbtest.Sums{}, map[archivetest.Day]dbtest.Sums{}
	for d, s := range want {
		if d.Table.Bucket == 999 {
			archived[d] = s
		} else {
			live[d] = s
		}
	}
	f.CheckArchived(archived)
	for d, w := range live { // whole in the live tables: nothing purged
		if got := f.LiveSums(d); got != w {
			t.Errorf("%s on %s: live rows %+v, want %+v", d.Live(), d.Date, got, w)
		}
		if _, ok := f.ColdSums(d); ok != (d == copied[0]) {
			t.Errorf("%s: archive table exists %v, want %v (only the day copied before its bucket left)", d.Cold(), ok, !ok)
		}
	}
}
