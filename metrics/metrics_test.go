package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hongbao-dev/hongbao/metrics"
)

// Requests are counted by the pattern that matched, never by the path (no
// packet IDs in labels), and by status.
func TestHTTPCountsByPattern(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := metrics.NewHTTP(reg).Wrap(benchMux())
	for _, path := range []string{"/v1/packets/1/open", "/v1/packets/2/open", "/v1/packets/3/open"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", path, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nowhere", nil))
	want := `
# HELP hongbao_http_requests_total HTTP requests answered, by route pattern and status code.
# TYPE hongbao_http_requests_total counter
hongbao_http_requests_total{code="200",route="POST /v1/packets/{id}/open"} 3
hongbao_http_requests_total{code="404",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hongbao_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "hongbao_http_request_duration_seconds"); n != 2 {
		t.Errorf("%d latency histograms, want 2 (one per route)", n)
	}
}

// Every outcome is exported from the start (at zero), so rates and alerts
// see the series before the first busy answer.
func TestOpensStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := metrics.NewOpens(reg)
	o.Count(metrics.OutcomeOpened)
	o.Count(metrics.OutcomeBusy)
	o.Count("something else")
	if n := testutil.CollectAndCount(reg, "hongbao_opens_total"); n != 7 {
		t.Errorf("%d outcome series, want 7", n)
	}
	want := map[string]float64{"opened": 1, "busy": 1, "error": 1, "sold_out": 0}
	mfs, _ := reg.Gather()
	for _, m := range mfs[0].GetMetric() {
		outcome := m.GetLabel()[0].GetValue()
		if w, ok := want[outcome]; ok && m.GetCounter().GetValue() != w {
			t.Errorf("outcome %s: %v, want %v", outcome, m.GetCounter().GetValue(), w)
		}
	}
}

// The structs do nothing on a nil receiver: packages used without metrics
// need no stubs.
func TestNilIsOff(t *testing.T) {
	var (
		o *metrics.Opens
		q *metrics.Queue
		s *metrics.Store
		c *metrics.Cache
		d *metrics.Settle
		h *metrics.HTTP
	)
	o.Count(metrics.OutcomeOpened)
	q.Tx(1, time.Millisecond)
	q.Batch(1)
	q.SlotRefused()
	q.SlotFallback()
	q.Split()
	s.Deadlock()
	s.Stale()
	s.Fence()
	c.Error()
	c.Fallback()
	d.Delivered("open")
	d.Closed(1)
	d.Swept(1)
	d.Round(nil, time.Now())
	mux := http.NewServeMux()
	if h.Wrap(mux) != http.Handler(mux) {
		t.Error("a nil HTTP wraps the mux")
	}
}

func TestOutboxReadAtScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows, oldest, fail := 7, now.Add(-90*time.Second), error(nil)
	metrics.RegisterOutbox(reg, "a", func(context.Context) (int, time.Time, error) { return rows, oldest, fail }, func() time.Time { return now })
	want := `
# HELP hongbao_outbox_oldest_age_seconds Age of the oldest undelivered outbox entry (0 when empty): how far the settler lags.
# TYPE hongbao_outbox_oldest_age_seconds gauge
hongbao_outbox_oldest_age_seconds{set="a"} 90
# HELP hongbao_outbox_rows Entries in the SET's outbox waiting for delivery to the wallet.
# TYPE hongbao_outbox_rows gauge
hongbao_outbox_rows{set="a"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	rows, oldest = 0, time.Time{}
	empty := strings.ReplaceAll(strings.ReplaceAll(want, `{set="a"} 90`, `{set="a"} 0`), `{set="a"} 7`, `{set="a"} 0`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(empty)); err != nil {
		t.Errorf("empty outbox: %v", err)
	}
	fail = errors.New("mysql down")
	if _, err := reg.Gather(); err == nil {
		t.Error("a scrape that cannot read the outbox reports no error")
	}
}

func TestTextfiles(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1_800_000_000, 0)
	arch := filepath.Join(dir, "sub", "hbarchive.prom")
	if err := metrics.WriteArchive(arch, []metrics.ArchiveRun{{Set: "a", At: at, Pending: 1, Archived: 2, Skipped: 3, OK: true}}); err != nil {
		t.Fatal(err)
	}
	lines, err := metrics.ReadTextfile(arch)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`hongbao_archive_days{set="a",state="pending"} 1`, `hongbao_archive_days{set="a",state="archived"} 2`,
		`hongbao_archive_days{set="a",state="skipped"} 3`, `hongbao_archive_last_run_timestamp_seconds{set="a"} 1.8e+09`,
		`hongbao_archive_last_run_success{set="a"} 1`} {
		if !contains(lines, want) {
			t.Errorf("archive textfile lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	ver := filepath.Join(dir, "verify.prom")
	if err := metrics.WriteVerify(ver, false, at, at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	lines, _ = metrics.ReadTextfile(ver)
	if v, ok := metrics.Sample(lines, "hongbao_verify_ok"); !ok || v != 0 {
		t.Errorf("hongbao_verify_ok %v %v, want 0", v, ok)
	}
	if v, ok := metrics.Sample(lines, "hongbao_verify_last_success_timestamp_seconds"); !ok || v != float64(at.Add(-time.Hour).Unix()) {
		t.Errorf("last success %v %v, want %d", v, ok, at.Add(-time.Hour).Unix())
	}
}

// TestRecordVerify: a verify that passed records its time as the last
// success; one that failed keeps the previous file's last success, and
// records none when there was no file.
func TestRecordVerify(t *testing.T) {
	at := time.Unix(1_750_000_000, 0)
	lastSuccess := func(path string) (float64, bool) {
		lines, err := metrics.ReadTextfile(path)
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Sample(lines, "hongbao_verify_last_success_timestamp_seconds")
	}
	fresh := filepath.Join(t.TempDir(), "verify.prom")
	if err := metrics.RecordVerify(fresh, false, at); err != nil {
		t.Fatal(err)
	}
	if v, ok := lastSuccess(fresh); ok {
		t.Errorf("a first verify that failed records a last success %v", v)
	}
	path := filepath.Join(t.TempDir(), "verify.prom")
	for i, ok := range []bool{true, false, false} {
		if err := metrics.RecordVerify(path, ok, at.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if v, found := lastSuccess(path); !found || v != float64(at.Unix()) {
			t.Errorf("run %d (ok %v): last success %v %v, want the first run's %d", i, ok, v, found, at.Unix())
		}
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
