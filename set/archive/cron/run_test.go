package cron_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
)

// TestArchiveCommandRun runs the archiver through the command line with a
// YAML configuration: one line per day it acted on, a summary, and the
// days archived as by archive.Archiver.
func TestArchiveCommandRun(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	before := f.Records(ids)
	cfg := f.Config(7, "")

	out, errOut, err := command(f, nil, "run", "--as-of", "2025-04-19", "--config", cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantLines := []string{
		"SET a 2025-03-03 db_00.t_7_03: archived 5 packets",
		"SET a 2025-03-04 db_00.t_7_04: archived 1 packets",
		"SET a 2025-03-03 db_12.t_3_03: archived 2 packets",
		"SET a 2025-03-10 db_99.t_9_10: archived 1 packets",
		"SET a: archived 4 days (9 packets), skipped 0, kept 0",
	}
	if len(lines) != len(wantLines) {
		t.Errorf("output has %d lines, want %d:\n%s", len(lines), len(wantLines), out)
	}
	for _, w := range wantLines {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.TrimSpace(l) == w }) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	f.CheckArchived(want)
	f.CheckReads(before)

	// --set a and a second run: nothing left.
	out, _, err = command(f, nil, "run", "--as-of", "2025-04-19", "--set", "a", "--config", cfg)
	if err != nil || strings.TrimSpace(out) != "SET a: archived 0 days (0 packets), skipped 0, kept 0" {
		t.Errorf("second run: %v\n%s", err, out)
	}
}

// TestArchiveCommandFaultKnob: a run whose AfterCopy knob fails (a crash
// between a day's verified copy and its purge) stops there: no day purged.
func TestArchiveCommandFaultKnob(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	ids := f.FourDays()
	f.Settle(f.Funded(ids)...)
	want := f.Model(ids...)
	cfg := f.Config(7, "")
	var out, errOut bytes.Buffer
	err := cron.RunWith(f.Ctx, []string{"run", "--as-of", "2025-04-19", "--config", cfg}, &out, &errOut, nil, cron.Knobs{AfterCopy: FaultAfterCopy})
	if err == nil || !strings.Contains(err.Error(), "injected fault after copying") {
		t.Errorf("run with a failing AfterCopy knob: %v, want the injected fault", err)
	}
	archived := 0
	for d := range want {
		if f.LiveSums(d) == (dbtest.Sums{}) {
			archived++
		}
	}
	if archived != 0 {
		t.Errorf("%d days purged despite the fault", archived)
	}
}
