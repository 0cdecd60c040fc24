// Package api is the HTTP wire format shared by the SET servers and the
// router: JSON bodies, strict request decoding, and RFC 9457 problem
// responses whose status is chosen from the domain code by one table.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// statusOf maps domain codes to HTTP statuses: the one place that decides.
// InvalidError codes not listed here are 400.
var statusOf = map[string]int{
	"not_found":              http.StatusNotFound,
	"method_not_allowed":     http.StatusMethodNotAllowed,
	"sold_out":               http.StatusConflict,
	"already_opened":         http.StatusConflict,
	"expired":                http.StatusGone,
	"busy":                   http.StatusServiceUnavailable,
	"unavailable":            http.StatusServiceUnavailable,
	"invalid_id":             http.StatusBadRequest,
	"invalid_user":           http.StatusBadRequest,
	"unauthorized":           http.StatusUnauthorized,
	"token_expired":          http.StatusUnauthorized,
	"forbidden":              http.StatusForbidden,
	"not_in_audience":        http.StatusForbidden,
	"daily_limit":            http.StatusForbidden,
	"insufficient_funds":     http.StatusPaymentRequired,
	"idempotency_key_reused": http.StatusUnprocessableEntity,
	"wrong_set":              http.StatusMisdirectedRequest,
	"body_too_large":         http.StatusRequestEntityTooLarge,
	"unsupported_media_type": http.StatusUnsupportedMediaType,
	"timeout":                http.StatusGatewayTimeout,
	"internal":               http.StatusInternalServerError,
	// A send under an ID that holds another packet: another router minted
	// the same ID (the router mints anew), or a replay with another body.
	"duplicate_id": http.StatusConflict,
	// A send the sweeper cancelled, asked again under its key: final.
	"send_cancelled": http.StatusConflict,
	// The client's body could not be read: its fault, never ours.
	"truncated_body": http.StatusBadRequest,
	"malformed_body": http.StatusBadRequest,
	"body_timeout":   http.StatusRequestTimeout,
	// Signed requests used twice, and clients going too fast.
	"replayed":            http.StatusForbidden,
	"rate_limited":        http.StatusTooManyRequests,
	"concurrency_limited": http.StatusTooManyRequests,
	// A router's batch (router -> server only) that is not one.
	"malformed_batch": http.StatusBadRequest,
	"batch_too_large": http.StatusRequestEntityTooLarge,
	// What net/http refuses before any handler (RefusedAsProblems).
	"headers_too_large": http.StatusRequestHeaderFieldsTooLarge,
	malformedRequest:    http.StatusBadRequest,
	// The client went away first (nginx's 499): never a 5xx.
	"client_closed": StatusClientClosed,
}

// StatusClientClosed is the status logged for a request whose client
// closed it before the answer (nginx's convention; no client reads it).
const StatusClientClosed = 499

// ClientGone returns err as ErrClientClosed when it is the cancellation of
// r's own context (the client closed the connection), and err otherwise.
func ClientGone(r *http.Request, err error) error {
	if err != nil && errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled) {
		return fmt.Errorf("%v: %w", err, hongbao.ErrClientClosed)
	}
	return err
}

// Status returns the HTTP status for err.
func Status(err error) int {
	if s, ok := statusOf[hongbao.Code(err)]; ok {
		return s
	}
	var ie *hongbao.InvalidError
	if errors.As(err, &ie) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// Problem is an RFC 9457 problem document with the domain code.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Detail    string `json:"detail,omitempty"`
	Field     string `json:"field,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Limit says, for daily_limit, which limit refused and when it resets.
	Limit *ProblemLimit `json:"limit,omitempty"`
}

// ProblemLimit is the daily limit a request would have passed.
type ProblemLimit struct {
	Name     string `json:"name"`
	Value    int64  `json:"value"`
	ResetsAt string `json:"resets_at"` // the next midnight of the cluster's time zone
}

// ProblemOf builds the problem document for err. Internal errors keep their
// detail out of the response; the log has it.
func ProblemOf(err error, requestID string) Problem {
	code := hongbao.Code(err)
	status := Status(err)
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, RequestID: requestID}
	var de *hongbao.Error
	var ie *hongbao.InvalidError
	var le *hongbao.LimitError
	switch {
	case errors.As(err, &le):
		p.Detail = le.Error()
		p.Limit = &ProblemLimit{Name: le.Name, Value: le.Value, ResetsAt: le.ResetsAt.Format(TimeFormat)}
	case errors.As(err, &ie):
		p.Detail, p.Field = ie.Field+" "+ie.Message, ie.Field
	case errors.As(err, &de):
		p.Detail = de.Message
	}
	return p
}

// WriteProblem answers err as problem JSON. Busy answers carry Retry-After,
// and so does a RetryError, with its own wait.
func WriteProblem(w http.ResponseWriter, err error, requestID string) {
	writeProblem(w, err, requestID, make([]byte, 0, 256))
}

// writeProblem is WriteProblem encoding into buf; it returns the buffer.
func writeProblem(w http.ResponseWriter, err error, requestID string, buf []byte) []byte {
	p := ProblemOf(err, requestID)
	if s, ok := retryAfter(err); ok {
		w.Header().Set("Retry-After", s)
	} else if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	buf = p.AppendJSON(buf)
	writeJSONBytes(w, p.Status, "application/problem+json", buf)
	return buf
}

// WriteJSON answers v as JSON with status: the hot answers (those that
// encode themselves) without reflection.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if a, ok := v.(jsonAppender); ok {
		writeJSONBytes(w, status, "application/json", a.AppendJSON(make([]byte, 0, 128)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// RetryError is a refusal the client may try again after a wait: its
// answer carries Retry-After.
type RetryError struct {
	Err   error         // the domain error, for the code and status
	After time.Duration // how long to wait
}

func (e *RetryError) Error() string { return fmt.Sprintf("%v (retry after %v)", e.Err, e.After) }

// Unwrap returns the domain error.
func (e *RetryError) Unwrap() error { return e.Err }

// retryAfter is the Retry-After of err in whole seconds, rounded up and at
// least 1.
func retryAfter(err error) (string, bool) {
	var re *RetryError
	if !errors.As(err, &re) {
		return "", false
	}
	secs := (re.After + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(secs, 1)), 10), true
}
