package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// FuzzRefusalAsProblem: whatever is written, a rewrite is a whole HTTP
// answer, 400 or 431, whose body is a problem with a code; and what is not
// net/http's refusal is never rewritten.
func FuzzRefusalAsProblem(f *testing.F) {
	f.Add([]byte("HTTP/1.1 400 Bad Request" + netHTTPRefusal + "400 Bad Request"))
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + netHTTPRefusal + "431 Request Header Fields Too Large"))
	f.Add([]byte("HTTP/1.1 400 Bad Request: missing required Host header" + netHTTPRefusal + "400 Bad Request: missing required Host header"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\nok"))
	f.Fuzz(func(t *testing.T, p []byte) {
		q, ok := refusalAsProblem(p)
		if !ok {
			return
		}
		line, body, found := bytes.Cut(bytes.TrimPrefix(p, []byte("HTTP/1.1 ")), []byte(netHTTPRefusal))
		if !found || (!bytes.Equal(body, line) && string(body) != "Unsupported transfer encoding") {
			t.Fatalf("rewrote %q, not net/http's refusal", p)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(q)), nil)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		rbody, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var prob Problem
		if err := json.Unmarshal(rbody, &prob); err != nil || prob.Code == "" || prob.Status != resp.StatusCode {
			t.Fatalf("body %q: %v %+v", rbody, err, prob)
		}
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}
