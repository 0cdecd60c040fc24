package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUnrouted: behind a mux's catch-all, a path served for other methods
// is 405 method_not_allowed naming them in Allow; any other request is 404
// not_found; both are problems, and a routed request never reaches it.
func TestUnrouted(t *testing.T) {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
	mux.HandleFunc("POST /v1/packets", ok)
	mux.HandleFunc("POST /v1/packets/{id}/open", ok)
	mux.HandleFunc("GET /v1/packets/{id}", ok)
	mux.HandleFunc("/", Unrouted(mux))
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"POST", "/v1/packets", http.StatusNoContent, "", ""},
		{"GET", "/v1/packets/7", http.StatusNoContent, "", ""},
		{"HEAD", "/v1/packets/7", http.StatusNoContent, "", ""},
		{"GET", "/v1/packets", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{"PUT", "/v1/packets", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{"DELETE", "/v1/packets/7", http.StatusMethodNotAllowed, "method_not_allowed", "GET, HEAD"},
		{"POST", "/v1/packets/7", http.StatusMethodNotAllowed, "method_not_allowed", "GET, HEAD"},
		{"GET", "/v1/packets/7/open", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{"GET", "/v1/nope", http.StatusNotFound, "not_found", ""},
		{"POST", "/", http.StatusNotFound, "not_found", ""},
		{"GET", "/v1/packets/7/open/more", http.StatusNotFound, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			if got := w.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if tt.code == "" {
				return
			}
			var p struct{ Code string }
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != tt.code {
				t.Errorf("body %q (%v), want problem code %q", w.Body, err, tt.code)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
