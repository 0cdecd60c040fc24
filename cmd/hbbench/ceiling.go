package main

// The HTTP ceilings the end-to-end rows are measured against: a bare Go
// backend answering a small JSON (one hop), and a bare Go proxy that
// forwards each request over a keep-alive client to that backend and
// relays the answer read whole (two hops, the shape of router -> server,
// without authentication, signing, routing or logging). They run as
// processes of their own (this binary in -ceiling-backend / -ceiling-proxy
// mode), so their CPU is read from /proc like the system's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Fixed ports of the ceiling processes (the bench runs in a namespace of
// its own, like the tests).
const (
	ceilingBackendAddr = "127.0.0.1:18090"
	ceilingProxyAddr   = "127.0.0.1:18091"
)

// serveBackend answers every request with a small JSON, as a handler that
// does no work would.
func serveBackend(ctx context.Context, addr string) error {
	body := []byte(`{"ok":true}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	return serve(ctx, addr, h)
}

// serveProxy forwards every request to backend over keep-alive
// connections and relays status, content type and body.
func serveProxy(ctx context.Context, addr, backend string) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+backend+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	})
	return serve(ctx, addr, h)
}

func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ceilings are the running ceiling processes.
type ceilings struct {
	backend, proxy *exec.Cmd
}

// startCeilings starts the backend and the proxy as child processes of
// this binary and waits until both answer.
func startCeilings(ctx context.Context, profiles string) (*ceilings, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &ceilings{
		backend: exec.CommandContext(ctx, self, "-ceiling-backend", ceilingBackendAddr),
		proxy:   exec.CommandContext(ctx, self, "-ceiling-proxy", ceilingProxyAddr, "-ceiling-to", ceilingBackendAddr),
	}
	for name, cmd := range map[string]*exec.Cmd{"backend": c.backend, "proxy": c.proxy} {
		if profiles != "" {
			cmd.Args = append(cmd.Args, "-cpuprofile", filepath.Join(profiles, name+".cpu.pprof"))
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("ceiling: %w", err)
		}
	}
	for _, addr := range []string{ceilingBackendAddr, ceilingProxyAddr} {
		if err := waitHTTP(ctx, "http://"+addr+"/"); err != nil {
			c.stop()
			return nil, fmt.Errorf("ceiling %s: %w", addr, err)
		}
	}
	return c, nil
}

func (c *ceilings) stop() {
	for _, cmd := range []*exec.Cmd{c.proxy, c.backend} {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	}
}

func waitHTTP(ctx context.Context, url string) error {
	var err error
	for range 100 {
		var resp *http.Response
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if resp, err = http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
