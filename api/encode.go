package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// The hot answers (an open's outcome, a ping, a problem) are encoded by
// hand: encoding/json's reflection costs a few allocations and about a
// microsecond per answer, paid on every sub-request of every batch. Each
// encoder writes exactly what json.Encoder.Encode writes for the same
// value, newline included (TestHandEncodersMatchEncodingJSON holds them to
// it), so clients see no difference.

// jsonAppender is a value that encodes itself.
type jsonAppender interface {
	AppendJSON(b []byte) []byte
}

// Answers writes a handler's JSON answers and problems, as WriteJSON and
// WriteProblem do, into buffers it reuses: the hot answers then cost no
// allocation for their bytes (a buffer handed to a ResponseWriter escapes,
// so a stack buffer would be one). The zero value is ready; a server owns
// one.
type Answers struct {
	bufs sync.Pool // of *[]byte
}

func (a *Answers) buf() *[]byte {
	if b, ok := a.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 256)
	return &b
}

func (a *Answers) put(b *[]byte) {
	if cap(*b) <= 4096 { // a large answer's buffer is not kept
		*b = (*b)[:0]
		a.bufs.Put(b)
	}
}

// JSON answers v as JSON with status (see WriteJSON).
func (a *Answers) JSON(w http.ResponseWriter, status int, v any) {
	ja, ok := v.(jsonAppender)
	if !ok {
		WriteJSON(w, status, v)
		return
	}
	b := a.buf()
	*b = ja.AppendJSON((*b)[:0])
	writeJSONBytes(w, status, "application/json", *b)
	a.put(b)
}

// Problem answers err as problem JSON (see WriteProblem).
func (a *Answers) Problem(w http.ResponseWriter, err error, requestID string) {
	b := a.buf()
	*b = writeProblem(w, err, requestID, (*b)[:0])
	a.put(b)
}

// writeJSONBytes sends an encoded answer.
func writeJSONBytes(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header()["Content-Type"] = []string{contentType}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client went away; nothing to do
}

// AppendJSON appends o as JSON and a newline.
func (o OpenJSON) AppendJSON(b []byte) []byte {
	b = append(b, `{"status":`...)
	b = appendJSONString(b, o.Status)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, o.Amount, 10)
	return append(b, "}\n"...)
}

// PingJSON answers a ping.
type PingJSON struct {
	OK bool `json:"ok"`
}

// AppendJSON appends p as JSON and a newline.
func (p PingJSON) AppendJSON(b []byte) []byte {
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, p.OK)
	return append(b, "}\n"...)
}

// AppendJSON appends g as JSON and a newline.
func (g GrabJSON) AppendJSON(b []byte) []byte {
	b = append(b, `{"can_open":`...)
	b = strconv.AppendBool(b, g.CanOpen)
	if g.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, g.Reason)
	}
	return append(b, "}\n"...)
}

// AppendJSON appends p as JSON and a newline.
func (p Problem) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	b = append(b, `,"code":`...)
	b = appendJSONString(b, p.Code)
	for _, f := range [...]struct{ name, v string }{{`,"detail":`, p.Detail}, {`,"field":`, p.Field},
		{`,"instance":`, p.Instance}, {`,"request_id":`, p.RequestID}} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendJSONString(b, f.v)
		}
	}
	if l := p.Limit; l != nil {
		b = append(b, `,"limit":{"name":`...)
		b = appendJSONString(b, l.Name)
		b = append(b, `,"value":`...)
		b = strconv.AppendInt(b, l.Value, 10)
		b = append(b, `,"resets_at":`...)
		b = appendJSONString(b, l.ResetsAt)
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string as encoding/json writes it:
// printable ASCII other than the quote, the backslash and the HTML
// characters it escapes is copied; anything else goes through
// encoding/json itself (rare on the hot path: codes and statuses are
// ASCII words).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
