package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/metrics"
)

// benchMux is a mux like the API's: a pattern with a wildcard, answering
// 200 with a small body.
func benchMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/packets/{id}/open", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"status":"opened","amount":1}`))
	})
	return mux
}

// BenchmarkHTTP measures one request through the mux without and with the
// request metrics: the difference is their cost per request.
func BenchmarkHTTP(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    *metrics.HTTP
	}{{"off", nil}, {"on", metrics.NewHTTP(prometheus.NewRegistry())}} {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h.Wrap(benchMux())
			req := httptest.NewRequest("POST", "/v1/packets/123456789/open", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				w.Body.Reset()
				h.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkHTTPParallel is BenchmarkHTTP from every core at once, where
// the route table's lock and the counters are shared.
func BenchmarkHTTPParallel(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    *metrics.HTTP
	}{{"off", nil}, {"on", metrics.NewHTTP(prometheus.NewRegistry())}} {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h.Wrap(benchMux())
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest("POST", "/v1/packets/123456789/open", nil)
				w := httptest.NewRecorder()
				for pb.Next() {
					w.Body.Reset()
					h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// BenchmarkOpensCount is the cost of counting one open's outcome.
func BenchmarkOpensCount(b *testing.B) {
	o := metrics.NewOpens(prometheus.NewRegistry())
	b.ReportAllocs()
	for b.Loop() {
		o.Count(metrics.OutcomeOpened)
	}
}
