package cron_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
)

// TestArchiveCommandStatus prints every day as live (within retention),
// pending (due, not settled), due (next run archives it) and archived,
// with the reasons, and changes nothing. The Archiver's side is
// TestArchiveStatus in set/archive.
func TestArchiveCommandStatus(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	f.StatusDays()
	snap := f.Snapshot()

	out, _, err := command(f, nil, "status", "--as-of", "2025-03-15", "--config", f.Config(7, ""))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] != "SET a as of 2025-03-15 (retention 7 days)" {
		t.Errorf("status header: %q", out)
	}
	rows := map[string]string{}
	for _, l := range lines[1:] {
		fs := strings.Fields(l)
		if len(fs) < 5 || fs[4] != "packets" {
			t.Errorf("status line %q", l)
			continue
		}
		rows[fs[0]+" "+fs[1]+" "+fs[3]] = fs[2]
	}
	wantRows := map[string]string{
		"2025-03-01 db_00_archive.t_1_20250301 2": "archived",
		"2025-03-05 db_00.t_1_05 2":               "due",
		"2025-03-06 db_00.t_2_06 1":               "pending",
		"2025-03-12 db_00.t_3_12 1":               "live",
	}
	if !maps.Equal(rows, wantRows) {
		t.Errorf("status rows %v, want %v\n%s", rows, wantRows, out)
	}
	for _, want := range []string{"not settled", "next run archives it", "archive after 7 days", "readable through the API"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("status changed tables")
	}
}
