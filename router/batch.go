package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// errNoBatch sends a request the single way: the server does not know the
// batch endpoint (a server older than its router, during an upgrade).
var errNoBatch = errors.New("server takes no batches")

// errUnbatchable sends a request the single way: it is larger than a
// batch's sub-request may be (api.BatchItem.Fits), and in a batch it would
// have the server refuse the whole batch, the other clients' requests too.
var errUnbatchable = errors.New("request too large for a batch")

// tryBatched makes one attempt at server srv as a sub-request of a batch,
// bounded like a single attempt by the router's timeout (the coalescer's). Its answer is
// what the server's handler answered it alone; a failed batch is a failed
// attempt (forwardTo then acts as for a failed exchange).
func (rt *Router) tryBatched(r *http.Request, srv string, user hongbao.UserID, body []byte, extra map[string]string) (*response, error) {
	item := api.BatchItem{Method: r.Method, Target: r.URL.RequestURI(), User: user,
		RequestID: api.RequestID(r.Context()), Body: body}
	for _, h := range []string{"Content-Type", "Idempotency-Key"} {
		if v := r.Header.Get(h); v != "" {
			item.Header = append(item.Header, api.Header{Name: h, Value: v})
		}
	}
	for k, v := range extra {
		item.Header = append(item.Header, api.Header{Name: http.CanonicalHeaderKey(k), Value: v})
	}
	if !item.Fits() {
		return nil, errUnbatchable
	}
	a, err := rt.coalesce.do(r.Context(), srv, item)
	var refused *batchRefusal
	if errors.As(err, &refused) {
		if refused.resp.status == http.StatusNotFound {
			return nil, errNoBatch
		}
		return refused.resp, nil
	}
	if err != nil {
		return nil, err
	}
	return &response{status: a.Status, fields: a.Header, body: a.Body, code: codeOfProblem(api.Get(a.Header, "Content-Type"), a.Body)}, nil
}

// batchRefusal is a server's answer to a batch as a whole (not 200): each
// of its sub-requests gets it, as if each had been sent alone and refused
// the same way (403 replayed, 503 busy, ...).
type batchRefusal struct{ resp *response }

func (e *batchRefusal) Error() string {
	return fmt.Sprintf("batch refused: %d %s", e.resp.status, e.resp.code)
}

// sendBatch is the coalescer's exchange: one POST of the batch, signed
// over its whole body, to srv; each answer is handed to answer as it
// arrives. An error leaves the items not answered yet without an answer.
func (rt *Router) sendBatch(ctx context.Context, srv string, items []api.BatchItem, answer func(int, api.BatchAnswer)) error {
	size := 16
	for i := range items {
		size += items[i].Size()
	}
	body := api.AppendBatch(make([]byte, 0, size), items)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv+api.BatchPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	rt.internal.SignBatch(req, body) // a fresh nonce, this server as the target, the body's hash
	resp, err := rt.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxBody))
		if err != nil {
			return fmt.Errorf("batch refusal from %s: %w", srv, err)
		}
		return &batchRefusal{resp: &response{status: resp.StatusCode, header: resp.Header, body: raw,
			code: codeOfProblem(resp.Header.Get("Content-Type"), raw)}}
	}
	ar := api.NewAnswerReader(resp.Body, len(items))
	for {
		i, a, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch answer from %s: %w", srv, err)
		}
		answer(i, a)
	}
}
