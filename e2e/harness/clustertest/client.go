package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// Client calls the router's API as a user would, over a keep-alive pool.
type Client struct {
	c     *Cluster
	http  *http.Client
	retry time.Duration
}

// Retrying returns a client sharing cl's pool that retries, for up to d,
// requests that got no answer (connection errors) or 503 (busy,
// unavailable), as a well-behaved app does. A send is retried only when it
// carries an Idempotency-Key, so a lost answer never becomes two packets.
func (cl *Client) Retrying(d time.Duration) *Client {
	cp := *cl
	cp.retry = d
	return &cp
}

// Response is one answer of the router (the last, after retries).
type Response[T any] struct {
	Status   int       // HTTP status; 0 when no answer came (see Err)
	Body     T         // the decoded JSON of a 2xx answer
	Code     string    // the problem code of an error answer
	Raw      []byte    // the body as received
	Err      error     // why no answer came (Status 0), or why a 2xx body did not decode
	Attempts int       // requests made
	Sent     time.Time // when the last attempt was sent
	Answered time.Time // when its answer (or error) came
}

func (r Response[T]) String() string {
	switch {
	case r.Status == 0:
		return fmt.Sprintf("no answer after %d attempt(s): %v", r.Attempts, r.Err)
	case r.Err != nil:
		return fmt.Sprintf("%d %s (%v)", r.Status, bytes.TrimSpace(r.Raw), r.Err)
	}
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Raw))
}

// Send creates a packet. key is the Idempotency-Key ("" for none).
func (cl *Client) Send(user hongbao.UserID, req hongbao.SendRequest, key string) Response[api.PacketJSON] {
	body := fmt.Sprintf(`{"total":%d,"count":%d,"type":%q,"greeting":%q}`, req.Total, req.Count, string(req.Type), req.Greeting)
	return do[api.PacketJSON](cl, user, http.MethodPost, "/v1/packets", body, key)
}

// Grab asks whether user may still open packet id.
func (cl *Client) Grab(user hongbao.UserID, id string) Response[api.GrabJSON] {
	return do[api.GrabJSON](cl, user, http.MethodPost, "/v1/packets/"+id+"/grab", "", "")
}

// Open opens packet id for user.
func (cl *Client) Open(user hongbao.UserID, id string) Response[api.OpenJSON] {
	return do[api.OpenJSON](cl, user, http.MethodPost, "/v1/packets/"+id+"/open", "", "")
}

// Detail reads packet id with its records.
func (cl *Client) Detail(user hongbao.UserID, id string) Response[api.PacketJSON] {
	return do[api.PacketJSON](cl, user, http.MethodGet, "/v1/packets/"+id, "", "")
}

// Wallet reads user's balance.
func (cl *Client) Wallet(user hongbao.UserID) Response[api.WalletJSON] {
	return do[api.WalletJSON](cl, user, http.MethodGet, "/v1/me/wallet", "", "")
}

// Received reads one page of the packets user opened (cursor "" for the
// newest; limit 0 for the server's default).
func (cl *Client) Received(user hongbao.UserID, cursor string, limit int) Response[api.HistoryJSON] {
	return do[api.HistoryJSON](cl, user, http.MethodGet, "/v1/me/received"+page(cursor, limit), "", "")
}

// Sent reads one page of the packets user sent.
func (cl *Client) Sent(user hongbao.UserID, cursor string, limit int) Response[api.HistoryJSON] {
	return do[api.HistoryJSON](cl, user, http.MethodGet, "/v1/me/sent"+page(cursor, limit), "", "")
}

func page(cursor string, limit int) string {
	q := []string{}
	if cursor != "" {
		q = append(q, "cursor="+cursor)
	}
	if limit > 0 {
		q = append(q, "limit="+strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + strings.Join(q, "&")
}

// do makes the request, retrying as cl allows, and decodes the answer.
func do[T any](cl *Client, user hongbao.UserID, method, path, body, key string) Response[T] {
	deadline := time.Now().Add(cl.retry)
	backoff := 20 * time.Millisecond
	retryable := method != http.MethodPost || path != "/v1/packets" || key != ""
	for n := 1; ; n++ {
		r := attempt[T](cl, user, method, path, body, key)
		r.Attempts = n
		again := r.Status == 0 || r.Status == http.StatusServiceUnavailable
		if !again || !retryable || time.Now().Add(backoff).After(deadline) {
			return r
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 400*time.Millisecond)
	}
}

func attempt[T any](cl *Client, user hongbao.UserID, method, path, body, key string) Response[T] {
	var r Response[T]
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, cl.c.URL()+path, rd)
	if err != nil {
		r.Err = err
		return r
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token(user))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	r.Sent = time.Now()
	resp, err := cl.http.Do(req)
	if err != nil {
		r.Err, r.Answered = err, time.Now()
		return r
	}
	r.Raw, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Answered = time.Now()
	if err != nil {
		r.Err = err
		return r
	}
	r.Status = resp.StatusCode
	if r.Status >= 200 && r.Status < 300 {
		if err := json.Unmarshal(r.Raw, &r.Body); err != nil {
			r.Err = fmt.Errorf("decode %d answer %q: %w", r.Status, r.Raw, err)
		}
		return r
	}
	var prob struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Raw, &prob) // a non-JSON error body leaves Code empty
	r.Code = prob.Code
	return r
}
