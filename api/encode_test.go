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
			Problem{Type: "about:blank", Title: s, Status: 409, Code: s, Detail: s, Field: s, Instance: s, RequestID: s},
			Problem{Type: "about:blank", Title: "Forbidden", Status: 403, Code: "daily_limit", Detail: s,
				Limit: &ProblemLimit{Name: s, Value: 1000, ResetsAt: s}})
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
func BenchmarkWriteSoldOut(b *testing.B) {
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		WriteProblem(w, hongbao.ErrSoldOut, "0123456789abcdef")
	}
}

func BenchmarkAnswers(b *testing.B) {
	var a Answers
	w := httptest.NewRecorder()
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Body.Reset()
			a.JSON(w, 200, OpenJSON{Status: "opened", Amount: 88})
		}
	})
	b.Run("sold_out", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Body.Reset()
			a.Problem(w, hongbao.ErrSoldOut, "0123456789abcdef")
		}
	})
}

// TestAnswersMatchWrite: the pooled writers answer byte for byte what
// WriteJSON and WriteProblem answer, headers included, buffer reuse or not.
func TestAnswersMatchWrite(t *testing.T) {
	var a Answers
	for range 3 {
		for _, v := range []any{OpenJSON{Status: "opened", Amount: 1}, PingJSON{OK: true}, map[string]int{"x": 1}} {
			w1, w2 := httptest.NewRecorder(), httptest.NewRecorder()
			WriteJSON(w1, 201, v)
			a.JSON(w2, 201, v)
			if w1.Code != w2.Code || w1.Body.String() != w2.Body.String() || w1.Header().Get("Content-Type") != w2.Header().Get("Content-Type") {
				t.Errorf("%v: %d %q %v vs %d %q %v", v, w1.Code, w1.Body, w1.Header(), w2.Code, w2.Body, w2.Header())
			}
		}
		for _, err := range []error{hongbao.ErrSoldOut, hongbao.ErrBusy, &RetryError{Err: hongbao.ErrBusy, After: 3e9}} {
			w1, w2 := httptest.NewRecorder(), httptest.NewRecorder()
			WriteProblem(w1, err, "r")
			a.Problem(w2, err, "r")
			if w1.Code != w2.Code || w1.Body.String() != w2.Body.String() || w1.Header().Get("Retry-After") != w2.Header().Get("Retry-After") {
				t.Errorf("%v: %d %q vs %d %q", err, w1.Code, w1.Body, w2.Code, w2.Body)
			}
		}
	}
}
