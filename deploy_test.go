package hongbao_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The alerting rules parse (promtool check rules) and fire as their unit
// tests say (promtool test rules). make test installs promtool (the Debian
// prometheus package) when it is missing.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: make test (scripts/dev.sh deps) installs the prometheus package")
	}
	for _, args := range [][]string{{"check", "rules", "hongbao.rules.yml"}, {"test", "rules", "hongbao.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Join("deploy", "prometheus")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricName is a hongbao metric in Go source, rules or a dashboard.
var metricName = regexp.MustCompile(`\bhongbao_[a-z_]+`)

// Every hongbao metric the rules and the dashboard query is one the code
// exports (a histogram's _bucket, _sum and _count included), so a renamed
// metric cannot leave an alert silently watching nothing.
func TestDeployQueriesExistingMetrics(t *testing.T) {
	defined := map[string]bool{}
	for _, glob := range []string{"metrics/*.go", "set/ops.go", "router/dashboard/audit.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range metricName.FindAllString(string(src), -1) {
				for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
					defined[m+suffix] = true
				}
			}
		}
	}
	if len(defined) < 40 {
		t.Fatalf("found only %d metric names in metrics/*.go", len(defined))
	}
	for _, f := range []string{"deploy/prometheus/hongbao.rules.yml", "deploy/grafana/hongbao.json"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var used []string
		for _, m := range metricName.FindAllString(string(src), -1) {
			if !defined[m] && !slices.Contains(used, m) {
				used = append(used, m)
			}
		}
		if len(used) > 0 {
			t.Errorf("%s queries metrics the code does not export: %v", f, used)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	raw, _ := os.ReadFile("deploy/grafana/hongbao.json")
	if err := json.Unmarshal(raw, &dash); err != nil || len(dash.Panels) < 10 {
		t.Fatalf("deploy/grafana/hongbao.json: %v, %d panels", err, len(dash.Panels))
	}
}

// The systemd units are valid (systemd-analyze verify), with the
// binaries' paths pointed at stand-ins. systemd-analyze ships with systemd:
// on a machine without it the units are not checked, which the test says.
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: systemd units NOT checked on this machine")
		return
	}
	dir := t.TempDir()
	for _, b := range []string{"hbrouter", "hbserver", "hbsettler", "hbarchive", "hbctl", "hbwatch"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	units, _ := filepath.Glob("deploy/systemd/*")
	var names []string
	for _, u := range units {
		src, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(u)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(src), "/usr/local/bin/", dir+"/")), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Join(dir, strings.Replace(name, "@.", "@x.", 1)))
	}
	for _, want := range []string{"hbrouter.service", "hbserver@.service", "hbsettler@.service", "hbarchive.service", "hbarchive.timer", "hbverify.service", "hbverify.timer",
		"hbwatch.service"} {
		if !slices.Contains(units, "deploy/systemd/"+want) {
			t.Errorf("deploy/systemd/%s missing", want)
		}
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, names...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// Every long-running process's unit restarts it whatever ended it, within
// seconds and without ever giving up; the archival run is run again when
// it was killed half-way. (systemd-analyze does not check this: a unit
// without Restart= is valid.)
func TestSystemdUnitsRestart(t *testing.T) {
	for _, tc := range []struct {
		unit                   string
		restart                string
		minSec, maxSec         int // RestartSec bounds, seconds
		startLimitIntervalZero bool
	}{
		{"hbrouter.service", "always", 1, 5, true},
		{"hbserver@.service", "always", 1, 5, true},
		{"hbsettler@.service", "always", 1, 5, true},
		{"hbwatch.service", "always", 1, 5, true},
		{"hbarchive.service", "on-failure", 10, 600, false},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			kv := unitKeys(t, filepath.Join("deploy", "systemd", tc.unit))
			if kv["Restart"] != tc.restart {
				t.Errorf("Restart=%q, want %q", kv["Restart"], tc.restart)
			}
			sec := unitSeconds(t, kv["RestartSec"])
			if sec < tc.minSec || sec > tc.maxSec {
				t.Errorf("RestartSec=%q (%d s), want %d..%d s", kv["RestartSec"], sec, tc.minSec, tc.maxSec)
			}
			if tc.startLimitIntervalZero && kv["StartLimitIntervalSec"] != "0" {
				t.Errorf("StartLimitIntervalSec=%q, want 0 (restart forever)", kv["StartLimitIntervalSec"])
			}
		})
	}
}

// unitKeys reads a unit file's key=value lines (last one wins).
func unitKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(src), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			kv[k] = v
		}
	}
	return kv
}

// unitSeconds parses a systemd time span of the forms "2", "2s", "1min".
func unitSeconds(t *testing.T, v string) int {
	t.Helper()
	mul := 1
	if n, ok := strings.CutSuffix(v, "min"); ok {
		v, mul = n, 60
	} else if n, ok := strings.CutSuffix(v, "s"); ok {
		v = n
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("time span: %v", err)
	}
	return n * mul
}

// Every alert of the rules has a promtool test case (run by
// TestPrometheusRules): an alert nobody tested could never fire and no
// test would say so.
func TestEveryAlertTested(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("deploy", "prometheus", "hongbao.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("deploy", "prometheus", "hongbao.rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 10 {
		t.Fatalf("found only %d alerts in hongbao.rules.yml", len(alerts))
	}
	for _, a := range alerts {
		if !regexp.MustCompile(`(?m)^\s+alertname: ` + a[1] + `$`).Match(tests) {
			t.Errorf("alert %s has no test case in hongbao.rules.test.yml", a[1])
		}
	}
}
