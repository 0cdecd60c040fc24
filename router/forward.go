package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// Tries per request: servers of the owning SET per round, and rounds (a new
// round follows a topology change announced by a 421).
const (
	serversPerRound = 3
	rounds          = 3
)

// forward sends r for packet id to the SET owning the packet's bucket,
// trying its servers in rendezvous order. Every operation forwarded is
// idempotent (a send carries the ID this router minted, an open is one
// share per user, the rest are reads), so an attempt whose outcome is
// unknown is retried on the next server without turning one open into two.
// A 421 means the topology moved: refresh it and route again.
func (rt *Router) forward(r *http.Request, user hongbao.UserID, id hongbao.PacketID, body []byte, extra map[string]string) (*response, error) {
	return rt.forwardTo(r, user, body, extra, func() []string {
		_, servers := Route(rt.topo.Current(), id, rt.health.Healthy)
		return servers
	})
}

// forwardTo tries the servers pick lists, in order, re-picking after a 421.
func (rt *Router) forwardTo(r *http.Request, user hongbao.UserID, body []byte, extra map[string]string, pick func() []string) (*response, error) {
	var lastErr error
	for round := range rounds {
		if round > 0 {
			// A moved bucket's new owner may learn of it a moment later.
			time.Sleep(time.Duration(round*round) * 100 * time.Millisecond)
		}
		servers := pick()
		moved := false
		for _, srv := range servers[:min(len(servers), serversPerRound)] {
			resp, err := rt.try(r, srv, user, body, extra)
			if err != nil {
				if r.Context().Err() != nil {
					return nil, fmt.Errorf("client gone: %w", r.Context().Err())
				}
				lastErr = err
				if isDial(err) {
					rt.health.MarkDown(srv)
				}
				rt.log.Warn("server attempt failed; trying the next", zap.String("server", srv),
					zap.String("request_id", api.RequestID(r.Context())), zap.Error(err))
				continue
			}
			if resp.code == "replayed" {
				// The transport resent an attempt on a new connection (it
				// does so for idempotent requests); sign again elsewhere.
				lastErr = fmt.Errorf("server %s: %s", srv, resp.code)
				continue
			}
			if resp.status == http.StatusMisdirectedRequest {
				moved = true
				if err := rt.topo.Refresh(r.Context()); err != nil {
					rt.log.Warn("topology refresh after 421 failed", zap.Error(err))
				}
				break
			}
			return resp, nil
		}
		if !moved {
			break
		}
	}
	return nil, fmt.Errorf("no server answered (%v): %w", lastErr, hongbao.ErrUnavailable)
}

// try makes one attempt at server srv.
func (rt *Router) try(r *http.Request, srv string, user hongbao.UserID, body []byte, extra map[string]string) (*response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), rt.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+srv+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Content-Type", "Idempotency-Key"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(api.RequestIDHeader, api.RequestID(r.Context()))
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	// Signed anew for every attempt: a fresh nonce, and this server as the
	// target, so no attempt can be replayed or taken to another server.
	if err := rt.internal.Sign(req, user); err != nil {
		return nil, err
	}
	resp, err := rt.client.Do(req)
	if err != nil {
		return nil, err
	}
	return readResponse(resp)
}

// isDial reports a failure to connect: the server cannot have executed
// the request, and is likely down.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
