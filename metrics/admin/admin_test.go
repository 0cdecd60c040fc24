package admin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/metrics/admin"
)

func TestAdminEndpoints(t *testing.T) {
	reg := metrics.NewRegistry()
	var notReady error
	s, err := admin.Start("127.0.0.1:0", admin.Handler(reg, func(context.Context) error { return notReady }), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		path   string
		status int
		has    string
	}{
		{"/livez", 200, "ok"},
		{"/readyz", 200, "ready"},
		{"/metrics", 200, "go_goroutines"},
		{"/metrics", 200, "process_cpu_seconds_total"},
		{"/debug/pprof/", 200, "goroutine"},
		{"/debug/pprof/cmdline", 200, "admin.test"},
	}
	for _, tt := range tests {
		if st, body := get(tt.path); st != tt.status || !strings.Contains(body, tt.has) {
			t.Errorf("GET %s: %d, want %d with %q", tt.path, st, tt.status, tt.has)
		}
	}
	notReady = errors.New("draining")
	if st, body := get("/readyz"); st != 503 || !strings.Contains(body, "draining") {
		t.Errorf("GET /readyz while not ready: %d %q, want 503 saying why", st, body)
	}
	if st, _ := get("/livez"); st != 200 {
		t.Errorf("GET /livez while not ready: %d, want 200 (the process runs)", st)
	}
}

func TestAddress(t *testing.T) {
	for _, tt := range []struct{ flag, config, want string }{
		{"", "127.0.0.1:9081", "127.0.0.1:9081"},
		{"127.0.0.1:1", "127.0.0.1:9081", "127.0.0.1:1"},
		{"off", "127.0.0.1:9081", ""},
	} {
		if got := admin.Address(tt.flag, tt.config); got != tt.want {
			t.Errorf("Address(%q, %q) = %q, want %q", tt.flag, tt.config, got, tt.want)
		}
	}
	s, err := admin.Start("", nil, zap.NewNop())
	if s != nil || err != nil || s.Addr() != "" || s.Shutdown(context.Background()) != nil {
		t.Error("an empty address starts a listener")
	}
}
