package clustertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Reply is an HTTP answer with its body decoded as a JSON object (numbers
// kept exact), for tests that look at the wire itself: headers, problem
// JSON, fields by name. Client answers with typed bodies instead.
type Reply struct {
	Status int
	Proto  string // "HTTP/1.1", "HTTP/2.0"
	Header http.Header
	Raw    []byte
	JSON   map[string]any // nil when the body is not a JSON object
	Err    error          // transport error; Status is 0
}

func (r Reply) String() string {
	if r.Err != nil {
		return "transport error: " + r.Err.Error()
	}
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Raw))
}

// Str returns a string field ("" when absent or not a string).
func (r Reply) Str(k string) string {
	s, _ := r.JSON[k].(string)
	return s
}

// Num returns an integer field; ok is false when absent or not an integer.
func (r Reply) Num(k string) (int64, bool) {
	n, ok := r.JSON[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// Amount is the "amount" of an open answer, or -1.
func (r Reply) Amount() int64 {
	if n, ok := r.Num("amount"); ok {
		return n
	}
	return -1
}

// IsProblem reports whether r is problem JSON with status and code.
func (r Reply) IsProblem(status int, code string) bool {
	st, _ := r.Num("status")
	return r.Status == status && strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") &&
		r.Str("code") == code && st == int64(status)
}

// NewRequest builds a request to url with body as its JSON (nil: no body)
// and the given headers.
func NewRequest(method, url string, body []byte, header map[string]string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req, nil
}

// Do sends req with hc and reads the answer.
func Do(hc *http.Client, req *http.Request) Reply {
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{Err: err}
	}
	r := Reply{Status: resp.StatusCode, Proto: resp.Proto, Header: resp.Header, Raw: raw}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&r.JSON) // non-JSON answers keep JSON nil
	return r
}

// errNotFinal marks an answer that is not one of open's final answers.
var errNotFinal = errors.New("not a final open answer")

// Classify returns the final answer of an open: "opened" or
// "already_opened" (200 with an amount of at least 1 fen) or "sold_out"
// (409 problem); anything else is an error.
func Classify(r Reply) (string, error) {
	switch {
	case r.Status == http.StatusOK && (r.Str("status") == hongbao.Opened || r.Str("status") == hongbao.AlreadyOpened):
		if r.Amount() < 1 {
			return "", fmt.Errorf("%w (amount): %v", errNotFinal, r)
		}
		return r.Str("status"), nil
	case r.IsProblem(http.StatusConflict, "sold_out"):
		return "sold_out", nil
	}
	return "", fmt.Errorf("%w: %v", errNotFinal, r)
}
