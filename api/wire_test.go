package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	hongbao "github.com/hongbao-dev/hongbao"
)

// decodeCode returns the code of DecodeSend's error, or "" when it accepts.
func decodeCode(t *testing.T, body string) (hongbao.SendRequest, string) {
	t.Helper()
	r, err := DecodeSend(strings.NewReader(body))
	if err == nil {
		return r, ""
	}
	var ie *hongbao.InvalidError
	var de *hongbao.Error
	if !errors.As(err, &ie) && !errors.As(err, &de) {
		t.Fatalf("DecodeSend(%q) = %v: not a domain error", body, err)
	}
	return r, hongbao.Code(err)
}

func TestDecodeSend(t *testing.T) {
	tests := []struct {
		name string
		body string
		want hongbao.SendRequest // checked when code is ""
		code string
	}{
		{"valid", `{"total":1000,"count":10,"type":"random","greeting":"恭喜发财"}`,
			hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random, Greeting: "恭喜发财"}, ""},
		{"valid fixed", `{"total":1000,"count":10,"type":"fixed"}`,
			hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Fixed}, ""},
		{"default type is random", `{"total":1000,"count":10}`,
			hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random}, ""},
		{"whitespace", " \n{ \"count\" : 3 ,\t\"total\" : 30 }\n",
			hongbao.SendRequest{Total: 30, Count: 3, Type: hongbao.Random}, ""},
		{"max int64 total", `{"total":9223372036854775807,"count":1}`,
			hongbao.SendRequest{Total: 9223372036854775807, Count: 1, Type: hongbao.Random}, ""},
		// Counts beyond int32 are clamped so that Validate names them.
		{"huge count clamped", `{"total":1,"count":99999999999}`,
			hongbao.SendRequest{Total: 1, Count: 1<<31 - 1, Type: hongbao.Random}, ""},
		// DecodeSend checks syntax only; Validate rejects unknown types.
		{"unknown type string", `{"total":1000,"count":10,"type":"lucky"}`,
			hongbao.SendRequest{Total: 1000, Count: 10, Type: "lucky"}, ""},
		{"audience", `{"total":300,"count":3,"audience":{"users":["45","43","44"]}}`,
			hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Random, Audience: hongbao.Audience{43, 44, 45}}, ""},
		{"exclusive", `{"total":888,"count":1,"audience":{"users":["43"]}}`,
			hongbao.SendRequest{Total: 888, Count: 1, Type: hongbao.Random, Audience: hongbao.Audience{43}}, ""},
		{"duplicate audience user", `{"total":300,"count":3,"audience":{"users":["43","44","43"]}}`, hongbao.SendRequest{}, "duplicate_audience_user"},
		{"numeric audience user", `{"total":300,"count":1,"audience":{"users":[43]}}`, hongbao.SendRequest{}, "invalid_audience"},
		{"zero audience user", `{"total":300,"count":1,"audience":{"users":["0"]}}`, hongbao.SendRequest{}, "invalid_audience_user"},
		{"leading zero audience user", `{"total":300,"count":1,"audience":{"users":["043"]}}`, hongbao.SendRequest{}, "invalid_audience_user"},
		{"negative audience user", `{"total":300,"count":1,"audience":{"users":["-43"]}}`, hongbao.SendRequest{}, "invalid_audience_user"},
		{"empty audience", `{"total":300,"count":1,"audience":{"users":[]}}`, hongbao.SendRequest{}, "empty_audience"},
		{"audience without users", `{"total":300,"count":1,"audience":{}}`, hongbao.SendRequest{}, "invalid_audience"},
		{"audience a list", `{"total":300,"count":1,"audience":["43"]}`, hongbao.SendRequest{}, "invalid_audience"},
		{"audience null", `{"total":300,"count":1,"audience":null}`, hongbao.SendRequest{}, "null_value"},
		{"audience unknown field", `{"total":300,"count":1,"audience":{"users":["43"],"groups":["g"]}}`, hongbao.SendRequest{}, "unknown_field"},
		{"escaped greeting", `{"total":1,"count":1,"greeting":"a\"b\u00e9\n"}`,
			hongbao.SendRequest{Total: 1, Count: 1, Type: hongbao.Random, Greeting: "a\"bé\n"}, ""},

		{"negative total", `{"total":-100,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"zero total", `{"total":0,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"minus zero total", `{"total":-0,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"fractional total", `{"total":10.5,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"integral float total", `{"total":100.0,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"exponent total", `{"total":1e3,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"capital exponent total", `{"total":1E3,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"string total", `{"total":"100","count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"null total", `{"total":null,"count":10}`, hongbao.SendRequest{}, "null_value"},
		{"bool total", `{"total":true,"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"object total", `{"total":{},"count":10}`, hongbao.SendRequest{}, "invalid_total"},
		{"overflowing total", `{"total":99999999999999999999,"count":10}`, hongbao.SendRequest{}, "invalid_total"},

		{"negative count", `{"total":100,"count":-1}`, hongbao.SendRequest{}, "invalid_count"},
		{"zero count", `{"total":100,"count":0}`, hongbao.SendRequest{}, "invalid_count"},
		{"fractional count", `{"total":100,"count":10.5}`, hongbao.SendRequest{}, "invalid_count"},
		{"exponent count", `{"total":100,"count":1e3}`, hongbao.SendRequest{}, "invalid_count"},
		{"string count", `{"total":100,"count":"100"}`, hongbao.SendRequest{}, "invalid_count"},
		{"array count", `{"total":100,"count":[1]}`, hongbao.SendRequest{}, "invalid_count"},
		{"overflowing count", `{"total":100,"count":99999999999999999999}`, hongbao.SendRequest{}, "invalid_count"},

		{"number type", `{"total":100,"count":1,"type":1}`, hongbao.SendRequest{}, "invalid_type"},
		{"bool type", `{"total":100,"count":1,"type":true}`, hongbao.SendRequest{}, "invalid_type"},
		{"object type", `{"total":100,"count":1,"type":{"a":1}}`, hongbao.SendRequest{}, "invalid_type"},
		{"number greeting", `{"total":100,"count":1,"greeting":5}`, hongbao.SendRequest{}, "invalid_greeting"},

		{"malformed", `{"total":100,`, hongbao.SendRequest{}, "malformed_json"},
		{"empty body", ``, hongbao.SendRequest{}, "malformed_json"},
		{"array", `[{"total":100,"count":1}]`, hongbao.SendRequest{}, "malformed_json"},
		{"null", `null`, hongbao.SendRequest{}, "malformed_json"},
		{"string", `"hi"`, hongbao.SendRequest{}, "malformed_json"},
		{"number", `100`, hongbao.SendRequest{}, "malformed_json"},
		{"trailing data", `{"total":100,"count":1} {}`, hongbao.SendRequest{}, "trailing_data"},
		{"leading zero", `{"total":0100,"count":1}`, hongbao.SendRequest{}, "malformed_json"},
		{"single quotes", `{'total':100}`, hongbao.SendRequest{}, "malformed_json"},

		{"unknown field", `{"total":100,"count":1,"currency":"CNY"}`, hongbao.SendRequest{}, "unknown_field"},
		{"field names are case sensitive", `{"Total":100,"count":1}`, hongbao.SendRequest{}, "unknown_field"},
	}
	for _, tt := range tests {
		got, code := decodeCode(t, tt.body)
		if code != tt.code {
			t.Errorf("%s: DecodeSend(%s) code = %q, want %q", tt.name, tt.body, code, tt.code)
			continue
		}
		if tt.code == "" && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: DecodeSend(%s) = %+v, want %+v", tt.name, tt.body, got, tt.want)
		}
	}
}

// TestDecodeSendErrorFields checks Field and the status of decode errors.
func TestDecodeSendErrorFields(t *testing.T) {
	tests := []struct {
		body, field string
		status      int
	}{
		{`{"total":1.5,"count":1}`, "total", 400},
		{`{"total":1,"count":"1"}`, "count", 400},
		{`{"total":1,"count":1,"type":7}`, "type", 400},
		{`{"total":1,"count":1,"colour":"red"}`, "colour", 400},
		{`[]`, "body", 400},
	}
	for _, tt := range tests {
		_, err := DecodeSend(strings.NewReader(tt.body))
		var ie *hongbao.InvalidError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("DecodeSend(%s) = %v, want field %q", tt.body, err, tt.field)
		}
		if got := Status(err); got != tt.status {
			t.Errorf("Status(DecodeSend(%s)) = %d, want %d", tt.body, got, tt.status)
		}
	}
}

// TestDecodeThenValidate: what DecodeSend leaves to Validate is rejected
// there with the code a client expects.
func TestDecodeThenValidate(t *testing.T) {
	l := hongbao.DefaultLimits()
	tests := []struct {
		body string
		code string
	}{
		{`{"total":1000,"count":10,"type":"lucky"}`, "invalid_type"},
		{`{"total":1000,"count":10,"type":""}`, "invalid_type"},
		{`{"total":1000,"count":10,"type":null}`, "null_value"},
		{`{"total":1,"count":99999999999}`, "count_over_limit"},
		{`{"total":9223372036854775807,"count":1}`, "total_over_limit"},
		{`{}`, "invalid_total"},
		{`{"total":100}`, "invalid_count"},
		{`{"count":10}`, "invalid_total"},
		{`{"total":1000,"count":10}`, ""},
	}
	for _, tt := range tests {
		r, err := DecodeSend(strings.NewReader(tt.body))
		if err == nil {
			err = l.Validate(r)
		}
		code := ""
		if err != nil {
			code = hongbao.Code(err)
		}
		if code != tt.code {
			t.Errorf("DecodeSend+Validate(%s) = %q (%v), want %q", tt.body, code, err, tt.code)
		}
	}
}

// TestDecodeSendDeterministicCode: the same bad body must always be
// answered with the same code. DecodeSend ranges over a map, so with two
// bad fields the code it reports depends on Go's random map order.
func TestDecodeSendDeterministicCode(t *testing.T) {
	for _, body := range []string{
		`{"total":-1,"count":-1}`,
		`{"total":1.5,"count":1,"type":5,"greeting":7,"x":1}`,
		`{"zzz":1,"total":"1"}`,
	} {
		_, first := decodeCode(t, body)
		for range 200 {
			if _, code := decodeCode(t, body); code != first {
				t.Errorf("DecodeSend(%s) answered both %q and %q", body, first, code)
				break
			}
		}
	}
}

func TestDecodeSendBodyLimit(t *testing.T) {
	valid := `{"total":1000,"count":10,"greeting":""}`
	pad := func(n int) string { // valid JSON of exactly n bytes
		return valid[:len(valid)-1] + strings.Repeat(" ", n-len(valid)) + "}"
	}
	for _, w := range []http.ResponseWriter{httptest.NewRecorder(), nil} {
		// Exactly MaxBody bytes is accepted.
		body := pad(MaxBody)
		if len(body) != MaxBody {
			t.Fatalf("pad: %d bytes", len(body))
		}
		if _, err := DecodeSend(http.MaxBytesReader(w, io.NopCloser(strings.NewReader(body)), MaxBody)); err != nil {
			t.Errorf("body of MaxBody bytes: %v", err)
		}
		// One byte more is body_too_large (413), whatever the JSON is.
		for _, body := range []string{pad(MaxBody + 1), strings.Repeat("x", 10*MaxBody)} {
			_, err := DecodeSend(http.MaxBytesReader(w, io.NopCloser(strings.NewReader(body)), MaxBody))
			if !errors.Is(err, ErrBodyTooLarge) || hongbao.Code(err) != "body_too_large" {
				t.Errorf("body of %d bytes: %v, want body_too_large", len(body), err)
			}
			if Status(err) != http.StatusRequestEntityTooLarge {
				t.Errorf("body of %d bytes: status %d, want 413", len(body), Status(err))
			}
		}
	}
}

func TestDecodeSendReadError(t *testing.T) {
	// The client's body is cut short: its fault, a 400 with a code.
	_, err := DecodeSend(iotest.ErrReader(io.ErrUnexpectedEOF))
	if !errors.Is(err, ErrBodyTruncated) {
		t.Fatalf("DecodeSend(failing reader) = %v, want truncated_body", err)
	}
	if Status(err) != http.StatusBadRequest {
		t.Errorf("status of a read error = %d, want 400", Status(err))
	}
}

func TestPacketJSON(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2025, 3, 31, 17, 0, 0, 0, time.UTC)
	p := &hongbao.Packet{ID: 165143170254970885, Sender: 9007199254740993, Type: hongbao.Random, Total: 300, Count: 2,
		Greeting: "hi", RemainingAmount: 0, RemainingCount: 0, CreatedAt: created, ExpiresAt: created.Add(24 * time.Hour)}
	recs := []hongbao.Record{
		{User: 11, Amount: 100, At: created.Add(time.Second), Seq: 1},
		{User: 12, Amount: 200, At: created.Add(1500 * time.Millisecond), Seq: 2},
	}
	j := Packet(p, recs, created.Add(time.Minute), shanghai)
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"165143170254970885","sender":"9007199254740993","total":300,"count":2,"type":"random",` +
		`"greeting":"hi","status":"sold_out","remaining_count":0,"remaining_amount":0,` +
		`"created_at":"2025-04-01T01:00:00.000+08:00","expires_at":"2025-04-02T01:00:00.000+08:00",` +
		`"records":[{"user":"11","amount":100,"at":"2025-04-01T01:00:01.000+08:00"},` +
		`{"user":"12","amount":200,"at":"2025-04-01T01:00:01.500+08:00"}],"best":"12"}`
	if string(raw) != want {
		t.Errorf("Packet JSON =\n%s\nwant\n%s", raw, want)
	}

	// While shares are left there is no best, and records is [] not null.
	p.RemainingCount, p.RemainingAmount = 2, 300
	raw, _ = json.Marshal(Packet(p, nil, created.Add(time.Minute), shanghai))
	if !bytes.Contains(raw, []byte(`"records":[]`)) || bytes.Contains(raw, []byte(`"best"`)) ||
		!bytes.Contains(raw, []byte(`"status":"active"`)) {
		t.Errorf("active packet JSON = %s", raw)
	}
}

func FuzzDecodeSend(f *testing.F) {
	for _, s := range []string{
		`{"total":1000,"count":10,"type":"random","greeting":"hi"}`,
		`{"total":1000,"count":10,"type":"fixed"}`,
		`{"total":-1,"count":0}`,
		`{"total":1e3}`,
		`{"total":"100"}`,
		`{"count":99999999999}`,
		`{"type":null}`,
		`{}`,
		`[]`,
		`null`,
		``,
		`{"greeting":"\ud800"}`,
		"{\"greeting\":\"\xff\"}",
		`{"total":1,"total":-1}`,
	} {
		f.Add([]byte(s))
	}
	l := hongbao.DefaultLimits()
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeSend(bytes.NewReader(body))
		if err != nil {
			if c := hongbao.Code(err); c == "internal" {
				t.Fatalf("DecodeSend(%q) = %v: no domain code", body, err)
			}
			if s := Status(err); s != http.StatusBadRequest {
				t.Fatalf("DecodeSend(%q) = %v: status %d, want 400", body, err, s)
			}
			return
		}
		// Only valid UTF-8 gets through (CheckJSON looks at the raw bytes).
		if !utf8.Valid(body) {
			t.Fatalf("DecodeSend accepted invalid UTF-8 %q", body)
		}
		// DecodeSend leaves absent fields zero for Validate to name;
		// present ones are positive.
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) != nil {
			t.Fatalf("DecodeSend accepted %q, which is not a JSON object", body)
		}
		if _, ok := fields["total"]; ok && r.Total <= 0 {
			t.Fatalf("DecodeSend(%q): total %d", body, r.Total)
		}
		if _, ok := fields["count"]; ok && r.Count <= 0 {
			t.Fatalf("DecodeSend(%q): count %d", body, r.Count)
		}
		if r.Total < 0 || r.Count < 0 {
			t.Fatalf("DecodeSend(%q) = %+v: negative", body, r)
		}
		if l.Validate(r) == nil && (r.Total <= 0 || r.Count <= 0 || r.Total < int64(r.Count) || !r.Type.Valid()) {
			t.Fatalf("DecodeSend+Validate accepted %q as %+v", body, r)
		}
	})
}
