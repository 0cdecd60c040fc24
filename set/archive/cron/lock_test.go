package cron_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// TestArchiveCommandLockedChangesNothing: while a run holds the SET's lock
// (blocked between a copy and its purge), the command line fails with
// archive.ErrLocked, prints nothing and changes nothing; a lock held by
// another connection does the same; once released, the command goes
// ahead. The Archiver's side is TestArchiveLockedRunChangesNothing in
// set/archive.
func TestArchiveCommandLockedChangesNothing(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	cfg := f.Config(7, "")

	first := f.BlockRun(7, f.Date("2025-04-19"))
	snap := f.Snapshot()
	out, _, err := command(f, nil, "run", "--as-of", "2025-04-19", "--config", cfg)
	if !errors.Is(err, archive.ErrLocked) || !strings.Contains(err.Error(), "another hbarchive run is in progress") {
		t.Errorf("command: %v, want archive.ErrLocked", err)
	}
	if out != "" {
		t.Errorf("locked command printed %q", out)
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
	if _, _, err := command(f, nil, "run", "--as-of", "2025-04-19", "--config", cfg); !errors.Is(err, archive.ErrLocked) {
		t.Errorf("command under a foreign lock: %v, want archive.ErrLocked", err)
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("a locked run changed tables")
	}
	release()
	out, _, err = command(f, nil, "run", "--as-of", "2025-04-19", "--config", cfg)
	if err != nil || !strings.Contains(out, "SET a: archived 1 days (1 packets)") {
		t.Errorf("run after release: %v\n%s", err, out)
	}
	f.CheckArchived(f.Model(more))
}
