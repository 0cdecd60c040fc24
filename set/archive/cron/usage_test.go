package cron_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
)

// TestArchiveUsageErrors: a retention that would not leave a table empty a
// day before its reuse, a bad date, an unknown SET or command are usage
// errors naming what is wrong, and change nothing; --dry-run reports what
// it would archive and changes nothing. The Archiver's own refusals are
// TestArchiveRetentionAndDryRun in set/archive.
func TestArchiveUsageErrors(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	cfg := f.Config(7, "")
	snap := f.Snapshot()

	t.Run("dry-run", func(t *testing.T) {
		out, _, err := command(f, nil, "run", "--dry-run", "--as-of", "2025-04-19", "--config", cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{
			"SET a 2025-03-03 db_00.t_7_03: would-archive 5 packets",
			"SET a 2025-03-04 db_00.t_7_04: would-archive 1 packets",
			"SET a 2025-03-03 db_12.t_3_03: would-archive 2 packets",
			"SET a 2025-03-10 db_99.t_9_10: would-archive 1 packets",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("dry run output lacks %q:\n%s", w, out)
			}
		}
		t.Logf("dry run output:\n%s", out)
		if strings.Count(out, "would-archive") != 4 {
			t.Errorf("dry run output:\n%s", out)
		}
		if !maps.Equal(snap, f.Snapshot()) || len(f.ArchiveTables()) != 0 {
			t.Error("dry run changed tables")
		}
		f.CheckLive(want)
	})

	cases := []struct {
		name string
		args []string
		cfg  string // "": the retention 7 one
		says []string
	}{
		{"retention-days 27", []string{"run", "--retention-days", "27", "--as-of", "2025-04-19"}, "", []string{"retention 27 days refused", "1..26"}},
		{"retention-days 0", []string{"run", "--retention-days", "0", "--as-of", "2025-03-05"}, "", []string{"retention 0 days refused", "1..26"}},
		{"retention-days -1", []string{"run", "--retention-days", "-1", "--as-of", "2025-04-19"}, "", []string{"retention -1 days refused", "1..26"}},
		{"retention_days 27 in config", []string{"run", "--as-of", "2025-04-19"}, f.Config(27, ""), []string{"retention 27 days refused", "1..26"}},
		{"retention-days 27 dry-run", []string{"run", "--dry-run", "--retention-days", "27"}, "", []string{"1..26"}},
		{"as-of month 13", []string{"run", "--as-of", "2026-13-01"}, "", []string{"--as-of", "2026-13-01", "YYYY-MM-DD"}},
		{"as-of not a date", []string{"run", "--as-of", "yesterday"}, "", []string{"--as-of"}},
		{"unknown SET", []string{"run", "--set", "zz", "--as-of", "2025-04-19"}, "", []string{"--set", "zz"}},
		{"unknown flag", []string{"run", "--bogus"}, "", []string{"bogus"}},
		{"no command", nil, "", []string{"usage: hbarchive ensure|run|status"}},
		{"unknown command", []string{"archive"}, "", []string{"usage: hbarchive ensure|run|status"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if len(args) > 0 {
				path := cfg
				if c.cfg != "" {
					path = c.cfg
				}
				args = append(slices.Clone(args), "--config", path)
			}
			out, _, err := command(f, nil, args...)
			if !errors.Is(err, cron.ErrUsage) {
				t.Fatalf("%v: error %v, want a usage error\n%s", args, err, out)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v: %q does not say %q", args, err, s)
				}
			}
			if !maps.Equal(snap, f.Snapshot()) {
				t.Errorf("%v changed tables", args)
			}
		})
	}
	if !maps.Equal(snap, f.Snapshot()) {
		t.Error("refused command lines changed tables")
	}
	f.CheckLive(want)
}
