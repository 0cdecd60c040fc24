package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/metrics/admin"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// testConfig is a configuration whose meta database is one of its own on
// test SET a's MariaDB (dropped when the test ends), naming SET name with
// a primary and a replica nobody listens on.
func testConfig(t *testing.T, name string) *configs.Config {
	t.Helper()
	ctx := context.Background()
	root := dbtest.DB(t, "a", 1)
	db := dbtest.UniqueName("hbwatch_")
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.ExecContext(context.Background(), "DROP DATABASE "+db) }) //nolint:errcheck // best effort
	c, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	c.DBName = db
	dead := func(port int) string { return fmt.Sprintf("hongbao:hongbao@tcp(127.0.0.1:%d)/", port) }
	set := topology.Set{Name: name, Servers: []string{"127.0.0.1:1"}, Memcached: []string{"127.0.0.1:2"},
		MySQLDSN: dead(dbtest.FreePort(t)), Replicas: []string{dead(dbtest.FreePort(t))}}
	if _, err := topology.Init(ctx, dbtest.Open(t, c.FormatDSN(), 2), []topology.Set{set}); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Defaults()
	cfg.MetaDSN = c.FormatDSN()
	cfg.Watch = configs.Watch{Interval: configs.Duration(100 * time.Millisecond), After: configs.Duration(time.Second),
		ProbeTimeout: configs.Duration(200 * time.Millisecond), Refresh: configs.Duration(100 * time.Millisecond)}
	return cfg
}

// TestDaemonReadiness: hbwatch is not ready before it probed every group,
// ready once it did (whatever the probe found: here a primary that does
// not answer), its metrics name the group, and it is not ready again
// once shutting down; Run returns when its context ends.
func TestDaemonReadiness(t *testing.T) {
	name := dbtest.UniqueName("w")
	cfg := testConfig(t, name)
	reg := metrics.NewRegistry()
	d, err := newDaemon(context.Background(), cfg, zap.NewNop(), metrics.NewWatch(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) //nolint:errcheck // the test is over
	if err := d.Ready(context.Background()); err == nil {
		t.Fatal("ready before any probe")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for d.Ready(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 10s after the start: %v", d.Ready(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv := httptest.NewServer(admin.Handler(reg, d.Ready))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hongbao_watch_last_probe_ok{group="` + name + `"} 0`, `hongbao_watch_last_probe_timestamp_seconds{group="` + name + `"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
	if err := d.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("readiness after the shutdown: %v; want not ready, shutting down", err)
	}
}

// TestNothingToWatch: a configuration without a meta database nor core
// replicas leaves hbwatch nothing to do: it says so and does not start.
func TestNothingToWatch(t *testing.T) {
	cfg := configs.Defaults()
	if _, err := newDaemon(context.Background(), cfg, zap.NewNop(), nil); err == nil || !strings.Contains(err.Error(), "nothing to watch") {
		t.Errorf("newDaemon without groups: %v; want nothing to watch", err)
	}
}
