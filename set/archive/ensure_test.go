package archive_test

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// TestArchiveEnsure: Ensure creates the day tables of today (as of) and the
// next ahead days for the given buckets, across a month end, and nothing
// else; it is idempotent. The command line, which takes the buckets from
// the topology, is TestArchiveCommandEnsure in set/archive/cron.
func TestArchiveEnsure(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	buckets := []hongbao.Bucket{0, 517, 999}
	n, err := archive.Ensure(f.Ctx, f.DB, buckets, f.Date("2025-01-30"), f.Loc, 2)
	if err != nil || n != 9 {
		t.Fatalf("Ensure: %d, %v; want 9", n, err)
	}
	var want []string
	for _, b := range buckets {
		for _, d := range []int{30, 31, 1} {
			dt := hongbao.DayTable{Bucket: b, Day: d}
			want = append(want, dt.Packets(), dt.Details())
		}
	}
	f.CheckDayTables(want)
	if n, err := archive.Ensure(f.Ctx, f.DB, buckets, f.Date("2025-01-30"), f.Loc, 2); err != nil || n != 9 {
		t.Errorf("Ensure again: %d, %v", n, err)
	}
	f.CheckDayTables(want)
	for _, db := range []string{"db_00", "db_51", "db_99"} {
		if !dbtest.TableExists(t, f.DB, db+".t_idem") {
			t.Errorf("%s.t_idem missing", db)
		}
	}
}
