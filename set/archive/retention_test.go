package archive_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// TestArchiveRetentionAndDryRun: a dry run reports what it would archive
// and changes nothing; a retention that would not leave a table empty a
// day before its reuse is refused before the lock, and changes nothing.
// The command line's side is TestArchiveUsageErrors in set/archive/cron.
func TestArchiveRetentionAndDryRun(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	snap := f.Snapshot()

	t.Run("dry-run", func(t *testing.T) {
		sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), true)
		if err != nil || sum.Archived != 4 || sum.Packets != 9 {
			t.Errorf("dry Run: %+v, %v", sum, err)
		}
		for _, r := range sum.Days {
			if r.Action != "would-archive" {
				t.Errorf("dry Run report %+v", r)
			}
		}
		if !maps.Equal(snap, f.Snapshot()) || len(f.ArchiveTables()) != 0 {
			t.Error("dry run changed tables")
		}
		f.CheckLive(want)
	})

	t.Run("retention", func(t *testing.T) {
		for _, r := range []int{0, -3, 27, 31} {
			sum, err := f.Archiver(r).Run(f.Ctx, f.Date("2025-04-19"), false)
			if err == nil || !strings.Contains(err.Error(), "1..26") || len(sum.Days) != 0 {
				t.Errorf("Run with retention %d: %+v, %v; want refused naming 1..26", r, sum, err)
			}
		}
		if archive.MaxRetentionDays != 26 {
			t.Errorf("MaxRetentionDays %d: February reuses a table after 28 days", archive.MaxRetentionDays)
		}
		sum, err := f.Archiver(26).Run(f.Ctx, f.Date("2025-04-04"), true)
		if err != nil || sum.Archived != 3 || sum.Kept != 1 {
			t.Errorf("retention 26 as of 04-04: %+v, %v; want the 3 days of 03-03/04 due and 03-10 kept", sum, err)
		}
		if !maps.Equal(snap, f.Snapshot()) {
			t.Error("refused runs changed tables")
		}
		f.CheckLive(want)
	})
}
