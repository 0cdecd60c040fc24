package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestHealthProbesServersAddedLater: Run asks for the server list every
// round, so the servers of a SET added to the topology after the router
// started are probed too: one that does not answer is marked down, one
// that answers stays up, and one that went down comes back up.
func TestHealthProbesServersAddedLater(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.Write([]byte("ready\n"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(up.Close)
	upAddr := strings.TrimPrefix(up.URL, "http://")
	deadAddr := "127.0.0.1:" + strconv.Itoa(dbtest.FreePort(t)) // nothing listens there
	var list atomic.Pointer[[]string]
	list.Store(&[]string{})
	h := NewHealth(&http.Client{Timeout: time.Second}, 20*time.Millisecond, zap.NewNop())
	h.MarkDown(upAddr) // seen failing once, before its SET was added
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx, func() []string { return *list.Load() })

	time.Sleep(60 * time.Millisecond) // rounds with no server
	if h.Healthy(upAddr) || !h.Healthy(deadAddr) {
		t.Fatalf("before the SET is added: up %v, dead %v; want the marks as left (false, true)", h.Healthy(upAddr), h.Healthy(deadAddr))
	}
	list.Store(&[]string{upAddr, deadAddr}) // a new SET's servers appear
	deadline := time.Now().Add(5 * time.Second)
	for h.Healthy(deadAddr) || !h.Healthy(upAddr) {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the SET was added: up %v, dead %v; want true, false", h.Healthy(upAddr), h.Healthy(deadAddr))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
