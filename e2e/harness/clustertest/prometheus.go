package clustertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// Prometheus is a real Prometheus server (the Debian prometheus package,
// which scripts/dev.sh installs) scraping a test's processes.
type Prometheus struct {
	Addr string // host:port of its HTTP API
	http *http.Client
}

// StartPrometheus starts Prometheus scraping every targets[job] (admin
// listeners' host:port) every interval, with its data in a temporary
// directory, and waits until it is ready. It stops with the test.
func StartPrometheus(t testing.TB, targets map[string][]string, interval time.Duration) *Prometheus {
	t.Helper()
	dbtest.Need(t)
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: make test (scripts/dev.sh deps) installs the prometheus package")
	}
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n", interval, interval)
	for job, ts := range targets {
		quoted := make([]string, len(ts))
		for i, a := range ts {
			quoted[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "  - job_name: %q\n    scrape_timeout: %s\n    static_configs:\n      - targets: [%s]\n", job, interval, strings.Join(quoted, ", "))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{Addr: FreeAddr(t), http: &http.Client{Timeout: 5 * time.Second}}
	StartProcess(t, &Process{Kind: "prometheus", Name: "prometheus", Bin: bin, Args: []string{
		"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + p.Addr,
		"--log.level=warn"}})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := p.http.Get("http://" + p.Addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("clustertest: prometheus not ready on %s after 60s", p.Addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Query evaluates expr now and returns its samples' values by their labels
// (rendered as {k="v",...}; {} for a sum without labels).
func (p *Prometheus) Query(expr string) (map[string]float64, error) {
	resp, err := p.http.Get("http://" + p.Addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("prometheus: %s: %w", expr, err)
	}
	if body.Status != "success" || body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus: %s: %s %s (%s)", expr, body.Status, body.Error, body.Data.ResultType)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus: %s: value %q", expr, s)
		}
		out[labels(r.Metric)] = v
	}
	return out, nil
}

func labels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Value evaluates expr, which must give one sample (a sum), and returns it;
// ok is false when it gives none.
func (p *Prometheus) Value(expr string) (v float64, ok bool, err error) {
	res, err := p.Query(expr)
	if err != nil || len(res) == 0 {
		return 0, false, err
	}
	if len(res) > 1 {
		return 0, false, fmt.Errorf("prometheus: %s: %d samples, want one", expr, len(res))
	}
	for _, v := range res {
		return v, true, nil
	}
	return 0, false, nil
}

// WaitFor polls expr until it gives one sample equal to want, and fails the
// test with the last value after within.
func (p *Prometheus) WaitFor(t testing.TB, expr string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, ok, err := p.Value(expr)
		if err == nil && ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s = %v (present %v, error %v) after %v, want %v", expr, v, ok, err, within, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
