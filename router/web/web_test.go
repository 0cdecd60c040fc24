package web_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/router/web"
)

func TestHandler(t *testing.T) {
	h := web.Handler()
	for _, tc := range []struct {
		path      string
		status    int
		typ, want string
	}{
		{"/", 200, "text/html", `<script src="/app/app.js" defer></script>`},
		{"/app/app.js", 200, "text/javascript", "function parseYuan"},
		{"/app/app.css", 200, "text/css", "--red"},
		{"/app/nothing.js", 404, "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.typ) || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("GET %s: %d %s, want %d %s with %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.status, tc.typ, tc.want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
}
