package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts a public API's requests by route (the mux pattern that
// matched, never the path, so packet IDs stay out of the labels) and
// status code, with a latency histogram per route.
type HTTP struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	// routes is replaced, never changed, when a route is first seen:
	// requests read it without a lock.
	routes  atomic.Pointer[map[string]*route]
	mu      sync.Mutex // serialises replacing routes
	writers sync.Pool  // *StatusWriter, so a request allocates none
}

// route holds one route's collectors, resolved once: the request path
// only reads them.
type route struct {
	seconds prometheus.Observer
	codes   [600]atomic.Pointer[prometheus.Counter] // by status code
}

// NewHTTP registers the request metrics.
func NewHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_http_requests_total", Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hongbao_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route pattern.",
			Buckets: latencyBuckets(),
		}, []string{"route"}),
	}
	h.routes.Store(&map[string]*route{})
	h.writers.New = func() any { return new(StatusWriter) }
	reg.MustRegister(h.requests, h.seconds)
	return h
}

// Wrap measures the requests mux answers. It must wrap the ServeMux itself
// (inside any middleware that replaces the request), since the mux records
// the matched pattern in the request it is given. A nil HTTP returns mux.
func (h *HTTP) Wrap(mux http.Handler) http.Handler {
	if h == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := h.writers.Get().(*StatusWriter)
		sw.ResponseWriter, sw.Status = w, http.StatusOK
		mux.ServeHTTP(sw, r)
		h.observe(r.Pattern, sw.Status, time.Since(start))
		sw.ResponseWriter = nil
		h.writers.Put(sw)
	})
}

func (h *HTTP) observe(pattern string, status int, took time.Duration) {
	if pattern == "" {
		pattern = "unmatched"
	}
	rt := h.route(pattern)
	rt.seconds.Observe(took.Seconds())
	if status < 0 || status >= len(rt.codes) {
		status = 0
	}
	c := rt.codes[status].Load()
	if c == nil {
		cnt := h.requests.WithLabelValues(pattern, strconv.Itoa(status))
		rt.codes[status].CompareAndSwap(nil, &cnt)
		c = rt.codes[status].Load()
	}
	(*c).Inc()
}

func (h *HTTP) route(pattern string) *route {
	if rt := (*h.routes.Load())[pattern]; rt != nil {
		return rt
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.routes.Load()
	if rt := old[pattern]; rt != nil {
		return rt
	}
	rt := &route{seconds: h.seconds.WithLabelValues(pattern)}
	routes := make(map[string]*route, len(old)+1)
	maps.Copy(routes, old)
	routes[pattern] = rt
	h.routes.Store(&routes)
	return rt
}

// StatusWriter is a ResponseWriter that remembers the status code a
// handler answered (Status: set it to 200 before, which a handler that
// never calls WriteHeader answers), for a request's metrics here and its
// log line (api.Logged).
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records code and writes it.
func (w *StatusWriter) WriteHeader(code int) {
	w.Status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath (to flush a
// streamed answer).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
