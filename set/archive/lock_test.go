package archive_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// TestArchiveLockedRunChangesNothing: while one run holds the SET's lock
// (blocked between a copy and its purge), a second run and a dry run fail
// with archive.ErrLocked and change nothing; a lock held by another
// connection does the same; once released, runs go ahead. The command
// line's side is TestArchiveCommandLockedChangesNothing in set/archive/cron.
func TestArchiveLockedRunChangesNothing(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	asOf := f.Date("2025-04-19")

	first := f.BlockRun(7, asOf)
	snap := f.Snapshot()
	sum, err := f.Archiver(7).Run(f.Ctx, asOf, false)
	if !errors.Is(err, archive.ErrLocked) || !strings.Contains(err.Error(), "SET a") {
		t.Errorf("second run: %v, want archive.ErrLocked naming SET a", err)
	}
	if sum.Archived != 0 || len(sum.Days) != 0 {
		t.Errorf("second run reported %+v", sum)
	}
	if _, err := f.Archiver(7).Run(f.Ctx, asOf, true); !errors.Is(err, archive.ErrLocked) {
		t.Errorf("dry run: %v, want archive.ErrLocked", err)
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("a locked run changed tables")
	}

	if s, err := first.Finish(); err != nil || s.Archived != 4 {
		t.Fatalf("first run: %+v, %v; want 4 days archived", s, err)
	}
	f.CheckArchived(want)

	// The lock held by another client (a run on another host).
	release := f.HoldLock()
	more := f.Create(archivetest.Spec{At: f.At(2025, 3, 6, 10, 0, 0, 0), Bucket: 77, Total: 100, Count: 2, Opens: 2})
	f.Settle(more)
	snap = f.Snapshot()
	if _, err := f.Archiver(7).Run(f.Ctx, asOf, false); !errors.Is(err, archive.ErrLocked) {
		t.Errorf("run under a foreign lock: %v, want archive.ErrLocked", err)
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("a locked run changed tables")
	}
	release()
	if sum, err := f.Archiver(7).Run(f.Ctx, asOf, false); err != nil || sum.Archived != 1 || sum.Packets != 1 {
		t.Errorf("run after release: %+v, %v; want 1 day (1 packet) archived", sum, err)
	}
	f.CheckArchived(f.Model(more))
}
