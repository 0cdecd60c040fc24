// Package admin is a process's admin listener: Prometheus metrics
// (/metrics), liveness (/livez), readiness (/readyz) and the Go profiler
// (/debug/pprof/), on a private mux and a port of their own (loopback by
// default), never on the public API's.
//
// It lives under metrics/ because exposing the metrics is what it is for:
// every long-running process (router, SET server, settler) serves the
// collectors of package metrics through it, with the health and profiling
// endpoints that belong on the same private port. Like metrics it imports
// nothing of hongbao's.
package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Check is a readiness check: nil when the process can serve, else why not.
type Check func(ctx context.Context) error

// Handler returns the admin mux: metrics gathered from reg, /livez (the
// process runs), /readyz (ready passes) and pprof.
func Handler(reg *prometheus.Registry, ready Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Address is the admin address a process uses: its -admin flag's, else
// its configuration's; "off" turns the listener off ("").
func Address(flag, config string) string {
	switch flag {
	case "":
		return config
	case "off":
		return ""
	}
	return flag
}

// Now returns check as a yes/no answered within a second, for a gauge.
func Now(ctx context.Context, check Check) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return check(ctx) == nil
	}
}

// Server is a running admin listener.
type Server struct {
	hs   *http.Server
	ln   net.Listener
	done chan struct{}
}

// Start listens on addr and serves h from a goroutine it owns until
// Shutdown. An empty addr starts nothing: a nil Server, whose methods do
// nothing.
func Start(addr string, h http.Handler, log *zap.Logger) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen: %w", err)
	}
	// Profiles take as long as asked (?seconds=30): no write timeout.
	s := &Server{ln: ln, done: make(chan struct{}),
		hs: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener stopped", zap.Error(err))
		}
	}()
	log.Info("admin listener: /metrics /livez /readyz /debug/pprof/", zap.String("admin", s.Addr()))
	return s, nil
}

// Addr is the address listened on ("" for a nil Server).
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops the listener and waits for its goroutine.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	err := s.hs.Shutdown(ctx)
	<-s.done
	return err
}
