package router

import (
	"net"
	"net/http"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// ErrConcurrencyLimited answers a client address with too many requests in
// flight at once.
var ErrConcurrencyLimited = &hongbao.Error{Code: "concurrency_limited", Message: "too many requests in flight from this address"}

// inflight counts the requests in flight per client address. An address
// leaves the map with its last request, so memory follows the requests in
// flight (which the server's timeouts bound), never the addresses seen.
type inflight struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newInflight(max int) *inflight { return &inflight{max: max, n: map[string]int{}} }

func (f *inflight) acquire(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[addr] >= f.max {
		return false
	}
	f.n[addr]++
	return true
}

func (f *inflight) release(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[addr]--; f.n[addr] <= 0 {
		delete(f.n, addr)
	}
}

// size is how many addresses have requests in flight.
func (f *inflight) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.n)
}

// capped refuses a request (429, before its body is read) while its client
// address has max requests in flight; max <= 0 is no cap. The address is
// the TCP peer's: headers such as X-Forwarded-For are the client's to
// forge. (Over HTTP/1.1 a connection carries one request at a time; the
// per-connection cap of HTTP/2 is the server's MaxConcurrentStreams.)
func capped(max int, next http.Handler) http.Handler {
	if max <= 0 {
		return next
	}
	f := newInflight(max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		if !f.acquire(addr) {
			api.WriteProblem(w, ErrConcurrencyLimited, api.RequestID(r.Context()))
			return
		}
		defer f.release(addr)
		next.ServeHTTP(w, r)
	})
}
