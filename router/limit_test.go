package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// TestLimiter: a burst, then one request per interval; users apart.
func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type step struct {
		user hongbao.UserID
		at   time.Duration
		ok   bool
		wait time.Duration // when refused
	}
	tests := []struct {
		name  string
		rate  Rate
		steps []step
	}{
		{"burst then refill", Rate{Every: 100 * time.Millisecond, Burst: 3}, []step{
			{1, 0, true, 0}, {1, 0, true, 0}, {1, 0, true, 0},
			{1, 0, false, 100 * time.Millisecond},
			{1, 40 * time.Millisecond, false, 60 * time.Millisecond},
			{1, 100 * time.Millisecond, true, 0},
			{1, 100 * time.Millisecond, false, 100 * time.Millisecond},
			{1, 350 * time.Millisecond, true, 0}, {1, 350 * time.Millisecond, true, 0},
			{1, 350 * time.Millisecond, false, 50 * time.Millisecond},
		}},
		{"users apart", Rate{Every: time.Second, Burst: 1}, []step{
			{1, 0, true, 0}, {1, 0, false, time.Second}, {2, 0, true, 0}, {3, 0, true, 0}, {2, 0, false, time.Second},
		}},
		{"refused requests cost nothing", Rate{Every: time.Second, Burst: 1}, []step{
			{1, 0, true, 0}, {1, 0, false, time.Second}, {1, 500 * time.Millisecond, false, 500 * time.Millisecond},
			{1, time.Second, true, 0},
		}},
		{"a full bucket holds no more than burst", Rate{Every: time.Millisecond, Burst: 2}, []step{
			{1, time.Hour, true, 0}, {1, time.Hour, true, 0}, {1, time.Hour, false, time.Millisecond},
		}},
	}
	for _, tt := range tests {
		l := newLimiter(tt.rate, 0)
		for i, s := range tt.steps {
			wait, ok := l.allow(s.user, t0.Add(s.at))
			if ok != s.ok || (!ok && wait != s.wait) {
				t.Errorf("%s: step %d (user %d at %v): ok %v wait %v, want %v %v", tt.name, i, s.user, s.at, ok, wait, s.ok, s.wait)
			}
		}
	}
	if l := newLimiter(Rate{}, 0); l != nil {
		t.Errorf("the zero rate made a limiter")
	}
	var none *limiter
	if _, ok := none.allow(1, t0); !ok {
		t.Errorf("no limiter refused")
	}
}

// TestLimiterBounded: however many users, the limiter tracks at most its
// bound; users whose bucket is full again are forgotten first.
func TestLimiterBounded(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := newLimiter(Rate{Every: time.Second, Burst: 5}, 64*limiterShards)
	for u := range 100_000 {
		l.allow(hongbao.UserID(u+1), t0.Add(time.Duration(u)*time.Millisecond))
		if u%997 == 0 && l.size() > 64*limiterShards {
			t.Fatalf("after %d users: %d tracked, bound %d", u+1, l.size(), 64*limiterShards)
		}
	}
	// A user being limited right now survives users long idle: these
	// all share shard 0, of 4 places.
	l = newLimiter(Rate{Every: time.Hour, Burst: 1}, 4*limiterShards)
	for i := range 3 {
		l.allow(hongbao.UserID(limiterShards*(i+2)), t0.Add(-2*time.Hour)) // full again by t0
	}
	hot := hongbao.UserID(limiterShards)
	l.allow(hot, t0)
	if _, ok := l.allow(limiterShards*10, t0); !ok { // the shard is full: evicts
		t.Errorf("a new user was refused")
	}
	if _, ok := l.allow(hot, t0.Add(time.Second)); ok {
		t.Errorf("the limited user was forgotten")
	}
}

// limitedRouter is a router with no SETs behind it and the given limits.
func limitedRouter(t *testing.T, l Limits) (*httptest.Server, *hongbao.Signer) {
	t.Helper()
	signer := hongbao.NewSigner([]byte("router-limit-test-secret-0123456789"))
	rt := New(Deps{Signer: signer, Internal: api.NewInternal([]byte("internal-0123456789abcdef"), time.Now),
		Now: time.Now, Log: zap.NewNop(), Limits: l})
	hs := httptest.NewServer(rt.Handler())
	t.Cleanup(hs.Close)
	return hs, signer
}

// TestRouterRateLimited: over its route's rate a user gets 429
// rate_limited with Retry-After, before the router does any work; other
// users and other routes are not affected. Each request below is one the
// router refuses (400) without a SET, so only the limiter is measured.
func TestRouterRateLimited(t *testing.T) {
	hs, signer := limitedRouter(t, Limits{Send: Rate{Every: time.Hour, Burst: 2}, Open: Rate{Every: time.Hour, Burst: 1}})
	do := func(user hongbao.UserID, path string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(`{"total":1,"total":1}`))
		req.Header.Set("Authorization", "Bearer "+signer.Sign(user, time.Now().Add(time.Hour)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p api.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p.Code, resp.Header.Get("Retry-After")
	}
	const open = "/v1/packets/165143170254970885/open"
	steps := []struct {
		user       hongbao.UserID
		path       string
		status     int
		code       string
		retryAfter string
	}{
		{1, "/v1/packets", 400, "duplicate_key", ""},
		{1, "/v1/packets", 400, "duplicate_key", ""},
		{1, "/v1/packets", 429, "rate_limited", "3600"},
		{2, "/v1/packets", 400, "duplicate_key", ""},
		{1, open, 400, "unexpected_body", ""},
		{1, open, 429, "rate_limited", "3600"},
		{1, "/v1/packets/165143170254970885/grab", 400, "unexpected_body", ""}, // grab has no limit here
		{1, "/v1/packets/165143170254970885/grab", 400, "unexpected_body", ""},
	}
	for i, s := range steps {
		status, code, ra := do(s.user, s.path)
		if status != s.status || code != s.code || ra != s.retryAfter {
			t.Errorf("step %d: user %d %s: %d %s Retry-After %q, want %d %s %q", i, s.user, s.path, status, code, ra, s.status, s.code, s.retryAfter)
		}
	}
}

// TestCapped: an address with max requests in flight gets 429
// concurrency_limited until one ends; other addresses are not affected,
// and an address leaves memory with its last request.
func TestCapped(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	h := capped(2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	serve := func(addr string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/v1/me/wallet", nil)
		r.RemoteAddr = addr
		h.ServeHTTP(rec, r)
		return rec
	}
	var wg sync.WaitGroup
	for _, port := range []string{"1000", "1001"} { // two connections of one client
		wg.Go(func() { serve("192.0.2.1:" + port) })
		<-entered
	}
	if rec := serve("192.0.2.1:1002"); rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"concurrency_limited"`) ||
		rec.Header().Get("Retry-After") != "1" {
		t.Errorf("third request in flight: %d %s (Retry-After %q), want 429 concurrency_limited", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	wg.Go(func() { serve("198.51.100.7:1000") }) // another client
	<-entered
	close(release)
	wg.Wait()
	if rec := serve("192.0.2.1:1003"); rec.Code != http.StatusOK {
		t.Errorf("after the others ended: %d", rec.Code)
	}
}

// TestInflightForgets: addresses with nothing in flight take no memory.
func TestInflightForgets(t *testing.T) {
	f := newInflight(3)
	for i := range 1000 {
		addr := "10.0.0." + string(rune('0'+i%10))
		if !f.acquire(addr) {
			t.Fatalf("acquire %s refused", addr)
		}
		f.release(addr)
	}
	if f.size() != 0 {
		t.Errorf("%d addresses kept with nothing in flight", f.size())
	}
}
