//go:build !race

// What the Go scheduler does with a batch's runners: the race detector
// yields at random in every goroutine, which gives the answers of a
// batch few writes with or without the yield under test. make test runs
// this file without -race (scripts/dev.sh test).

package set_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// countingWriter counts the writes of a response.
type countingWriter struct {
	http.ResponseWriter
	writes *atomic.Int32
}

func (c countingWriter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the Flusher.
func (c countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// TestBatchWritesPerTransaction: the answers of a batch's opens that
// commit together go out in one write, not a write per answer (each a
// system call and a wake-up of the router's reader), on one P as the
// dev cluster runs its processes.
func TestBatchWritesPerTransaction(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h := newHarness(t, harnessOpts{})
	var writes atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.server.Handler().ServeHTTP(countingWriter{w, &writes}, r)
	}))
	t.Cleanup(hs.Close)
	id := h.mustSend(t, dbtest.FreshUser(), 10000, 100, "random")
	for round := range 3 {
		users := distinctUsers(25)
		items := make([]api.BatchItem, len(users))
		for i, u := range users {
			items[i] = openItem(u, id)
		}
		writes.Store(0)
		r := h.postBatchTo(t, hs.URL, api.AppendBatch(nil, items), nil, true, len(items))
		if r.Status != http.StatusOK {
			t.Fatalf("batch: %d %s", r.Status, r.Code)
		}
		for _, a := range r.Answers {
			if a.Status != http.StatusOK {
				t.Fatalf("open: %d %s", a.Status, a.Body)
			}
		}
		// The opens commit in a transaction or two (the first runner's
		// open may start one alone); a write per answer was 25.
		if n := writes.Load(); n > 6 {
			t.Errorf("round %d: %d writes for the answers of %d opens of one packet, want a few", round, n, len(items))
		}
	}
}
