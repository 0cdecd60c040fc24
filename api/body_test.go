package api

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

// TestBodyError: every way a client's body can fail to arrive is a 4xx
// with its own code.
func TestBodyError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   string
		status int
	}{
		{"cut short", io.ErrUnexpectedEOF, "truncated_body", 400},
		{"cut short, wrapped", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "truncated_body", 400},
		{"deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "body_timeout", 408},
		{"net timeout", timeoutErr{}, "body_timeout", 408},
		{"too large", &http.MaxBytesError{Limit: MaxBody}, "body_too_large", 413},
		{"bad chunk", errors.New("malformed chunked encoding"), "malformed_body", 400},
		{"reset", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, "malformed_body", 400},
	}
	for _, tt := range tests {
		err := BodyError(tt.err)
		if hongbao.Code(err) != tt.code || Status(err) != tt.status {
			t.Errorf("%s: BodyError(%v) = %v (status %d), want %d %s", tt.name, tt.err, err, Status(err), tt.status, tt.code)
		}
	}
	if BodyError(nil) != nil {
		t.Errorf("BodyError(nil) != nil")
	}
}

func TestNoBody(t *testing.T) {
	tests := []struct {
		name string
		body io.Reader
		code string
	}{
		{"none", nil, ""},
		{"empty", strings.NewReader(""), ""},
		{"some", strings.NewReader("{}"), "unexpected_body"},
		{"broken", iotest.ErrReader(io.ErrUnexpectedEOF), "truncated_body"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "/v1/packets/1/open", tt.body)
		if tt.name == "broken" {
			r.ContentLength = -1
		}
		err := NoBody(httptest.NewRecorder(), r)
		if hongbao.Code(err) != tt.code && !(tt.code == "" && err == nil) {
			t.Errorf("%s: NoBody = %v, want %q", tt.name, err, tt.code)
		}
	}
}

// TestWriteProblemRetryError: a RetryError's wait is its Retry-After, in
// whole seconds rounded up.
func TestWriteProblemRetryError(t *testing.T) {
	limited := &hongbao.Error{Code: "rate_limited", Message: "slow down"}
	tests := []struct {
		after time.Duration
		want  string
	}{
		{0, "1"},
		{time.Millisecond, "1"},
		{time.Second, "1"},
		{2500 * time.Millisecond, "3"},
		{61 * time.Second, "61"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteProblem(rec, &RetryError{Err: fmt.Errorf("user 1: %w", limited), After: tt.after}, "r")
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != tt.want {
			t.Errorf("after %v: %d Retry-After %q, want 429 %q", tt.after, rec.Code, rec.Header().Get("Retry-After"), tt.want)
		}
		if m := decodeProblem(t, rec); m["code"] != "rate_limited" {
			t.Errorf("after %v: problem %v", tt.after, m)
		}
	}
}
