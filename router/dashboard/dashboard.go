// Package dashboard is the operators' live view of a cluster, served on
// the router's admin listener (never the public port): GET /dashboard is
// the page, GET /dashboard/status the JSON it polls every second (collected when asked). The
// status comes from what the CLI and Prometheus read: the topology the
// router follows, its health probes, every process's admin /metrics and
// /readyz (scraped at most once a second), the archiver's textfile, the money
// audit run in process (store/audit, on request and every
// dashboard.audit_every) beside the last hbctl verify's textfile, and the newest rebalance of the journal in the
// meta DB the topology comes from (read once per collect, within 700 ms).
package dashboard

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/set/topology"
)

//go:embed static
var static embed.FS

// Target is a process whose admin listener the dashboard scrapes.
type Target struct {
	Set   string // its SET
	Kind  string // "server" or "settler"
	Name  string // for people: "a1", "settler a"
	Addr  string // a server's public address (the router's health view); "" for a settler
	Admin string // host:port of its admin listener; "" when unknown (no scrape)
}

// Deps are what the dashboard reads.
type Deps struct {
	Topology func() *topology.Map   // the map the router routes with
	Moves    func() int64           // buckets the router saw move since it started
	Healthy  func(addr string) bool // the router's view of a server
	Router   prometheus.Gatherer    // the router's own metrics (its opens when no server is scraped)
	Targets  []Target               // the admin listeners to scrape
	Archive  string                 // archive.textfile; "" for none
	Verify   string                 // the verify textfile; "" for none
	Client   *http.Client           // for the scrapes
	Meta     *sql.DB                // the meta DB the topology comes from: the rebalance journal (nil: not shown)
	// Audit runs the money audit in process (store/audit, as hbctl verify
	// does) and returns its violations; nil: none is run here, only the
	// verify textfile is shown.
	Audit func(ctx context.Context) ([]string, error)
	Now   func() time.Time
}

// Board collects the status when asked, at most once a second.
type Board struct {
	d     Deps
	mu    sync.Mutex // held while collecting: it guards the fields below
	last  *Status
	work  sync.Mutex        // one collect at a time: it owns the fields below
	prev  map[string]sample // each target's counters at the previous poll
	moved map[int]time.Time // buckets seen changing SET, and when
	seen  *topology.Map
	// journal is the rebalance journal, made at the first collect that
	// reaches the meta DB.
	journal *topology.Journal

	auditing sync.Mutex // held while an audit runs (TryLock: one at a time)
	amu      sync.Mutex // guards audit
	audit    *Audit
}

// New returns a Board.
func New(d Deps) *Board {
	if d.Client == nil {
		d.Client = &http.Client{Timeout: 800 * time.Millisecond}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Board{d: d, prev: map[string]sample{}, moved: map[int]time.Time{}}
}

// Status returns the status, collected afresh when the last is older than
// a second: the dashboard costs nothing while nobody looks at it, and two
// operators polling share the scrapes.
func (b *Board) Status(ctx context.Context) *Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil || b.d.Now().Sub(b.last.At) >= 900*time.Millisecond {
		b.last = b.collect(ctx)
	}
	st := *b.last
	st.Audit = b.LastAudit() // as of now: an audit's end shows at once
	return &st
}

// Handler serves GET /dashboard, GET /dashboard/status and POST
// /dashboard/audit (the money audit, now); other paths go
// to next (the admin listener's own mux).
func (b *Board) Handler(next http.Handler) http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, files, "dashboard.html")
	})
	mux.Handle("GET /dashboard/app/", http.StripPrefix("/dashboard/app/", http.FileServerFS(files)))
	mux.HandleFunc("POST /dashboard/audit", b.serveAudit)
	mux.HandleFunc("GET /dashboard/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(b.Status(r.Context())) // the client went away
	})
	return mux
}
