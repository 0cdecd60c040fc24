package archive_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchiveStatus lists every day not archived yet as live (within
// retention), pending (due, not settled) or due (next run archives it).
// The command line's report, which adds the archived days, is
// TestArchiveCommandStatus in set/archive/cron.
func TestArchiveStatus(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	f.StatusDays()
	snap := f.Snapshot()

	reports, err := f.Archiver(7).Status(f.Ctx, f.Date("2025-03-15"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reports {
		got[fmt.Sprintf("%s %s %d", r.Date, r.Table, r.Rows)] = r.Action
	}
	wantStatus := map[string]string{
		"2025-03-05 db_00.t_1_05 2": "due",
		"2025-03-06 db_00.t_2_06 1": "pending",
		"2025-03-12 db_00.t_3_12 1": "live",
	}
	if !maps.Equal(got, wantStatus) {
		t.Errorf("Status: %v, want %v", got, wantStatus)
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("status changed tables")
	}
}
