package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestRainSendsEachTokenOnce: the rain's wrk script sends every token
// exactly once, answers are counted by what they say (opened, sold_out),
// and the run ends when the last answer is in, not at wrk's duration.
func TestRainSendsEachTokenOnce(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatalf("wrk is not installed (scripts/dev.sh bench-e2e and bench install it): %v", err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("Authorization")
		mu.Lock()
		seen[tok]++
		n := len(seen)
		mu.Unlock()
		if n <= 300 { // the first 300 users take the shares
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"opened","amount":1}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"type":"about:blank","title":"Conflict","status":409,"code":"sold_out"}`)
	}))
	defer srv.Close()
	const users = 1001
	var b strings.Builder
	for i := range users {
		fmt.Fprintf(&b, "tok%d\n", i)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := runRainWrk(context.Background(), srv.URL+"/", tokens, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	if w.requests != users || w.opened != 300 || w.soldout != users-300 || w.other+w.okother+w.busy+w.sockerr > 0 {
		t.Errorf("wrk counted %+v; want %d answers, 300 opened, the rest sold_out", w, users)
	}
	if len(seen) != users {
		t.Errorf("%d distinct tokens reached the server, want %d", len(seen), users)
	}
	for tok, n := range seen {
		if n != 1 || !strings.HasPrefix(tok, "Bearer tok") {
			t.Fatalf("token %q sent %d times", tok, n)
		}
	}
	if w.took.Seconds() > 30 {
		t.Errorf("the rain took %v: it waited for wrk's duration, not the last answer", w.took)
	}
}
