package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Problems with a body's JSON that encoding/json lets through: money
// requests must mean one thing only.
var (
	ErrInvalidUTF8  = &hongbao.InvalidError{Code: "invalid_utf8", Field: "body", Message: "is not valid UTF-8 (raw bytes or \\u escapes)"}
	ErrTrailingData = &hongbao.InvalidError{Code: "trailing_data", Field: "body", Message: "has data after its JSON object"}
	errTooDeep      = &hongbao.InvalidError{Code: "malformed_json", Field: "body", Message: "is nested too deeply"}
)

// maxDepth bounds the nesting of a body: no request needs more than one
// level, and a deep one costs stack.
const maxDepth = 32

// CheckJSON checks that raw is one JSON object in valid UTF-8 (the raw
// bytes, before any decoder replaces a bad byte with U+FFFD, and every \u
// escape) with no key twice in any object at any depth (as decoded, so
// "tot\u0061l" is "total") and nothing after it.
func CheckJSON(raw []byte) error {
	if !utf8.Valid(raw) || !validEscapes(raw) {
		return ErrInvalidUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return ErrMalformedJSON
	}
	if err := walkObject(dec, 1); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}

// walkObject reads an object's members after its '{' through its '}'.
func walkObject(dec *json.Decoder, depth int) error {
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ErrMalformedJSON
		}
		if tok == json.Delim('}') {
			return nil
		}
		key, ok := tok.(string)
		if !ok {
			return ErrMalformedJSON
		}
		if seen[key] {
			return &hongbao.InvalidError{Code: "duplicate_key", Field: key, Message: "appears twice in one object"}
		}
		seen[key] = true
		if err := walkValue(dec, depth); err != nil {
			return err
		}
	}
}

// walkValue reads one value, descending into objects and arrays.
func walkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return ErrMalformedJSON
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= maxDepth {
		return errTooDeep
	}
	if d == '{' {
		return walkObject(dec, depth+1)
	}
	for dec.More() { // d is '[': ']' and '}' never start a value
		if err := walkValue(dec, depth+1); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return ErrMalformedJSON
	}
	return nil
}

// validEscapes reports whether every \u escape of surrogates in raw comes
// as a high surrogate followed by a low one: encoding/json turns a lone
// surrogate into U+FFFD without a word. Outside strings JSON has no
// backslash, and a malformed escape is the decoder's to refuse.
func validEscapes(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := escapedRune(raw, i)
		switch {
		case !ok:
			i++ // \" \\ \n ...: skip the escaped byte
		case r >= 0xDC00 && r <= 0xDFFF:
			return false // a low surrogate first
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := escapedRune(raw, i+6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

// escapedRune parses a \uXXXX escape at raw[i:].
func escapedRune(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range raw[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
