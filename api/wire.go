package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	hongbao "github.com/hongbao-dev/hongbao"
)

// MaxBody bounds request bodies; larger ones are answered 413.
const MaxBody = 64 << 10

// Problems with the request itself.
var (
	ErrMalformedJSON = &hongbao.InvalidError{Code: "malformed_json", Field: "body", Message: "is not a JSON object"}
	ErrBodyTooLarge  = &hongbao.Error{Code: "body_too_large", Message: fmt.Sprintf("the body exceeds %d bytes", MaxBody)}
)

var integer = regexp.MustCompile(`^-?[0-9]+$`)

// sendFields are the fields of a send body.
var sendFields = []string{"total", "count", "type", "greeting", "audience"}

// DecodeSend reads a send body strictly: one JSON object (see CheckJSON:
// valid UTF-8, no key twice, nothing after it), total and count JSON
// integers (no fraction, exponent or string), type and greeting strings,
// no null and no other field, so a client bug cannot move money by
// accident. Read errors are the client's: see BodyError.
func DecodeSend(body io.Reader) (hongbao.SendRequest, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return hongbao.SendRequest{}, BodyError(err)
	}
	if err := CheckJSON(raw); err != nil {
		return hongbao.SendRequest{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return hongbao.SendRequest{}, ErrMalformedJSON
	}
	// Fields are checked in a fixed order, so a body with several
	// problems always gets the same code.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(sendFields, k) {
			return hongbao.SendRequest{}, &hongbao.InvalidError{Code: "unknown_field", Field: k, Message: "is not a field of a packet"}
		}
		if bytes.Equal(bytes.TrimSpace(fields[k]), []byte("null")) {
			return hongbao.SendRequest{}, &hongbao.InvalidError{Code: "null_value", Field: k, Message: "must not be null (leave it out instead, if optional)"}
		}
	}
	r := hongbao.SendRequest{Type: hongbao.Random}
	var err2 error
	if r.Total, err2 = intField(fields["total"], "total", "invalid_total"); err2 != nil {
		return r, err2
	}
	n, err := intField(fields["count"], "count", "invalid_count")
	if err != nil {
		return r, err
	}
	r.Count = int(min(n, 1<<31-1)) // anything that large is over every limit; Validate names it
	if v, ok := fields["type"]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return r, &hongbao.InvalidError{Code: "invalid_type", Field: "type", Message: `must be "random" or "fixed"`}
		}
		r.Type = hongbao.Type(s)
	}
	if v, ok := fields["greeting"]; ok {
		if json.Unmarshal(v, &r.Greeting) != nil || !utf8.ValidString(r.Greeting) {
			return r, &hongbao.InvalidError{Code: "invalid_greeting", Field: "greeting", Message: "must be a UTF-8 string"}
		}
	}
	if v, ok := fields["audience"]; ok {
		if r.Audience, err = decodeAudience(v); err != nil {
			return r, err
		}
	}
	return r, nil
}

// decodeAudience reads {"users":["43","44"]}: user IDs as decimal strings
// (as everywhere in the API), each once; its size is Limits.Validate's.
func decodeAudience(v json.RawMessage) (hongbao.Audience, error) {
	var a map[string]json.RawMessage
	if json.Unmarshal(v, &a) != nil || a == nil {
		return nil, &hongbao.InvalidError{Code: "invalid_audience", Field: "audience", Message: `must be an object {"users":[...]}`}
	}
	for k := range a {
		if k != "users" {
			return nil, &hongbao.InvalidError{Code: "unknown_field", Field: "audience." + k, Message: "is not a field of an audience"}
		}
	}
	var ids []string
	if json.Unmarshal(a["users"], &ids) != nil || ids == nil {
		return nil, &hongbao.InvalidError{Code: "invalid_audience", Field: "audience.users", Message: "must be an array of user ids (decimal strings)"}
	}
	users := make([]hongbao.UserID, len(ids))
	for i, id := range ids {
		u, err := hongbao.ParseUserID(id)
		if err != nil {
			return nil, &hongbao.InvalidError{Code: "invalid_audience_user", Field: "audience.users",
				Message: fmt.Sprintf("%q is not a user id (a positive decimal integer in a string)", id)}
		}
		users[i] = u
	}
	return hongbao.NewAudience(users)
}

// intField parses a required positive JSON integer; absent, it is an error
// of its own code too.
func intField(v json.RawMessage, field, code string) (int64, error) {
	bad := &hongbao.InvalidError{Code: code, Field: field, Message: "must be a positive integer (fen for amounts)"}
	v = bytes.TrimSpace(v)
	if !integer.Match(v) {
		return 0, bad
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, bad
	}
	return n, nil
}

// TimeFormat is RFC 3339 with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// PacketJSON is a packet as the API shows it.
type PacketJSON struct {
	ID              string       `json:"id"`
	Sender          string       `json:"sender"`
	Total           int64        `json:"total"`
	Count           int          `json:"count"`
	Type            string       `json:"type"`
	Greeting        string       `json:"greeting"`
	Status          string       `json:"status"`
	RemainingCount  int          `json:"remaining_count"`
	RemainingAmount int64        `json:"remaining_amount"`
	CreatedAt       string       `json:"created_at"`
	ExpiresAt       string       `json:"expires_at"`
	Records         []RecordJSON `json:"records"`
	Best            string       `json:"best,omitempty"`
	// Audience is who may open the packet, nil for anyone. Its users are
	// listed to the sender only (ForViewer); others see its size.
	Audience *AudienceJSON `json:"audience,omitempty"`
}

// AudienceJSON is a packet's audience as the API shows it.
type AudienceJSON struct {
	Size     int      `json:"size"`
	Users    []string `json:"users,omitempty"`        // the sender's view only
	Includes *bool    `json:"includes_you,omitempty"` // another viewer's: may they open it
}

// ForViewer shows p's audience as viewer may see it: the list to the
// sender, to anyone else its size and whether it names them.
func (j PacketJSON) ForViewer(p *hongbao.Packet, viewer hongbao.UserID) PacketJSON {
	if p.Audience == nil {
		return j
	}
	a := &AudienceJSON{Size: len(p.Audience)}
	if viewer == p.Sender {
		a.Users = make([]string, len(p.Audience))
		for i, u := range p.Audience {
			a.Users[i] = u.String()
		}
	} else {
		in := p.Audience.Admits(viewer)
		a.Includes = &in
	}
	j.Audience = a
	return j
}

// RecordJSON is one opener's share.
type RecordJSON struct {
	User   string `json:"user"`
	Amount int64  `json:"amount"`
	At     string `json:"at"`
}

// Packet renders p and its records as seen at now in loc.
func Packet(p *hongbao.Packet, recs []hongbao.Record, now time.Time, loc *time.Location) PacketJSON {
	j := PacketJSON{
		ID: p.ID.String(), Sender: p.Sender.String(), Total: p.Total, Count: p.Count, Type: string(p.Type),
		Greeting: p.Greeting, Status: string(p.StatusAt(now)), RemainingCount: p.RemainingCount,
		RemainingAmount: p.RemainingAmount, CreatedAt: p.CreatedAt.In(loc).Format(TimeFormat),
		ExpiresAt: p.ExpiresAt.In(loc).Format(TimeFormat), Records: make([]RecordJSON, 0, len(recs)),
	}
	for _, r := range recs {
		j.Records = append(j.Records, RecordJSON{User: r.User.String(), Amount: r.Amount, At: r.At.In(loc).Format(TimeFormat)})
	}
	if best, ok := hongbao.Best(recs); ok && p.RemainingCount == 0 {
		j.Best = best.User.String()
	}
	return j
}

// OpenJSON answers an open.
type OpenJSON struct {
	Status string `json:"status"`
	Amount int64  `json:"amount"`
}

// GrabJSON answers a grab.
type GrabJSON struct {
	CanOpen bool   `json:"can_open"`
	Reason  string `json:"reason,omitempty"`
}

// WalletJSON answers GET /v1/me/wallet.
type WalletJSON struct {
	User    string `json:"user"`
	Balance int64  `json:"balance"`
}

// HistoryJSON is one page of a user's received or sent packets.
type HistoryJSON struct {
	Items      []HistoryItem `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// HistoryItem is one packet in a user's history.
type HistoryItem struct {
	Packet string `json:"packet"`
	Amount int64  `json:"amount"`
	At     string `json:"at"`
}

// Query parses a request's query string, refusing what url.Values would
// pass over in silence: a malformed string (a bad escape, a ';' between
// parameters), whose parameters it drops, and a parameter given more than
// once, of which it keeps the first. Either is 400 invalid_query, as any
// other bad input: a client that meant ?limit=5 and sent ?limit=%35%zz
// must not be answered 20 entries as if it had asked for nothing.
func Query(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &hongbao.InvalidError{Code: "invalid_query", Field: "query", Message: "the query string is malformed: " + err.Error()}
	}
	for k, vs := range q {
		if len(vs) > 1 {
			if len(k) > 64 {
				k = k[:64] + "..."
			}
			return nil, &hongbao.InvalidError{Code: "invalid_query", Field: k, Message: "given more than once"}
		}
	}
	return q, nil
}

// Page reads ?cursor=&limit= (limit 1..100, default 20).
func Page(q url.Values) (cursor int64, limit int, err error) {
	limit = 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, 0, &hongbao.InvalidError{Code: "invalid_limit", Field: "limit", Message: "must be an integer from 1 to 100"}
		}
		limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, &hongbao.InvalidError{Code: "invalid_cursor", Field: "cursor", Message: "is not a cursor from a previous page"}
		}
		cursor = n
	}
	return cursor, limit, nil
}
