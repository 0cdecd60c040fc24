package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
)

// TestLoggedFlushes: a handler under Logged can flush a streamed answer
// (http.ResponseController finds the connection's writer underneath).
func TestLoggedFlushes(t *testing.T) {
	h := Logged(zap.NewNop(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("part"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush under Logged: %v", err)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if !rec.Flushed {
		t.Fatal("the answer was not flushed")
	}
}
