package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/metrics"
)

// TestWrapFlushes: a handler under the request metrics can flush a
// streamed answer.
func TestWrapFlushes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("part"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush under the metrics: %v", err)
		}
	})
	rec := httptest.NewRecorder()
	metrics.NewHTTP(prometheus.NewRegistry()).Wrap(mux).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if !rec.Flushed {
		t.Fatal("the answer was not flushed")
	}
}
