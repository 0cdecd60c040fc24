package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
	"github.com/hongbao-dev/hongbao/metrics"
)

// A real Prometheus scrapes the cluster's admin listeners while the test
// makes a load whose answers it counts, and finds in the metrics exactly
// what the load says: opens by outcome, the router's requests by route and
// code, the queue depth while a transaction is held, the outbox growing
// with no settler and emptying when the settlers start, the credits they
// deliver. Every answer of the router is checked against openapi.json.
func TestClusterPrometheusSeesTheLoad(t *testing.T) {
	c := packettest.Start(t) // no settlers: credits wait in the outboxes
	spec, err := api.ParseSpec()
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string][]string{}
	for _, p := range c.Processes() {
		targets["hongbao-"+p.Kind] = append(targets["hongbao-"+p.Kind], p.Admin)
	}
	settlers := map[string]string{} // SET -> admin address, started later
	for _, s := range c.Sets {
		settlers[s.Name] = clustertest.FreeAddr(t)
		targets["hongbao-settler"] = append(targets["hongbao-settler"], settlers[s.Name])
	}
	prom := clustertest.StartPrometheus(t, targets, 500*time.Millisecond)
	servers := float64(len(targets["hongbao-server"]))
	prom.WaitFor(t, `sum(up{job=~"hongbao-router|hongbao-server"} == 1)`, servers+1, 30*time.Second)
	prom.WaitFor(t, `sum(hongbao_ready{job=~"hongbao-router|hongbao-server"})`, servers+1, 30*time.Second)
	prom.WaitFor(t, `min(hongbao_router_healthy_servers)`, 2, 10*time.Second)
	prom.WaitFor(t, `sum(hongbao_opens_total)`, 0, 10*time.Second)
	checkAdmin(t, c)

	got := openLoad(t, c, spec, 10, 5, 8) // 10 packets of 5 shares, 8 openers each, then one repeat each
	if got["opened"] != 50 || got["sold_out"] != 30 || got["already_opened"] != 10 {
		t.Fatalf("load answered %v, want 50 opened, 30 sold_out, 10 already_opened", got)
	}
	for outcome, n := range got {
		prom.WaitFor(t, `sum(hongbao_opens_total{outcome="`+outcome+`"})`, float64(n), 10*time.Second)
	}
	prom.WaitFor(t, `sum(hongbao_opens_total{outcome=~"busy|expired|error|rejected"})`, 0, time.Second)
	open := `job="hongbao-router",route="POST /v1/packets/{id}/open"`
	prom.WaitFor(t, `sum(hongbao_http_requests_total{`+open+`,code="200"})`, 60, 10*time.Second)
	prom.WaitFor(t, `sum(hongbao_http_requests_total{`+open+`,code="409"})`, 30, 10*time.Second)
	prom.WaitFor(t, `sum(hongbao_http_request_duration_seconds_count{`+open+`})`, 90, 10*time.Second)
	// The servers count every open too, coalesced into batches or not.
	serverOpen := `job="hongbao-server",route="POST /v1/packets/{id}/open"`
	prom.WaitFor(t, `sum(hongbao_http_requests_total{`+serverOpen+`,code="200"})`, 60, 10*time.Second)
	prom.WaitFor(t, `sum(hongbao_http_requests_total{`+serverOpen+`,code="409"})`, 30, 10*time.Second)
	prom.WaitFor(t, `sum(max by (set) (hongbao_outbox_rows))`, 50, 10*time.Second)
	if age, _, err := prom.Value(`max(hongbao_outbox_oldest_age_seconds)`); err != nil || age <= 0 {
		t.Errorf("outbox oldest age %v (%v) with 50 credits waiting, want > 0", age, err)
	}

	held := queueWhileLocked(t, c, prom, 6)
	prom.WaitFor(t, `sum(hongbao_opens_total{outcome="opened"})`, float64(50+held), 10*time.Second)
	prom.WaitFor(t, `sum(max by (set) (hongbao_outbox_rows))`, float64(50+held), 10*time.Second)

	for _, s := range c.Sets {
		clustertest.StartProcess(t, &clustertest.Process{Kind: clustertest.Settler, Name: s.Name, Bin: clustertest.Binary(t, "hbsettler"),
			Admin: settlers[s.Name], Args: []string{"-config", c.Config, "-set", s.Name, "-admin", settlers[s.Name]}})
	}
	prom.WaitFor(t, `sum(up{job="hongbao-settler"} == 1)`, float64(len(c.Sets)), 30*time.Second)
	prom.WaitFor(t, `sum(hongbao_settle_delivered_total{kind="credit"})`, float64(50+held), 30*time.Second)
	prom.WaitFor(t, `sum(max by (set) (hongbao_outbox_rows))`, 0, 10*time.Second)
	prom.WaitFor(t, `max(hongbao_outbox_oldest_age_seconds)`, 0, 10*time.Second)
	prom.WaitFor(t, `count(hongbao_settle_last_round_timestamp_seconds > time() - 10)`, float64(len(c.Sets)), 10*time.Second)
	prom.WaitFor(t, `count(count by (instance) (hongbao_topology_version >= 1))`, servers+1, 5*time.Second)
	badRequests(t, c, spec)
	verifyTextfile(t, c)
}

// verifyTextfile runs hbctl verify --textfile on the quiet cluster: every
// invariant holds, so the file says hongbao_verify_ok 1 with the time.
func verifyTextfile(t *testing.T, c *packettest.Cluster) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hbverify.prom")
	before := time.Now().Unix()
	if out, err := c.Ctl("verify", "--textfile", path); err != nil || !strings.Contains(out, "OK: every invariant holds") {
		t.Fatalf("hbctl verify --textfile: %v\n%s", err, out)
	}
	lines, err := metrics.ReadTextfile(path)
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := metrics.Sample(lines, "hongbao_verify_ok")
	last, _ := metrics.Sample(lines, "hongbao_verify_last_success_timestamp_seconds")
	if ok != 1 || int64(last) < before {
		t.Errorf("verify textfile: ok %v, last success %v (want 1, >= %d):\n%s", ok, last, before, strings.Join(lines, "\n"))
	}
}

// openLoad sends packets packets of shares shares (1 fen each), has openers
// users open each at once, then one who got a share again, and counts the
// answers by status; every answer must agree with the spec.
func openLoad(t *testing.T, c *packettest.Cluster, spec *api.Spec, packets, shares, openers int) map[string]int {
	t.Helper()
	sender := c.RichUser(t)
	got := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range packets {
		id := c.MustSend(t, sender, packettest.SendBody{Total: int64(shares), Count: shares, Type: "fixed"}, "")
		users := make([]hongbao.UserID, openers)
		for i := range users {
			users[i] = dbtest.FreshUser()
		}
		var winner hongbao.UserID
		for _, u := range users {
			wg.Go(func() {
				r := c.Open(u, id)
				mu.Lock()
				defer mu.Unlock()
				o := outcomeOf(t, spec, "POST", "/v1/packets/"+id.String()+"/open", r)
				got[o]++
				if o == hongbao.Opened {
					winner = u
				}
			})
		}
		wg.Wait()
		r := c.Open(winner, id) // a user with a share, again
		got[outcomeOf(t, spec, "POST", "/v1/packets/"+id.String()+"/open", r)]++
	}
	return got
}

// outcomeOf checks an answer against the spec and names it: the open's
// status for 200, else its problem code.
func outcomeOf(t *testing.T, spec *api.Spec, method, path string, r clustertest.Reply) string {
	t.Helper()
	if r.Err != nil {
		t.Errorf("%s %s: %v", method, path, r.Err)
		return "transport"
	}
	if err := spec.Check(method, path, r.Status, r.Str("code")); err != nil {
		t.Errorf("answer %v: %v", r, err)
	}
	if r.Status == http.StatusOK {
		return r.Str("status")
	}
	return r.Str("code")
}

// queueWhileLocked holds the row lock of a fresh packet in its SET's MySQL
// (a stuck transaction) while n users open it: all n wait in its queue, and
// Prometheus must see hongbao_queue_depth at n; once the lock goes they
// are answered and the depth returns to 0. It returns how many opened.
func queueWhileLocked(t *testing.T, c *packettest.Cluster, prom *clustertest.Prometheus, n int) int {
	t.Helper()
	id := c.MustSend(t, c.RichUser(t), packettest.SendBody{Total: 100, Count: 10, Type: "fixed"}, "")
	set, err := c.SetOf(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := c.DB(set).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT id FROM %s WHERE id = ? FOR UPDATE", id.Table(c.Loc).Packets()), int64(id)); err != nil {
		t.Fatal(err)
	}
	answers := make(chan clustertest.Reply, n)
	for range n {
		go func() { answers <- c.Open(dbtest.FreshUser(), id) }()
	}
	// The open transaction times out after queue.tx_timeout (5 s): the
	// depth must show before that.
	prom.WaitFor(t, `sum(hongbao_queue_depth)`, float64(n), 4*time.Second)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	opened := 0
	for range n {
		if r := <-answers; r.Status == http.StatusOK && r.Str("status") == hongbao.Opened {
			opened++
		} else {
			t.Errorf("open of the locked packet after the lock went: %v", r)
		}
	}
	prom.WaitFor(t, `sum(hongbao_queue_depth)`, 0, 5*time.Second)
	return opened
}

// checkAdmin asks every process's admin listener for its health and
// profiles, and makes sure the public port serves neither.
func checkAdmin(t *testing.T, c *packettest.Cluster) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) (int, string) {
		resp, err := hc.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return 0, ""
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Content-Type")
	}
	for _, p := range c.Processes() {
		for _, path := range []string{"/livez", "/readyz", "/metrics", "/debug/pprof/", "/debug/pprof/heap?debug=1"} {
			if st, _ := get("http://" + p.Admin + path); st != http.StatusOK {
				t.Errorf("%s %s admin %s: %d, want 200", p.Kind, p.Name, path, st)
			}
		}
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/livez"} {
		if st, ct := get(c.URL() + path); st != http.StatusNotFound || ct != "application/problem+json" {
			t.Errorf("router public port %s: %d %s, want 404 problem (admin endpoints stay off the public port)", path, st, ct)
		}
	}
}

// badRequests makes the answers of bad input and checks each status and
// code against the spec and against what the handlers must answer.
func badRequests(t *testing.T, c *packettest.Cluster, spec *api.Spec) {
	t.Helper()
	user := c.RichUser(t)
	tests := []struct {
		method, path string
		user         hongbao.UserID
		body         string
		status       int
		code         string
	}{
		{"POST", "/v1/packets", user, `{"total":1.5,"count":1}`, 400, "invalid_total"},
		{"POST", "/v1/packets", user, `nope`, 400, "malformed_json"},
		{"POST", "/v1/packets", user, `{"total":100,"count":1,"x":1}`, 400, "unknown_field"},
		{"POST", "/v1/packets", 0, `{"total":100,"count":1}`, 401, "unauthorized"},
		{"POST", "/v1/packets/abc/open", user, "", 400, "invalid_id"},
		{"GET", "/v1/packets/42", user, "", 404, "not_found"},
		{"GET", "/v1/me/received?limit=0", user, "", 400, "invalid_limit"},
		{"GET", "/v1/nothing", user, "", 404, "not_found"},
		{"GET", "/v1/me/wallet", user, "", 200, ""},
		{"GET", "/openapi.json", 0, "", 200, ""},
	}
	for _, tt := range tests {
		var body []byte
		if tt.body != "" {
			body = []byte(tt.body)
		}
		r := c.Call(tt.method, tt.path, tt.user, body, nil)
		if r.Status != tt.status || r.Str("code") != tt.code {
			t.Errorf("%s %s: %v, want %d %q", tt.method, tt.path, r, tt.status, tt.code)
		}
		if err := spec.Check(tt.method, tt.path, r.Status, r.Str("code")); err != nil {
			t.Errorf("%s %s: %v", tt.method, tt.path, err)
		}
	}
}
