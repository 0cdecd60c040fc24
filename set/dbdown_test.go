package set_test

import (
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestMySQLDownIsUnavailable: while the SET's MySQL cannot be reached,
// every request that needs it is answered 503 unavailable with
// Retry-After (the router tries another server, the client later), never
// 500: the outage is a dependency's, not a fault of the request or a bug.
func TestMySQLDownIsUnavailable(t *testing.T) {
	t.Parallel()
	down, err := sqldb.Open("hongbao:hongbao@tcp(127.0.0.1:1)/?timeout=500ms", 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	h := newHarness(t, harnessOpts{StoreDB: down})
	id, err := hongbao.NewPacketID(time.Now(), 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	user := dbtest.FreshUser()
	for _, tt := range []struct {
		name string
		r    reply
	}{
		{"send", h.send(user, map[string]any{"total": 100, "count": 2, "type": "random"}, "")},
		{"open", h.open(user, id.String())},
		{"grab", h.grab(user, id.String())},
		{"detail", h.detail(user, id.String())},
	} {
		if !tt.r.IsProblem(http.StatusServiceUnavailable, "unavailable") || tt.r.Header.Get("Retry-After") == "" {
			t.Errorf("%s with MySQL down: %v (Retry-After %q), want 503 unavailable with Retry-After", tt.name, tt.r, tt.r.Header.Get("Retry-After"))
		}
	}
}
