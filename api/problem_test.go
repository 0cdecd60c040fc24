package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestStatusTable(t *testing.T) {
	want := map[string]int{
		"not_found":              404,
		"method_not_allowed":     405,
		"malformed_request":      400,
		"headers_too_large":      431,
		"sold_out":               409,
		"already_opened":         409,
		"expired":                410,
		"busy":                   503,
		"unavailable":            503,
		"invalid_id":             400,
		"invalid_user":           400,
		"unauthorized":           401,
		"token_expired":          401,
		"forbidden":              403,
		"not_in_audience":        403,
		"daily_limit":            403,
		"insufficient_funds":     402,
		"idempotency_key_reused": 422,
		"wrong_set":              421,
		"body_too_large":         413,
		"unsupported_media_type": 415,
		"timeout":                504,
		"internal":               500,
		"duplicate_id":           409,
		"truncated_body":         400,
		"malformed_body":         400,
		"body_timeout":           408,
		"replayed":               403,
		"rate_limited":           429,
		"concurrency_limited":    429,
		"malformed_batch":        400,
		"batch_too_large":        413,
		"client_closed":          499,
		"send_cancelled":         409,
	}
	for code, status := range want {
		err := &hongbao.Error{Code: code, Message: "m"}
		if got := Status(err); got != status {
			t.Errorf("Status(%s) = %d, want %d", code, got, status)
		}
		if got := Status(fmt.Errorf("context: %w", err)); got != status {
			t.Errorf("Status(wrapped %s) = %d, want %d", code, got, status)
		}
	}
	// Every code the table knows is pinned above.
	for code := range statusOf {
		if _, ok := want[code]; !ok {
			t.Errorf("statusOf has %q, which this test does not pin", code)
		}
	}
}

func TestStatusOfErrors(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{hongbao.ErrNotFound, 404},
		{hongbao.ErrSoldOut, 409},
		{hongbao.ErrExpired, 410},
		{hongbao.ErrBusy, 503},
		{fmt.Errorf("queue of 1 full: %w", hongbao.ErrBusy), 503},
		{hongbao.ErrUnavailable, 503},
		{hongbao.ErrInvalidID, 400},
		{hongbao.ErrInvalidUser, 400},
		{hongbao.ErrUnauthorized, 401},
		{hongbao.ErrTokenExpired, 401},
		{hongbao.ErrInsufficientFunds, 402},
		{hongbao.ErrIdempotencyReuse, 422},
		{hongbao.ErrWrongSet, 421},
		{hongbao.ErrDuplicateID, 409},
		{ErrBodyTooLarge, 413},
		{ErrForbidden, 403},
		{ErrMalformedJSON, 400},
		{&hongbao.InvalidError{Code: "invalid_total", Field: "total"}, 400},
		{&hongbao.InvalidError{Code: "share_over_limit", Field: "total"}, 400},
		{fmt.Errorf("decode: %w", &hongbao.InvalidError{Code: "unknown_field", Field: "x"}), 400},
		{errors.New("connection refused"), 500},
		{fmt.Errorf("store: %w", errors.New("deadlock")), 500},
		{&hongbao.Error{Code: "no_such_code"}, 500},
	}
	for _, tt := range tests {
		if got := Status(tt.err); got != tt.want {
			t.Errorf("Status(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func decodeProblem(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body.String(), err)
	}
	return m
}

func TestWriteProblem(t *testing.T) {
	tests := []struct {
		err        error
		status     int
		code       string
		title      string
		retryAfter string
		detail     string
		field      string
	}{
		{fmt.Errorf("queue: %w", hongbao.ErrBusy), 503, "busy", "Service Unavailable", "1", "the packet is busy, retry shortly", ""},
		{hongbao.ErrUnavailable, 503, "unavailable", "Service Unavailable", "1", "the service is shutting down or not ready", ""},
		{hongbao.ErrSoldOut, 409, "sold_out", "Conflict", "", "all shares of the packet are taken", ""},
		{hongbao.ErrExpired, 410, "expired", "Gone", "", "the packet has expired", ""},
		{&hongbao.InvalidError{Code: "invalid_total", Field: "total", Message: "must be positive"}, 400, "invalid_total", "Bad Request", "", "total must be positive", "total"},
		// Internal errors keep their detail out of the response.
		{errors.New("dial tcp 10.0.0.1:3306: secret-host"), 500, "internal", "Internal Server Error", "", "", ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteProblem(rec, tt.err, "req-1")
		if rec.Code != tt.status {
			t.Errorf("%v: status %d, want %d", tt.err, rec.Code, tt.status)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%v: Content-Type %q", tt.err, ct)
		}
		if ra := rec.Header().Get("Retry-After"); ra != tt.retryAfter {
			t.Errorf("%v: Retry-After %q, want %q", tt.err, ra, tt.retryAfter)
		}
		m := decodeProblem(t, rec)
		if m["code"] != tt.code || m["status"] != float64(tt.status) || m["title"] != tt.title ||
			m["type"] != "about:blank" || m["request_id"] != "req-1" {
			t.Errorf("%v: problem %v", tt.err, m)
		}
		if d, _ := m["detail"].(string); d != tt.detail {
			t.Errorf("%v: detail %q, want %q", tt.err, d, tt.detail)
		}
		if f, _ := m["field"].(string); f != tt.field {
			t.Errorf("%v: field %q, want %q", tt.err, f, tt.field)
		}
	}
}

func TestWriteProblemOmitsEmptyRequestID(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteProblem(rec, hongbao.ErrNotFound, "")
	m := decodeProblem(t, rec)
	if _, ok := m["request_id"]; ok {
		t.Errorf("problem has request_id with none given: %v", m)
	}
	if m["status"] != float64(404) || m["code"] != "not_found" {
		t.Errorf("problem = %v", m)
	}
}

func TestWriteJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusCreated, OpenJSON{Status: hongbao.Opened, Amount: 123})
	if rec.Code != 201 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("WriteJSON: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got := rec.Body.String(); got != `{"status":"opened","amount":123}`+"\n" {
		t.Errorf("WriteJSON body = %q", got)
	}
	rec = httptest.NewRecorder()
	WriteJSON(rec, 200, GrabJSON{CanOpen: true})
	if got := rec.Body.String(); got != `{"can_open":true}`+"\n" {
		t.Errorf("grab body = %q", got)
	}
}

// TestClientGone: a cancellation is the client's (499 client_closed, never
// a 5xx) only when the request's own context was cancelled; a canceled
// context of the server's own making stays an internal fault.
func TestClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := httptest.NewRequest(http.MethodPost, "/v1/packets", nil).WithContext(ctx)
	here := httptest.NewRequest(http.MethodPost, "/v1/packets", nil)
	canceled := fmt.Errorf("open: %w", context.Canceled)
	for _, tc := range []struct {
		name   string
		r      *http.Request
		err    error
		status int
	}{
		{"client gone, canceled", gone, canceled, StatusClientClosed},
		{"client gone, a domain answer first", gone, hongbao.ErrSoldOut, http.StatusConflict},
		{"client gone, no error", gone, nil, 0},
		{"client here, canceled by the server", here, canceled, http.StatusInternalServerError},
		{"client here, busy", here, hongbao.ErrBusy, http.StatusServiceUnavailable},
	} {
		err := ClientGone(tc.r, tc.err)
		if tc.status == 0 {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		if got := Status(err); got != tc.status {
			t.Errorf("%s: status %d (%v), want %d", tc.name, got, err, tc.status)
		}
	}
}

// TestProblemOfLimit: a daily_limit problem names the limit, its value and
// when it resets, in the cluster's time zone.
func TestProblemOfLimit(t *testing.T) {
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	day := hongbao.DayOf(time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC), shanghai)
	err := fmt.Errorf("debit for 1: %w", &hongbao.LimitError{Name: hongbao.LimitSendTotal, Value: 500000, ResetsAt: day.Ends})
	p := ProblemOf(err, "r1")
	want := ProblemLimit{Name: "daily_send_total", Value: 500000, ResetsAt: "2026-11-27T00:00:00.000+08:00"}
	if p.Status != 403 || p.Code != "daily_limit" || p.Limit == nil || *p.Limit != want {
		t.Errorf("ProblemOf(%v) = %+v (limit %+v), want 403 daily_limit with %+v", err, p, p.Limit, want)
	}
	if p := ProblemOf(hongbao.ErrNotInAudience, ""); p.Status != 403 || p.Code != "not_in_audience" || p.Limit != nil {
		t.Errorf("ProblemOf(ErrNotInAudience) = %+v", p)
	}
}
