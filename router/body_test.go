package router_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/router"
)

const (
	unitSecret         = "router-unit-test-secret-0123456789"
	unitInternalSecret = "router-unit-internal-secret-0123456789"
)

// unitRouter is a router with no SETs behind it: enough for every request
// it must refuse before forwarding. Its log goes to the returned observer.
func unitRouter(t *testing.T) (*httptest.Server, *hongbao.Signer, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	signer := hongbao.NewSigner([]byte(unitSecret))
	rt := router.New(router.Deps{Signer: signer, Internal: api.NewInternal([]byte(unitInternalSecret), time.Now),
		Now: time.Now, Log: zap.New(core)})
	hs := httptest.NewUnstartedServer(rt.Handler())
	hs.Config.ReadTimeout = 500 * time.Millisecond // hbrouter's is 10 s
	hs.Start()
	t.Cleanup(hs.Close)
	return hs, signer, logs
}

// rawReply is an answer to a request written byte by byte.
type rawReply struct {
	status     int
	code       string
	retryAfter string
}

// rawRequest writes head and body to the server at addr as they are, then
// half-closes the connection if closeWrite, and reads the answer.
func rawRequest(t *testing.T, addr, head, body string, closeWrite bool) rawReply {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var p struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&p)
	return rawReply{status: resp.StatusCode, code: p.Code, retryAfter: resp.Header.Get("Retry-After")}
}

// TestRouterBrokenBodies: a body that cannot be read whole (a broken
// chunked encoding, cut short, too slow, too large) is the client's
// mistake: a 4xx with a code, never 500 (issue 12, problem 2).
func TestRouterBrokenBodies(t *testing.T) {
	hs, signer, logs := unitRouter(t)
	addr := strings.TrimPrefix(hs.URL, "http://")
	token := signer.Sign(42, time.Now().Add(time.Hour))
	head := func(framing string) string {
		return "POST /v1/packets HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer " + token +
			"\r\nContent-Type: application/json\r\n" + framing + "\r\n"
	}
	tests := []struct {
		name       string
		head, body string
		closeWrite bool
		status     int
		code       string
	}{
		{"malformed chunk size", head("Transfer-Encoding: chunked\r\n"), "zz\r\n{}\r\n0\r\n\r\n", false, 400, "malformed_body"},
		{"chunk without its CRLF", head("Transfer-Encoding: chunked\r\n"), "2\r\n{}XX0\r\n\r\n", false, 400, "malformed_body"},
		{"chunked cut short", head("Transfer-Encoding: chunked\r\n"), "20\r\n{\"total\":", true, 400, "truncated_body"},
		{"body cut short", head("Content-Length: 100\r\n"), `{"total":1000,`, true, 400, "truncated_body"},
		{"body too slow", head("Content-Length: 100\r\n"), `{"total":1000,`, false, 408, "body_timeout"},
		{"body too large", head("Content-Length: 70000\r\n"), strings.Repeat(" ", 70000), false, 413, "body_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawRequest(t, addr, tt.head, tt.body, tt.closeWrite)
			if r.status != tt.status || r.code != tt.code {
				t.Errorf("%d %s, want %d %s", r.status, r.code, tt.status, tt.code)
			}
		})
	}
	for _, e := range logs.All() {
		if e.Level >= zap.ErrorLevel {
			t.Errorf("a client's broken body logged an error: %s %v", e.Message, e.ContextMap())
		}
	}
}

// TestRouterLogsNoSecrets: neither a user's token, valid or forged, nor
// a secret appears in the router's log.
func TestRouterLogsNoSecrets(t *testing.T) {
	hs, signer, logs := unitRouter(t)
	good := signer.Sign(42, time.Now().Add(time.Hour))
	forged := "42.9999999999.forged-signature-abcdef"
	for _, tok := range []string{good, forged} {
		for _, path := range []string{"/v1/packets", "/v1/packets/abc/open"} {
			req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(`{"total":1,"total":2}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing logged: the test sees nothing")
	}
	for _, e := range logs.All() {
		line, _ := json.Marshal(e.ContextMap())
		for _, secret := range []string{good, forged, strings.Split(good, ".")[2], unitSecret, unitInternalSecret} {
			if strings.Contains(e.Message+string(line), secret) {
				t.Errorf("log entry %q %s holds a secret", e.Message, line)
			}
		}
	}
}
