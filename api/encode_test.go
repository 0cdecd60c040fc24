package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// encodeJSON is what json.Encoder.Encode writes for v: the golden output.
func encodeJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// awkward strings: every branch of appendJSONString, and what encoding/json
// escapes (HTML characters, control characters, invalid UTF-8, U+2028).
var awkward = []string{"", "opened", "already_opened", "a\"b", `back\slash`, "<script>&", "tab\there", "\x00\x1f",
	"caf\u00e9", "\u2028\u2029", "\xff\xfe", "emoji \U0001F9E7", "del\x7f"}

func TestHandEncodersMatchEncodingJSON(t *testing.T) {
	var vals []jsonAppender
	for _, s := range awkward {
		vals = append(vals, OpenJSON{Status: s, Amount: 12345}, GrabJSON{CanOpen: s == "", Reason: s},
			Problem{Type: "about:blank", Title: s, Status: 409, Code: s, Detail: s, Field: s, Instance: s, RequestID: s})
	}
	vals = append(vals, OpenJSON{Status: "opened", Amount: -1}, OpenJSON{Amount: 1<<63 - 1}, PingJSON{OK: true}, PingJSON{},
		Problem{Type: "about:blank", Title: "Conflict", Status: 409, Code: "sold_out"}, GrabJSON{})
	for _, v := range vals {
		if got, want := v.AppendJSON(nil), encodeJSON(t, v); !bytes.Equal(got, want) {
			t.Errorf("%#v:\n got %s\nwant %s", v, got, want)
		}
	}
}

// TestWriteProblemGolden: the problem of every hot refusal, byte for byte
// as before (encoding/json), and WriteJSON's hand-encoded answers too.
func TestWriteProblemGolden(t *testing.T) {
	for _, err := range []error{hongbao.ErrSoldOut, hongbao.ErrExpired, hongbao.ErrBusy, hongbao.ErrUnauthorized,
		&hongbao.InvalidError{Code: "invalid_id", Field: "id", Message: "is not a <packet> ID"}} {
		w := httptest.NewRecorder()
		WriteProblem(w, err, "req-1")
		if want := encodeJSON(t, ProblemOf(err, "req-1")); !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("%v:\n got %s\nwant %s", err, w.Body.Bytes(), want)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%v: Content-Type %q", err, ct)
		}
	}
	w := httptest.NewRecorder()
	WriteJSON(w, 200, OpenJSON{Status: "opened", Amount: 88})
	if got := w.Body.String(); got != "{\"status\":\"opened\",\"amount\":88}\n" {
		t.Errorf("WriteJSON(open) = %q", got)
	}
}

func BenchmarkWriteOpen(b *testing.B) {
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		WriteJSON(w, 200, OpenJSON{Status: "opened", Amount: 88})
	}
}
