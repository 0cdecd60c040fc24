package router

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Health tracks which SET servers answer. A server is down after a failed
// probe or a refused connection, and up again after a good probe.
type Health struct {
	client   *http.Client
	interval time.Duration
	log      *zap.Logger
	mu       sync.RWMutex
	down     map[string]bool
}

// NewHealth returns a tracker probing /readyz every interval.
func NewHealth(client *http.Client, interval time.Duration, log *zap.Logger) *Health {
	return &Health{client: client, interval: interval, log: log, down: map[string]bool{}}
}

// Healthy reports whether addr is believed up.
func (h *Health) Healthy(addr string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return !h.down[addr]
}

// MarkDown records a failure seen while serving a request.
func (h *Health) MarkDown(addr string) { h.set(addr, false) }

func (h *Health) set(addr string, up bool) {
	h.mu.Lock()
	changed := h.down[addr] == up
	h.down[addr] = !up
	h.mu.Unlock()
	if changed {
		h.log.Warn("server health changed", zap.String("server", addr), zap.Bool("up", up))
	}
}

// Run probes the servers listed by servers until ctx ends.
func (h *Health) Run(ctx context.Context, servers func() []string) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		for _, s := range servers() {
			h.set(s, h.probe(ctx, s))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (h *Health) probe(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
