package cron_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/metrics"
)

// A run writes its summary to archive.textfile as Prometheus metrics (for
// node_exporter's textfile collector) and status shows it; a dry run
// writes nothing.
func TestArchiveCommandTextfile(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	path := filepath.Join(t.TempDir(), "textfile", "hbarchive.prom")
	cfg := f.Config(7, "  textfile: "+path+"\n")

	if _, errOut, err := command(f, nil, "run", "--dry-run", "--as-of", "2025-04-19", "--config", cfg); err != nil {
		t.Fatalf("dry run: %v\n%s", err, errOut)
	}
	if _, err := metrics.ReadTextfile(path); err == nil {
		t.Fatal("a dry run wrote the textfile")
	}
	if _, errOut, err := command(f, nil, "run", "--as-of", "2025-04-19", "--config", cfg); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	lines, err := metrics.ReadTextfile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`hongbao_archive_days{set="a",state="archived"} 4`,
		`hongbao_archive_days{set="a",state="pending"} 0`,
		`hongbao_archive_days{set="a",state="skipped"} 0`,
		`hongbao_archive_last_run_success{set="a"} 1`,
		// per day: the two day tables of 2025-03-03 (buckets 7 and 123) count as one date
		`hongbao_archive_day_tables{date="2025-03-03",set="a",state="archived"} 2`,
		`hongbao_archive_day_tables{date="2025-03-04",set="a",state="archived"} 1`,
		`hongbao_archive_day_tables{date="2025-03-10",set="a",state="archived"} 1`,
	}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("textfile lacks %q:\n%s", w, strings.Join(lines, "\n"))
		}
	}
	out, _, err := command(f, nil, "status", "--as-of", "2025-04-19", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "last run ("+path+"):") || !strings.Contains(out, want[0]) {
		t.Errorf("status does not show the last run:\n%s", out)
	}
}
