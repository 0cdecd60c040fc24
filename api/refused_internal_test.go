package api

import (
	"bytes"
	"strconv"
	"testing"
)

// Only a whole refusal is rewritten: its body repeats its status line (or,
// for 501, is net/http's reason). A write that merely begins like one (a
// piece of some stream) passes as it is.
func TestRefusalAsProblemOnlyWhole(t *testing.T) {
	for _, c := range []struct {
		p    string
		want int // 0: not rewritten
	}{
		{"HTTP/1.1 400 Bad Request" + netHTTPRefusal + "400 Bad Request", 400},
		{"HTTP/1.1 431 Request Header Fields Too Large" + netHTTPRefusal + "431 Request Header Fields Too Large", 431},
		{"HTTP/1.1 501 Not Implemented" + netHTTPRefusal + "Unsupported transfer encoding", 400},
		{"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + netHTTPRefusal + "505 HTTP Version Not Supported: unsupported protocol version", 400},
		{"HTTP/1.1 400 Bad Request" + netHTTPRefusal, 0},
		{"HTTP/1.1 400 Bad Request" + netHTTPRefusal + "400 Bad Request and more of a stream", 0},
		{"HTTP/1.1 400 Bad Request" + netHTTPRefusal + "Unsupported transfer encoding", 0},
		{"HTTP/1.1 431 Request Header Fields Too Large" + netHTTPRefusal + "400 Bad Request", 0},
	} {
		q, ok := refusalAsProblem([]byte(c.p))
		switch {
		case ok != (c.want != 0):
			t.Errorf("%q: rewritten %v, want %v", c.p, ok, c.want != 0)
		case ok && !bytes.HasPrefix(q, []byte("HTTP/1.1 "+strconv.Itoa(c.want)+" ")):
			t.Errorf("%q: rewritten as %q, want a %d", c.p, q, c.want)
		}
	}
}
