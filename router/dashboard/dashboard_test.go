package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/router/dashboard"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// admin is a fake process's admin listener: the metrics text it serves
// is the test's, and so is its readiness.
type admin struct {
	opens, busy atomic.Int64
	ready       atomic.Bool
	srv         *httptest.Server
}

func newAdmin(t *testing.T, set string) *admin {
	a := &admin{}
	a.ready.Store(true)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			if !a.ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "not ready: draining")
				return
			}
			fmt.Fprintln(w, "ready")
		case "/metrics":
			fmt.Fprintf(w, "# TYPE hongbao_opens_total counter\nhongbao_opens_total{outcome=\"opened\"} %d\nhongbao_opens_total{outcome=\"busy\"} %d\n"+
				"# TYPE hongbao_queue_depth gauge\nhongbao_queue_depth 7\n# TYPE hongbao_queue_live_packets gauge\nhongbao_queue_live_packets 2\n"+
				"# TYPE hongbao_outbox_rows gauge\nhongbao_outbox_rows{set=%q} 12\n# TYPE hongbao_outbox_oldest_age_seconds gauge\nhongbao_outbox_oldest_age_seconds{set=%q} 3.5\n",
				a.opens.Load(), a.busy.Load(), set, set)
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *admin) addr() string { return strings.TrimPrefix(a.srv.URL, "http://") }

// The status of two SETs: the map, each server's readiness and rates
// between two polls a second apart, queue and outbox, archive and verify.
func TestStatus(t *testing.T) {
	sets := []topology.Set{{Name: "a", Servers: []string{"s1"}}, {Name: "b", Servers: []string{"s2"}}}
	m := topology.Spread(1, sets)
	a1, b1 := newAdmin(t, "a"), newAdmin(t, "b")
	b1.ready.Store(false)
	dir := t.TempDir()
	at := time.Unix(1_800_000_000, 0)
	if err := metrics.WriteArchive(filepath.Join(dir, "a.prom"), []metrics.ArchiveRun{{Set: "a", At: at, Archived: 3, Skipped: 1, OK: false,
		Days: []metrics.ArchiveDay{{Date: "2025-04-18", State: "live", Tables: 10}, {Date: "2025-03-03", State: "skipped", Tables: 1}, {Date: "2025-03-03", State: "archived", Tables: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := metrics.WriteVerify(filepath.Join(dir, "v.prom"), true, at, at); err != nil {
		t.Fatal(err)
	}
	now := at
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 },
		Healthy: func(addr string) bool { return addr == "s1" }, Router: prometheus.NewRegistry(),
		Targets: []dashboard.Target{{Set: "a", Kind: "server", Name: "a1", Addr: "s1", Admin: a1.addr()},
			{Set: "b", Kind: "server", Name: "b1", Addr: "s2", Admin: b1.addr()}, {Set: "b", Kind: "settler", Name: "settler b1"}},
		Archive: filepath.Join(dir, "a.prom"), Verify: filepath.Join(dir, "v.prom"), Now: func() time.Time { return now }})
	b.Status(context.Background())
	a1.opens.Add(150)
	a1.busy.Add(50)
	now = now.Add(time.Second)
	st := b.Status(context.Background())

	if len(st.Buckets) != 1000 || st.Sets[0].Buckets != 500 || st.Sets[1].Buckets != 500 {
		t.Errorf("buckets: %d in the map, %d and %d per SET; want 1000, 500, 500", len(st.Buckets), st.Sets[0].Buckets, st.Sets[1].Buckets)
	}
	sa, sb := st.Sets[0], st.Sets[1]
	if sa.OpensPerS != 200 || sa.BusyPerS != 50 || st.OpensPerS != 200 || st.BusyRate != 0.25 {
		t.Errorf("rates: SET a %v opens/s %v busy/s, total %v busy rate %v; want 200, 50, 200, 0.25", sa.OpensPerS, sa.BusyPerS, st.OpensPerS, st.BusyRate)
	}
	if sa.QueueDepth != 7 || sa.OutboxRows != 12 || sa.OutboxLagS != 3.5 || sa.Servers[0].LiveQueues != 2 {
		t.Errorf("SET a: queue %v, outbox %v rows lag %v, live %v; want 7, 12, 3.5, 2", sa.QueueDepth, sa.OutboxRows, sa.OutboxLagS, sa.Servers[0].LiveQueues)
	}
	if p := sa.Servers[0]; *p.Healthy != true || *p.Ready != true {
		t.Errorf("a1: healthy %v ready %v, want both", *p.Healthy, *p.Ready)
	}
	if p := sb.Servers[0]; *p.Healthy || *p.Ready || !strings.Contains(p.Why, "draining") {
		t.Errorf("b1: healthy %v ready %v why %q; want neither, draining", *p.Healthy, *p.Ready, p.Why)
	}
	if p := sb.Settlers[0]; p.Ready != nil || !strings.Contains(p.Why, "no admin address") {
		t.Errorf("settler without an admin address: ready %v why %q", p.Ready, p.Why)
	}
	if len(st.Archive) != 1 || st.Archive[0].Archived != 3 || st.Archive[0].Skipped != 1 || st.Archive[0].OK || !st.Archive[0].LastRun.Equal(at) {
		t.Errorf("archive: %+v", st.Archive)
	}
	if js, err := json.Marshal(st.Archive[0].Days); err != nil || string(js) != `[{"date":"2025-03-03","state":"archived","tables":2},{"date":"2025-03-03","state":"skipped","tables":1},{"date":"2025-04-18","state":"live","tables":10}]` {
		t.Errorf("archive days, by date then state: %s %v", js, err)
	}
	if st.Verify == nil || !st.Verify.OK || !st.Verify.LastRun.Equal(at) {
		t.Errorf("verify: %+v (%s)", st.Verify, st.VerifyNote)
	}
}

// Buckets that changed SET between two versions are listed as moving for
// a minute.
func TestMoving(t *testing.T) {
	m := topology.Spread(1, []topology.Set{{Name: "a"}, {Name: "b"}})
	now := time.Unix(1_800_000_000, 0)
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 501 },
		Now: func() time.Time { return now }})
	if st := b.Status(context.Background()); len(st.Moving) != 0 {
		t.Fatalf("%d moving before any change", len(st.Moving))
	}
	m = topology.Spread(2, []topology.Set{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	for _, tc := range []struct {
		after time.Duration
		want  int
	}{{time.Second, 499}, {30 * time.Second, 499}, {62 * time.Second, 0}} {
		now = time.Unix(1_800_000_000, 0).Add(tc.after)
		if st := b.Status(context.Background()); len(st.Moving) != tc.want || st.Moves != 501 {
			t.Errorf("%v after the change: %d moving (%d moves), want %d", tc.after, len(st.Moving), st.Moves, tc.want)
		}
	}
}

// The page and its JSON are on the admin handler; everything else is the
// admin listener's own.
func TestHandler(t *testing.T) {
	m := topology.Spread(1, []topology.Set{{Name: "a"}})
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 }})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("admin")) })
	h := b.Handler(next)
	for _, tc := range []struct{ path, want string }{
		{"/dashboard", "<title>hongbao · operator dashboard</title>"},
		{"/dashboard/app/dashboard.js", "/dashboard/status"},
		{"/metrics", "admin"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("GET %s: %d, want 200 with %q", tc.path, rec.Code, tc.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard/status", nil))
	var st dashboard.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || len(st.Sets) != 1 || st.Sets[0].Buckets != 1000 {
		t.Errorf("GET /dashboard/status: %v %s", err, rec.Body.String()[:min(200, rec.Body.Len())])
	}
}
