package dev_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/devhosts"
	"github.com/hongbao-dev/hongbao/set/lease"
)

// The dev cluster on hosts of its own (make up HOSTS=1): every process on
// a network namespace with its own address, a packet sent and opened
// through the API's address, each MariaDB replica replicating from its
// primary's host, a lease taken from the configured etcd, and make down
// leaving no namespace, bridge or process. The test runs itself again
// inside a network namespace of its own (unshare -n: the bridge and the
// fixed ports stay private); about a minute and a half.
func TestDevHosts(t *testing.T) {
	dbtest.Need(t)
	if os.Getenv("HB_DEVHOSTS_INNER") != "" {
		devHostsInner(t)
		return
	}
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		t.Fatalf("unshare -n: %v: the hosts need root (run make test as root)", err)
	}
	// Six minutes for the test proper, two for its make down, one spare.
	clustertest.OneDevCluster(t, 9*time.Minute)
	began := time.Now()
	cmd := exec.Command("unshare", "-n", "bash", "-c",
		`ip link set lo up && exec "$0" -test.run '^TestDevHosts$' -test.v -test.count=1`, os.Args[0])
	cmd.Env = append(os.Environ(), "HB_DEVHOSTS_INNER=1", "HB_DEV_RUN="+t.TempDir(), "HB_DEV_BIN="+clustertest.BinDir(t))
	out, err := cmd.CombinedOutput()
	t.Logf("TestDevHosts in a network namespace of its own (%v):\n%s", time.Since(began).Round(time.Second), out)
	if err != nil {
		t.Fatal(err)
	}
}

// devHostsInner is the test proper, in its own network namespace.
func devHostsInner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	run := os.Getenv("HB_DEV_RUN")
	// Namespace names are machine-wide (/run/netns): one of this test's own.
	netName := "t" + strconv.Itoa(os.Getpid()%100000)
	dev := func(ctx context.Context, args ...string) error {
		cmd := exec.CommandContext(ctx, "scripts/dev.sh", args...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "HB_HOSTS=1", "HB_HOSTS_NET="+netName, "HB_MARIADB_BUFFER_POOL=128M")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("scripts/dev.sh %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	// Not ctx: it is cancelled before cleanups run, and a failed make up
	// must not leave its hosts and processes behind.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := dev(ctx, "down"); err != nil {
			t.Error(err)
		}
	})
	began := time.Now()
	if err := dev(ctx, "up"); err != nil {
		for _, log := range []string{"etcd-e1.log", "server-a1.log", "router-r1.log", "mariadb-a-replica.log"} {
			if b, err := os.ReadFile(filepath.Join(run, "hosts", log)); err == nil {
				t.Logf("%s (end):\n%s", log, tail(b, 1500))
			}
		}
		t.Fatal(err)
	}
	t.Logf("make up HOSTS=1: %v", time.Since(began).Round(time.Second))
	f, err := devhosts.Read(filepath.Join(run, "hosts.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, f)
	cfg, err := configs.Load(filepath.Join(run, "hosts", "dev.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sendAndOpen(ctx, t, f.API, filepath.Join(run, "hosts"))
	checkReplicas(ctx, t, f, cfg)
	checkLease(ctx, t, cfg)

	pids := map[string]int{}
	for _, h := range f.Hosts {
		for _, p := range h.Processes {
			if b, err := os.ReadFile(p.PidFile); err == nil {
				pids[h.Host], _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
		}
	}
	if len(pids) != len(f.Hosts) {
		t.Errorf("%d pid files for %d hosts", len(pids), len(f.Hosts))
	}
	if err := dev(ctx, "down"); err != nil {
		t.Fatal(err)
	}
	checkGone(t, f, netName, pids)
}

// checkLayout: a host per process, each with its own address and
// namespace, every kind there, each MariaDB with its role.
func checkLayout(t *testing.T, f *devhosts.File) {
	t.Helper()
	addrs, kinds := map[string]string{}, map[string]int{}
	for _, h := range f.Hosts {
		if o, ok := addrs[h.Addr]; ok || h.Addr == "" || strings.HasPrefix(h.Addr, "127.") {
			t.Errorf("host %s: address %q (also %s's)", h.Host, h.Addr, o)
		}
		addrs[h.Addr] = h.Host
		if _, err := os.Stat("/run/netns/" + h.NetNS); err != nil {
			t.Errorf("host %s: %v", h.Host, err)
		}
		for _, p := range h.Processes {
			kinds[p.Kind]++
			if p.Kind == "mariadb" && p.Role != "primary" && p.Role != "replica" {
				t.Errorf("host %s: MariaDB role %q", h.Host, p.Role)
			}
		}
	}
	want := map[string]int{"router": 1, "server": 6, "settler": 3, "mariadb": 8, "memcached": 3, "watch": 1, "etcd": 3}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s processes in hosts.json, want %d", kinds[k], k, n)
		}
	}
	if !strings.HasPrefix(f.API, "http://") || strings.Contains(f.API, "127.0.0.1") {
		t.Errorf("api %q", f.API)
	}
}

// sendAndOpen sends a packet through the API's address and opens it.
func sendAndOpen(ctx context.Context, t *testing.T, api, run string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(run, "bin", "hbctl"), "token", "-config",
		filepath.Join(run, "dev.yaml"), "--user", "42").Output()
	if err != nil {
		t.Fatalf("hbctl token: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	token := lines[len(lines)-1]
	call := func(path, body string) map[string]any {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &m) != nil {
			t.Fatalf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
		}
		return m
	}
	sent := call("/v1/packets", `{"total":1000,"count":10,"type":"random","greeting":"hosts"}`)
	id, _ := sent["id"].(string)
	opened := call("/v1/packets/"+id+"/open", "")
	if opened["status"] != "opened" || opened["amount"].(float64) <= 0 {
		t.Errorf("open of %s through %s: %v", id, api, opened)
	}
}

// checkReplicas: every MariaDB started as a replica replicates from the
// address of its primary's host, and the replication runs.
func checkReplicas(ctx context.Context, t *testing.T, f *devhosts.File, cfg *configs.Config) {
	t.Helper()
	ports := map[string]int{}
	for _, p := range devhosts.Layout() {
		ports[p.Key()] = p.Ports[0]
	}
	n := 0
	for _, h := range f.Hosts {
		p := h.Processes[0]
		if p.Kind != "mariadb" || p.Role != "replica" {
			continue
		}
		n++
		primary := "mariadb-" + p.Name
		if h.Host == primary {
			primary += "-replica"
		}
		want, _ := f.Addr(primary)
		dsn := fmt.Sprintf("%s:%s@tcp(%s:%d)/", cfg.Replication.AdminUser, cfg.Replication.AdminPassword, h.Addr, ports[h.Host])
		st, err := slaveStatus(ctx, dsn)
		if err != nil {
			t.Errorf("%s: %v", h.Host, err)
			continue
		}
		if st["Master_Host"] != want || st["Slave_IO_Running"] != "Yes" || st["Slave_SQL_Running"] != "Yes" {
			t.Errorf("%s replicates from %q (IO %s, SQL %s), want %s's address %s", h.Host,
				st["Master_Host"], st["Slave_IO_Running"], st["Slave_SQL_Running"], primary, want)
		}
	}
	if n != 4 {
		t.Errorf("%d replicas, want 4 (core, a, b, c)", n)
	}
}

// slaveStatus is SHOW SLAVE STATUS's columns as text.
func slaveStatus(ctx context.Context, dsn string) (map[string]string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, fmt.Errorf("no replication configured: %v", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	st := map[string]string{}
	for i, c := range cols {
		st[c] = vals[i].String
	}
	return st, nil
}

// checkLease takes and releases a lease from the configured etcd members.
func checkLease(ctx context.Context, t *testing.T, cfg *configs.Config) {
	t.Helper()
	if len(cfg.Etcd.Endpoints) != 3 {
		t.Fatalf("etcd endpoints %v, want 3", cfg.Etcd.Endpoints)
	}
	c, err := lease.Dial(ctx, cfg.Etcd.Endpoints, lease.Options{TTL: cfg.Etcd.TTL.D()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := c.TryAcquire(ctx, "devhosts-test", "TestDevHosts")
	if err != nil {
		t.Fatalf("lease from %v: %v", cfg.Etcd.Endpoints, err)
	}
	if err := held.Check(ctx); err != nil {
		t.Error(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Error(err)
	}
}

// checkGone: after make down no namespace of the hosts, no bridge and no
// process of theirs is left.
func checkGone(t *testing.T, f *devhosts.File, netName string, pids map[string]int) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, netName+"-") {
			t.Errorf("make down left namespace %s", line)
		}
	}
	if _, err := net.InterfaceByName("hb" + netName); err == nil {
		t.Errorf("make down left bridge hb%s", netName)
	}
	for host, pid := range pids {
		if pid > 0 && running(pid) {
			t.Errorf("make down left %s's process %d running", host, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.Hosts[0].Processes[0].PidFile), "..", "hosts.json")); err == nil {
		t.Error("make down left hosts.json")
	}
}

// running: process pid exists and is no zombie (a daemon whose parent
// exited is reaped by init, which may take its time).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) == 0 || f[0] != "Z" && f[0] != "X"
}
