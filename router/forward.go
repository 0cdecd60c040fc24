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

// serversPerRound is how many servers of the owning SET one round tries.
const serversPerRound = 3

// A 421 (wrong_set) means the bucket is switching SETs: the source's fence
// was taken (its opens wait in the server's queue for the freeze, well
// under a second, its sends on the fence, and then get 421) and the
// new topology is published a few milliseconds later, while the target's
// servers learn it on a miss at most every 100 ms. The router follows the
// switch: it refreshes the topology and routes again after a short
// backoff, for up to switchWindow from the first 421, so clients see
// latency, not errors. (Router.switchWindow: a test knob.)
const switchWindow = 3 * time.Second

// switchBackoff is the wait before each new round after a 421; the last
// one repeats.
var switchBackoff = []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}

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

// forwardTo tries the servers pick lists, in order: a dial error, an
// unknown outcome or a replayed nonce moves to the next server of the
// round; a 421 ends the round, refreshes the topology and, after a
// backoff, starts a new round with servers picked again, until the switch
// window is over (then 503 unavailable) or the client goes.
func (rt *Router) forwardTo(r *http.Request, user hongbao.UserID, body []byte, extra map[string]string, pick func() []string) (*response, error) {
	var lastErr error
	var switching time.Time // the first 421
	for round := 0; ; round++ {
		version := rt.topo.Current().Version
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
			if resp.code == "forbidden" {
				// The server refused this router's signature, so it did
				// nothing: the attempt reached it after the signature's
				// window (an overloaded server's queue), or the secrets
				// differ. Never the client's fault: sign again elsewhere,
				// and say so loudly (a misconfiguration fails every try).
				lastErr = fmt.Errorf("server %s refused the router's signature", srv)
				rt.log.Error("a server refused this router's signature (late attempt, clock skew or another secret); trying the next",
					zap.String("server", srv), zap.String("request_id", api.RequestID(r.Context())))
				continue
			}
			if resp.status == http.StatusMisdirectedRequest {
				moved = true
				lastErr = fmt.Errorf("server %s: %d %s", srv, resp.status, resp.code)
				rt.refreshTopology(r.Context())
				break
			}
			return resp, nil
		}
		if !moved {
			break
		}
		if switching.IsZero() {
			switching = time.Now()
		}
		wait := switchBackoff[min(round, len(switchBackoff)-1)]
		if rt.topo.Current().Version != version {
			wait = 0 // routed on an older topology than the current one: go again at once
		}
		if time.Since(switching)+wait > rt.switchWindow {
			break
		}
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-r.Context().Done():
			t.Stop()
			return nil, fmt.Errorf("client gone: %w", r.Context().Err())
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("no server answered (%v): %w", lastErr, hongbao.ErrUnavailable)
}

// refreshMinGap spaces the topology refreshes that 421 answers ask for: a
// switching bucket's crowd gets its 421s at once, and one refresh serves
// them all (the others route again on what it loaded, a backoff later).
const refreshMinGap = 10 * time.Millisecond

// refreshTopology reloads the topology after a 421, unless another request
// did less than refreshMinGap ago.
func (rt *Router) refreshTopology(ctx context.Context) {
	now := time.Now().UnixNano()
	last := rt.refreshed.Load()
	if now-last < int64(refreshMinGap) || !rt.refreshed.CompareAndSwap(last, now) {
		return
	}
	if err := rt.topo.Refresh(ctx); err != nil {
		rt.log.Warn("topology refresh after 421 failed", zap.Error(err))
	}
}

// try makes one attempt at server srv: in a batch when the router
// coalesces, else alone.
func (rt *Router) try(r *http.Request, srv string, user hongbao.UserID, body []byte, extra map[string]string) (*response, error) {
	if rt.coalesce != nil {
		resp, err := rt.tryBatched(r, srv, user, body, extra)
		if !errors.Is(err, errCoalescerClosed) && !errors.Is(err, errNoBatch) && !errors.Is(err, errUnbatchable) {
			return resp, err
		}
	}
	return rt.trySingle(r, srv, user, body, extra)
}

// trySingle makes one attempt at server srv in an exchange of its own.
func (rt *Router) trySingle(r *http.Request, srv string, user hongbao.UserID, body []byte, extra map[string]string) (*response, error) {
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
