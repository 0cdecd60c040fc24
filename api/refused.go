package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"

	hongbao "github.com/hongbao-dev/hongbao"
)

// ErrHeadersTooLarge is the refusal of a request whose headers are over
// the server's limit (http.Server.MaxHeaderBytes).
var ErrHeadersTooLarge = &hongbao.Error{Code: "headers_too_large", Message: "the request's headers are over the server's limit"}

// malformedRequest is the code of a request net/http could not parse: its
// request line, its headers, its Host, its protocol version or its
// transfer coding. Always a 400: bad input is never a 5xx here, where
// net/http answers an unknown transfer coding 501 and an unknown major
// version 505.
const malformedRequest = "malformed_request"

// RefusedAsProblems returns ln with its connections answering, as problem
// JSON with a code, what net/http refuses before any handler runs: a
// request that does not parse (400) and headers over the limit (431).
// net/http writes those answers itself, as plain text, straight to the
// connection; each is one write of a status line followed at once by
// net/http's own header block, which no answer of a handler has (a
// handler's answer carries a Date, and net/http sorts Connection before
// Content-Type), so they are told apart by their bytes and rewritten.
// Only HTTP/1.x without TLS: under TLS the bytes seen here are encrypted.
func RefusedAsProblems(ln net.Listener) net.Listener { return refusingListener{ln} }

type refusingListener struct{ net.Listener }

func (l refusingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusingConn{Conn: c}, nil
}

// refusingConn rewrites net/http's own refusals as they are written.
type refusingConn struct{ net.Conn }

func (c *refusingConn) Write(p []byte) (int, error) {
	if q, ok := refusalAsProblem(p); ok {
		if _, err := c.Conn.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite keeps net/http's half close after a 431 (it asks the
// connection for one, and a wrapper would hide the TCP connection's).
func (c *refusingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// netHTTPRefusal is what follows the status line of every answer net/http
// writes before a handler (net/http's server.go, conn.serve).
const netHTTPRefusal = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// refusalAsProblem returns the problem answer for p when p is one of
// net/http's plain-text refusals, and false for anything else.
func refusalAsProblem(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil, false
	}
	// Only the status line is read: every answer of a handler passes
	// here, and its body need not be scanned.
	end := bytes.Index(rest, []byte("\r\n"))
	if end < 3 || !bytes.HasPrefix(rest[end:], []byte(netHTTPRefusal)) {
		return nil, false
	}
	line := rest[:end]
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil {
		return nil, false
	}
	// And the whole write is the refusal: its body is its status line
	// again (or, for 501, net/http's reason), so no piece of a stream
	// that happens to begin so is taken for one.
	if body := rest[end+len(netHTTPRefusal):]; !bytes.Equal(body, line) &&
		(status != http.StatusNotImplemented || string(body) != "Unsupported transfer encoding") {
		return nil, false
	}
	var refusal error = ErrHeadersTooLarge
	if status != http.StatusRequestHeaderFieldsTooLarge {
		detail := "the request could not be parsed"
		// net/http's reason, when it gives one: "400 Bad Request: missing
		// required Host header", "501 Not Implemented" for a transfer
		// coding it does not know.
		if _, why, ok := bytes.Cut(line, []byte(": ")); ok {
			detail += ": " + string(why)
		} else if status == http.StatusNotImplemented {
			detail += ": unsupported transfer encoding"
		}
		refusal = &hongbao.Error{Code: malformedRequest, Message: detail}
	}
	prob := ProblemOf(refusal, "")
	body := prob.AppendJSON(nil)
	q := make([]byte, 0, 160+len(body))
	q = append(q, "HTTP/1.1 "...)
	q = strconv.AppendInt(q, int64(prob.Status), 10)
	q = append(q, ' ')
	q = append(q, http.StatusText(prob.Status)...)
	q = append(q, "\r\nConnection: close\r\nContent-Type: application/problem+json\r\nContent-Length: "...)
	q = strconv.AppendInt(q, int64(len(body)), 10)
	q = append(q, "\r\n\r\n"...)
	return append(q, body...), true
}
