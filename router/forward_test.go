package router

import (
	"bytes"
	"io"
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

// TestTrySignsEachAttempt: every attempt at a server is signed anew, for
// that server and with a nonce of its own, so a retry on the next server
// is neither refused as a replay there nor usable anywhere else.
func TestTrySignsEachAttempt(t *testing.T) {
	secret := []byte("router-forward-test-secret-0123456789")
	verifier := api.NewInternal(secret, time.Now)
	var mu sync.Mutex
	nonces := map[[16]byte]string{}
	server := func() *httptest.Server {
		var hs *httptest.Server
		hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			self := strings.TrimPrefix(hs.URL, "http://")
			s, err := verifier.Verify(r, self, body)
			if err != nil || s.User != 42 {
				api.WriteProblem(w, err, "")
				return
			}
			mu.Lock()
			nonces[s.Nonce] = self
			mu.Unlock()
			api.WriteJSON(w, http.StatusOK, map[string]string{"body": string(body)})
		}))
		t.Cleanup(hs.Close)
		return hs
	}
	a, b := server(), server()
	rt := New(Deps{Internal: api.NewInternal(secret, time.Now), Client: NewClient(4), Now: time.Now, Log: zap.NewNop()})
	in := httptest.NewRequest(http.MethodPost, "/v1/packets?x=1", nil)
	in.Header.Set("Content-Type", "application/json")
	in.Header.Set("Idempotency-Key", "k-1")
	body := []byte(`{"total":1000,"count":10}`)
	for _, hs := range []*httptest.Server{a, b, a} {
		srv := strings.TrimPrefix(hs.URL, "http://")
		resp, err := rt.try(in, srv, hongbao.UserID(42), body, map[string]string{api.HeaderPacketID: "165143170254970885"})
		if err != nil || resp.status != http.StatusOK || !bytes.Contains(resp.body, []byte(`total`)) {
			t.Fatalf("attempt at %s: %+v, %v", srv, resp, err)
		}
	}
	if len(nonces) != 3 {
		t.Errorf("3 attempts used %d nonces", len(nonces))
	}
}

// TestForwardRetriesARefusedSignature: a server that refuses the router's
// signature did nothing (here its clock is 30 s ahead, as for an attempt
// that waited in an overloaded server's queue beyond the window): the
// router signs again for the next server instead of answering the client
// 403, and answers 503 unavailable, never 403, when every server refuses.
func TestForwardRetriesARefusedSignature(t *testing.T) {
	// The router of the switch tests (a topology in a meta database), with
	// its secret; this test picks the servers itself.
	never := func() bool { return false }
	rt, _ := switchRouter(t, newFakeServer(t, never), newFakeServer(t, never))
	secret := []byte("router-switch-test-secret-0123456789")
	server := func(now func() time.Time) string {
		verifier := api.NewInternal(secret, now)
		var hs *httptest.Server
		hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if _, err := verifier.Verify(r, strings.TrimPrefix(hs.URL, "http://"), body); err != nil {
				api.WriteProblem(w, err, "")
				return
			}
			api.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
		}))
		t.Cleanup(hs.Close)
		return strings.TrimPrefix(hs.URL, "http://")
	}
	late := func() time.Time { return time.Now().Add(api.Window + 20*time.Second) }
	refusing, refusing2, good := server(late), server(late), server(time.Now)
	in := httptest.NewRequest(http.MethodPost, "/v1/packets", nil)
	in.Header.Set("Content-Type", "application/json")
	body := []byte(`{"total":1000,"count":10}`)

	resp, err := rt.forwardTo(in, 42, body, nil, func() []string { return []string{refusing, good} })
	if err != nil || resp.status != http.StatusOK {
		t.Fatalf("a refusing server, then a good one: %+v, %v; want 200 from the good one", resp, err)
	}
	_, err = rt.forwardTo(in, 42, body, nil, func() []string { return []string{refusing, refusing2} })
	if api.Status(err) != http.StatusServiceUnavailable || hongbao.Code(err) != "unavailable" {
		t.Fatalf("every server refusing: %v (status %d); want 503 unavailable", err, api.Status(err))
	}
}
