package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestLimitsUsage: hbctl limits' mistakes are usage errors naming what is
// wrong, found before any database is asked.
func TestLimitsUsage(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		mention string
	}{
		{nil, "usage: hbctl limits"},
		{[]string{"raise"}, "usage: hbctl limits"},
		{[]string{"set", "--daily-send-total", "5"}, "flag --user"},
		{[]string{"set", "--user", "0", "--daily-send-total", "5"}, "flag --user"},
		{[]string{"set", "--user", "43"}, "at least one of"},
		{[]string{"set", "--user", "43", "--daily-send-total", "-1"}, "--daily-send-total: must not be negative"},
		{[]string{"set", "--user", "43", "--daily-send-count", "many"}, "daily-send-count"},
		{[]string{"show", "--user", "43", "--daily-receive-total", "5"}, "only limits set"},
		{[]string{"clear", "--user", "43", "extra"}, "extra"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := cmdLimits(context.Background(), &env{stdout: &out, stderr: &out}, tt.args)
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("hbctl limits %v: %v, want a usage error mentioning %q", tt.args, err, tt.mention)
			}
		})
	}
}

// TestLimitsSetShowClear: an operator raises one user's daily send total
// over the configured one, sees it with the day's usage, and clears it.
func TestLimitsSetShowClear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, append(devConfig(t), "\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_wallet_limits_")
	db := dbtest.DB(t, "a", 2)
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`") })
	e := &env{environ: []string{"HB_WALLET_DSN=" + cfg.FormatDSN(), "HB_LIMITS_DAILY_SEND_TOTAL=100000", "HB_LIMITS_DAILY_SEND_COUNT=20"}}
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		e.stdout, e.stderr = &out, &out
		if err := cmdLimits(context.Background(), e, append(args, "--config", path)); err != nil {
			t.Fatalf("hbctl limits %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	line := func(out, name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^\s+` + name + `\s+(.*)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s line in %q", name, out)
		}
		return strings.Join(strings.Fields(m[1]), " ")
	}
	out := run("show", "--user", "43")
	if got := line(out, "daily_send_total"); got != "100000 (configured), used today 0" {
		t.Errorf("show: daily_send_total %q", got)
	}
	out = run("set", "--user", "43", "--daily-send-total", "500000", "--daily-receive-total", "0")
	for name, want := range map[string]string{
		"daily_send_total":    "500000 (set for the user), used today 0",
		"daily_send_count":    "20 (configured), used today 0",
		"daily_receive_total": "none (set for the user), used today 0",
	} {
		if got := line(out, name); got != want {
			t.Errorf("after set: %s %q, want %q", name, got, want)
		}
	}
	if got := line(run("show", "--user", "43"), "daily_send_total"); got != "500000 (set for the user), used today 0" {
		t.Errorf("show after set: %q", got)
	}
	if got := line(run("clear", "--user", "43"), "daily_send_total"); got != "100000 (configured), used today 0" {
		t.Errorf("after clear: %q", got)
	}
}
