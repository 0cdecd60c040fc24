package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestDecodeSendStrict: bodies encoding/json would take with a meaning
// the client may not have meant are refused with a code naming why.
func TestDecodeSendStrict(t *testing.T) {
	tests := []struct {
		name, body, code, field string
	}{
		{"duplicate total", `{"total":1,"count":1,"total":1000}`, "duplicate_key", "total"},
		{"escaped duplicate", `{"total":1,"count":1,"tot\u0061l":1000}`, "duplicate_key", "total"},
		{"escaped first", `{"\u0074otal":1,"count":1,"total":1000}`, "duplicate_key", "total"},
		{"duplicate count", `{"count":1,"total":5,"count":5}`, "duplicate_key", "count"},
		{"duplicate greeting", `{"total":1,"count":1,"greeting":"a","greeting":"b"}`, "duplicate_key", "greeting"},
		{"duplicate nested", `{"total":1,"count":1,"greeting":{"a":1,"a":2}}`, "duplicate_key", "a"},
		{"duplicate in array", `{"total":1,"count":1,"greeting":[{"b":1,"b":1}]}`, "duplicate_key", "b"},
		{"invalid UTF-8 greeting", "{\"total\":1,\"count\":1,\"greeting\":\"\xff\"}", "invalid_utf8", "body"},
		{"overlong UTF-8", "{\"total\":1,\"count\":1,\"greeting\":\"\xc0\xaf\"}", "invalid_utf8", "body"},
		{"UTF-8 surrogate bytes", "{\"total\":1,\"count\":1,\"greeting\":\"\xed\xa0\x80\"}", "invalid_utf8", "body"},
		{"invalid UTF-8 key", "{\"total\":1,\"count\":1,\"\xfe\":1}", "invalid_utf8", "body"},
		{"invalid UTF-8 outside strings", "{\"total\":1,\"count\":1}\xff", "invalid_utf8", "body"},
		{"lone high surrogate", `{"total":1,"count":1,"greeting":"\ud800"}`, "invalid_utf8", "body"},
		{"lone low surrogate", `{"total":1,"count":1,"greeting":"\uDC00x"}`, "invalid_utf8", "body"},
		{"reversed surrogates", `{"total":1,"count":1,"greeting":"\udc00\ud800"}`, "invalid_utf8", "body"},
		{"trailing object", `{"total":1,"count":1}{}`, "trailing_data", "body"},
		{"trailing garbage", `{"total":1,"count":1} x`, "trailing_data", "body"},
		{"trailing brace", `{"total":1,"count":1}}`, "trailing_data", "body"},
		{"null count", `{"total":1,"count":null}`, "null_value", "count"},
		{"null type", `{"total":1,"count":1,"type":null}`, "null_value", "type"},
		{"null greeting", `{"total":1,"count":1,"greeting":null}`, "null_value", "greeting"},
		{"deep nesting", `{"total":1,"count":1,"greeting":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, "malformed_json", "body"},
		{"unknown field", `{"total":1,"count":1,"memo":"x"}`, "unknown_field", "memo"},
	}
	for _, tt := range tests {
		_, err := DecodeSend(strings.NewReader(tt.body))
		var ie *hongbao.InvalidError
		if hongbao.Code(err) != tt.code || Status(err) != http.StatusBadRequest {
			t.Errorf("%s: DecodeSend(%q) = %v (status %d), want 400 %s", tt.name, tt.body, err, Status(err), tt.code)
		} else if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("%s: DecodeSend(%q) = %v, want field %q", tt.name, tt.body, err, tt.field)
		}
	}
}

// TestDecodeSendStrictAccepts: what strictness must not refuse.
func TestDecodeSendStrictAccepts(t *testing.T) {
	tests := []struct {
		name, body, greeting string
	}{
		{"surrogate pair", `{"total":1,"count":1,"greeting":"\ud83e\udde7"}`, "🧧"},
		{"escaped backslash before u", `{"total":1,"count":1,"greeting":"\\ud800"}`, `\ud800`},
		{"U+FFFD itself", `{"total":1,"count":1,"greeting":"\ufffd�"}`, "\ufffd\ufffd"},
		{"trailing whitespace", "{\"total\":1,\"count\":1} \n\t", ""},
	}
	for _, tt := range tests {
		r, err := DecodeSend(strings.NewReader(tt.body))
		if err != nil || r.Greeting != tt.greeting || r.Total != 1 {
			t.Errorf("%s: DecodeSend(%q) = %+v, %v; want greeting %q", tt.name, tt.body, r, err, tt.greeting)
		}
	}
}

func TestCheckJSONType(t *testing.T) {
	tests := []struct {
		values []string
		ok     bool
	}{
		{[]string{"application/json"}, true},
		{[]string{"application/json; charset=utf-8"}, true},
		{[]string{"Application/JSON; charset=UTF-8"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"text/plain"}, false},
		{[]string{"application/x-www-form-urlencoded"}, false},
		{[]string{"application/json; charset=latin1"}, false},
		{[]string{"application/json; boundary=x"}, false},
		{[]string{"application/json;;"}, false},
		{[]string{"application/jsonx"}, false},
		{[]string{"application/json", "application/json"}, false},
	}
	for _, tt := range tests {
		h := http.Header{"Content-Type": tt.values}
		err := CheckJSONType(h)
		switch {
		case tt.ok && err != nil:
			t.Errorf("Content-Type %q: %v, want accepted", tt.values, err)
		case !tt.ok && (hongbao.Code(err) != "unsupported_media_type" || Status(err) != http.StatusUnsupportedMediaType):
			t.Errorf("Content-Type %q: %v (status %d), want 415 unsupported_media_type", tt.values, err, Status(err))
		}
	}
}
