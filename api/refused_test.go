package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// serveRefusing starts an HTTP server behind api.RefusedAsProblems with a
// 1 KiB header limit; its handler answers in plain text, as /healthz
// does, and with a plain-text 400 of its own for /own-400.
func serveRefusing(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/own-400" {
			w.Header().Set("Connection", "close")
			http.Error(w, "mine", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	hs := &http.Server{Handler: h, MaxHeaderBytes: 1 << 10, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(api.RefusedAsProblems(ln)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// exchange writes raw to addr and reads the one answer.
func exchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestRefusedAsProblems(t *testing.T) {
	addr := serveRefusing(t)
	for _, tc := range []struct {
		name, raw  string
		status     int
		code       string
		detailHas  string
		wantHeader string // a header the answer must carry
	}{
		{"request line", "GARBAGE\r\n\r\n", 400, "malformed_request", "could not be parsed", ""},
		{"no host", "GET / HTTP/1.1\r\n\r\n", 400, "malformed_request", "missing required Host header", ""},
		{"headers over the limit", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
			431, "headers_too_large", "over the server's limit", ""},
		{"unknown transfer coding (net/http: 501)", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			400, "malformed_request", "unsupported transfer encoding", ""},
		{"unknown major version (net/http: 505)", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 400, "malformed_request", "unsupported protocol version", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := exchange(t, addr, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q: %s", ct, body)
			}
			var p api.Problem
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatalf("%v: %q", err, body)
			}
			if p.Code != tc.code || p.Status != tc.status || !strings.Contains(p.Detail, tc.detailHas) {
				t.Fatalf("problem %+v, want code %s status %d detail with %q", p, tc.code, tc.status, tc.detailHas)
			}
			if want := api.Status(&hongbao.Error{Code: p.Code}); want != p.Status {
				t.Fatalf("code %s answered %d, the table says %d", p.Code, p.Status, want)
			}
		})
	}
}

// A handler's own answers pass untouched, plain text and 400s included.
func TestRefusedAsProblemsLeavesHandlersAlone(t *testing.T) {
	addr := serveRefusing(t)
	resp, body := exchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("healthz: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = exchange(t, addr, "GET /own-400 HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 400 || body != "mine\n" {
		t.Fatalf("the handler's 400: %d %q", resp.StatusCode, body)
	}
}
