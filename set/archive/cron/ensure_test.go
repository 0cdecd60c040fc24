package cron_test

import (
	"fmt"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestArchiveCommandEnsure: through the command line, ensure creates the
// day tables of today (as of) and the next ahead days (here from the
// environment, across a month end) for the buckets the SET owns in the
// topology of the meta database, and nothing else. Ensure itself is
// TestArchiveEnsure in set/archive.
func TestArchiveCommandEnsure(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	// SET a owns buckets 3 and 518 in the topology.
	meta, err := sqldb.OpenCreate(f.Ctx, f.MariaDB.DSN+"hb_meta", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	if _, err := topology.Init(f.Ctx, meta, []topology.Set{{Name: "a", MySQLDSN: f.MariaDB.DSN}, {Name: "z", MySQLDSN: f.MariaDB.DSN}}); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.ExecContext(f.Ctx, "UPDATE buckets SET set_name = IF(bucket IN (3, 518), 'a', 'z')"); err != nil {
		t.Fatal(err)
	}
	cfg := f.Config(7, fmt.Sprintf("meta_dsn: %q", f.MariaDB.DSN+"hb_meta"))
	out, _, err := command(f, []string{"HB_ARCHIVE_AHEAD_DAYS=1"}, "ensure", "--set", "a", "--as-of", "2025-02-28", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "SET a: 4 day tables ensured (2025-02-28 + 1 days)" {
		t.Errorf("ensure output %q", out)
	}
	var want []string
	for _, b := range []hongbao.Bucket{3, 518} {
		for _, d := range []int{28, 1} {
			dt := hongbao.DayTable{Bucket: b, Day: d}
			want = append(want, dt.Packets(), dt.Details())
		}
	}
	f.CheckDayTables(want)
}
