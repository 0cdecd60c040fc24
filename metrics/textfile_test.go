package metrics_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/metrics"
)

// The archive textfile carries one gauge per SET, date and state with the
// number of day tables: dates, never tables, label it, so the series stay
// bounded by the days a SET keeps live.
func TestWriteArchiveDays(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.prom")
	at := time.Unix(1_700_000_000, 0)
	runs := []metrics.ArchiveRun{
		{Set: "a", At: at, Archived: 1, OK: true, Days: []metrics.ArchiveDay{
			{Date: "2025-03-03", State: "archived", Tables: 3},
			{Date: "2025-04-18", State: "live", Tables: 1000},
			{Date: "2025-04-10", State: "pending", Tables: 2},
		}},
		{Set: "b", At: at, OK: true, Days: []metrics.ArchiveDay{{Date: "2025-04-18", State: "live", Tables: 7}}},
	}
	if err := metrics.WriteArchive(path, runs); err != nil {
		t.Fatal(err)
	}
	lines, err := metrics.ReadTextfile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		if strings.HasPrefix(l, "hongbao_archive_day_tables{") {
			got = append(got, l)
		}
	}
	want := []string{
		`hongbao_archive_day_tables{date="2025-03-03",set="a",state="archived"} 3`,
		`hongbao_archive_day_tables{date="2025-04-10",set="a",state="pending"} 2`,
		`hongbao_archive_day_tables{date="2025-04-18",set="a",state="live"} 1000`,
		`hongbao_archive_day_tables{date="2025-04-18",set="b",state="live"} 7`,
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("per-day gauges:\n got %q\nwant %q", got, want)
	}
}
