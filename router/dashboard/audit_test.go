package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hongbao-dev/hongbao/router/dashboard"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// auditBoard is a board over one SET whose audit answers what the test
// feeds it, one call at a time.
func auditBoard(t *testing.T, audit func(context.Context) ([]string, error)) *httptest.Server {
	t.Helper()
	m := topology.Spread(1, []topology.Set{{Name: "a", Servers: []string{"s1"}}})
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 },
		Healthy: func(string) bool { return true }, Audit: audit})
	srv := httptest.NewServer(b.Handler(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/dashboard/audit", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func status(t *testing.T, url string) dashboard.Status {
	t.Helper()
	resp, err := http.Get(url + "/dashboard/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dashboard.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// POST /dashboard/audit runs the money audit in process and answers its
// result, which the status then shows: its violations (the first 20 of
// them, all counted), an error, and when it last passed. A second request
// while one runs is a 409 and runs nothing.
func TestAuditOnRequest(t *testing.T) {
	type result struct {
		bad []string
		err error
	}
	feed, started := make(chan result), make(chan struct{}, 4)
	srv := auditBoard(t, func(ctx context.Context) ([]string, error) {
		started <- struct{}{}
		r := <-feed
		return r.bad, r.err
	})
	if st := status(t, srv.URL); st.Audit != nil {
		t.Fatalf("audit before any ran: %+v", st.Audit)
	}

	var many []string
	for i := range 25 {
		many = append(many, "violation "+strings.Repeat("x", i))
	}
	tests := []struct {
		name   string
		give   result
		ok     bool
		count  int
		shown  int
		err    string
		lastOK bool
	}{
		{"clean", result{}, true, 0, 0, "", true},
		{"violations", result{bad: many}, false, 25, 20, "", true},
		{"failed", result{err: errors.New("SET a: connection refused")}, false, 0, 0, "SET a: connection refused", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type answer struct {
				code int
				body map[string]any
			}
			done := make(chan answer)
			go func() { c, b := post(t, srv.URL); done <- answer{c, b} }()
			<-started
			if st := status(t, srv.URL); st.Audit == nil || !st.Audit.Running {
				t.Errorf("while it runs, the status says %+v", st.Audit)
			}
			if code, body := post(t, srv.URL); code != http.StatusConflict || body["code"] != "audit_running" {
				t.Errorf("a second audit while one runs: %d %v, want 409 audit_running", code, body)
			}
			feed <- tt.give
			a := <-done
			if a.code != http.StatusOK {
				t.Fatalf("POST /dashboard/audit: %d %v", a.code, a.body)
			}
			st := status(t, srv.URL).Audit
			if st == nil || st.Running || st.OK != tt.ok || st.Count != tt.count || len(st.Violations) != tt.shown ||
				st.Error != tt.err || st.LastOK.IsZero() != !tt.lastOK || time.Since(st.At) > time.Minute {
				t.Errorf("status after the audit: %+v", st)
			}
			if a.body["ok"] != tt.ok {
				t.Errorf("answer %v, want ok %v", a.body, tt.ok)
			}
		})
	}
	select {
	case <-started:
		t.Error("an audit ran for the refused request")
	default:
	}
}

// Without an audit configured the endpoint is a 404 audit_off and the
// status has none.
func TestAuditOff(t *testing.T) {
	srv := auditBoard(t, nil)
	if code, body := post(t, srv.URL); code != http.StatusNotFound || body["code"] != "audit_off" {
		t.Errorf("POST /dashboard/audit without an audit: %d %v", code, body)
	}
	if st := status(t, srv.URL); st.Audit != nil {
		t.Errorf("status: %+v", st.Audit)
	}
}

// AuditEvery runs the audit at once and then every period, until its
// context ends.
func TestAuditEvery(t *testing.T) {
	runs := make(chan struct{}, 16)
	m := topology.Spread(1, []topology.Set{{Name: "a", Servers: []string{"s1"}}})
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 },
		Healthy: func(string) bool { return true }, Audit: func(context.Context) ([]string, error) { runs <- struct{}{}; return nil, nil }})
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { b.AuditEvery(ctx, 20*time.Millisecond); close(stopped) }()
	for range 3 {
		select {
		case <-runs:
		case <-time.After(5 * time.Second):
			t.Fatal("the audit did not run every period")
		}
	}
	cancel()
	<-stopped
	if a := b.LastAudit(); a == nil || !a.OK {
		t.Errorf("last audit %+v", a)
	}
	reg := prometheus.NewRegistry()
	b.Register(reg)
	want := "# HELP hongbao_audit_ok 1 when the last money audit run in this process passed, 0 when it found violations or failed, -1 before the first.\n# TYPE hongbao_audit_ok gauge\nhongbao_audit_ok 1\n" +
		"# HELP hongbao_audit_violations Violations the last money audit run in this process found.\n# TYPE hongbao_audit_violations gauge\nhongbao_audit_violations 0\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hongbao_audit_ok", "hongbao_audit_violations"); err != nil {
		t.Error(err)
	}
}

// While the first audit runs, the status's audit has no "at" (the page
// shows "running", not a result of zero violations).
func TestAuditRunningHasNoTime(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	srv := auditBoard(t, func(ctx context.Context) ([]string, error) { close(started); <-release; return nil, nil })
	done := make(chan struct{})
	go func() { defer close(done); post(t, srv.URL) }()
	<-started
	resp, err := http.Get(srv.URL + "/dashboard/status")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Audit map[string]any `json:"audit"`
	}
	err = json.NewDecoder(resp.Body).Decode(&raw)
	resp.Body.Close()
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if _, has := raw.Audit["at"]; has || raw.Audit["running"] != true {
		t.Errorf("status while the first audit runs: %v, want running and no at", raw.Audit)
	}
}
