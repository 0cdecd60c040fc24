// Package routertest starts a whole hongbao cluster for one test, the way
// net/http/httptest starts a server: the real binaries (hbserver, hbrouter,
// hbsettler, hbctl, built once per test binary) run as child processes
// against private MariaDB and memcached instances, one of each per SET, so
// whatever a test checks (hbctl verify, ledger sums) covers only its own
// cluster. Tests talk HTTP to the router like any client, kill and restart
// processes, and read every SET's MySQL directly.
//
//	c := routertest.Start(t, routertest.Options{Expiry: 3 * time.Second})
//	r := c.Client.Send(42, hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random}, "key-1")
//	c.Kill(routertest.Server, "a1")
//	c.Restart(routertest.Server, "a1")
//	c.CheckInvariants(t)
//
// Everything started is stopped when the test ends; on failure the tails of
// the processes' logs are printed.
package routertest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
)

// Options shape a cluster. The zero value is 2 SETs of 2 servers, packets
// living 24h and pending sends swept after 5s.
type Options struct {
	Sets          int           // number of SETs, named "a", "b", ...; default 2
	ServersPerSet int           // hbserver processes per SET; default 2
	Expiry        time.Duration // life of a packet (limits.expiry); default 24h
	SweepAfter    time.Duration // hbsettler -sweep-after; default 5s
}

func (o Options) withDefaults() Options {
	if o.Sets <= 0 {
		o.Sets = 2
	}
	if o.ServersPerSet <= 0 {
		o.ServersPerSet = 2
	}
	if o.Expiry <= 0 {
		o.Expiry = 24 * time.Hour
	}
	if o.SweepAfter <= 0 {
		o.SweepAfter = 5 * time.Second
	}
	return o
}

// Process kinds, for Kill and Restart.
const (
	Server  = "server"  // named after its SET and index: "a1", "a2", "b1"...
	Settler = "settler" // named after its SET: "a", "b"...
	Router  = "router"  // the one router, named "router"
)

// Set is one SET of the cluster.
type Set struct {
	Name      string
	Servers   []string // process names of its servers: "a1", "a2"...
	Addrs     []string // their listen addresses, in the same order
	DSN       string   // its private MariaDB, root, no database selected
	Memcached string   // its private memcached
}

// Cluster is a running cluster.
type Cluster struct {
	Sets      []Set
	Config    string // path of the YAML configuration every process reads
	MetaDSN   string // topology database (on the first SET's MariaDB)
	WalletDSN string // wallet database (on the first SET's MariaDB)
	// Client talks to the router. It does not retry; see Client.Retrying.
	Client *Client

	t          testing.TB
	opts       Options
	dir        string
	routerAddr string
	secret     string
	signer     *hongbao.Signer
	dbs        map[string]*sql.DB
	wallet     *sql.DB

	mu     sync.Mutex
	procs  map[string]*proc // by kind + "/" + name
	tokens sync.Map         // hongbao.UserID -> string
}

// Start builds the binaries (once per test binary), starts a private
// MariaDB and memcached per SET, writes the configuration, seeds the
// topology with hbctl, starts every server, one settler per SET and the
// router, and waits until they are ready. It must be called from the test's
// goroutine.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults()
	began := time.Now()
	bin := build(t)
	built := time.Now()
	c := &Cluster{t: t, opts: opts, dir: t.TempDir(), dbs: map[string]*sql.DB{}, procs: map[string]*proc{}}
	c.secret = "routertest-user-secret-" + strconv.FormatInt(began.UnixNano(), 36)
	c.signer = hongbao.NewSigner([]byte(c.secret))

	// Every SET's MariaDB and memcached start at once: MariaDB takes
	// seconds to initialise on a busy machine.
	c.Sets = make([]Set, opts.Sets)
	g := &goTB{TB: t}
	var wg sync.WaitGroup
	for i := range c.Sets {
		s := &c.Sets[i]
		s.Name = string(rune('a' + i))
		wg.Go(func() {
			var err error
			if s.DSN, err = startMariaDB(t); err != nil {
				g.mu.Lock()
				g.errs = append(g.errs, err.Error())
				g.mu.Unlock()
			}
		})
		wg.Go(func() { s.Memcached = storetest.StartMemcached(g).Addr })
	}
	wg.Wait()
	if len(g.errs) > 0 {
		t.Fatal(strings.Join(g.errs, "\n"))
	}
	dbsUp := time.Now()
	for i := range c.Sets {
		s := &c.Sets[i]
		for j := range opts.ServersPerSet {
			s.Servers = append(s.Servers, fmt.Sprintf("%s%d", s.Name, j+1))
			s.Addrs = append(s.Addrs, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		}
	}
	c.MetaDSN = withDB(t, c.Sets[0].DSN, "hb_meta")
	c.WalletDSN = withDB(t, c.Sets[0].DSN, "hb_wallet")
	c.routerAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// Registered after the databases' cleanups, so it runs before them:
	// the processes die before their MariaDB does.
	t.Cleanup(c.stop)
	c.writeConfig(t)

	if out, err := c.Ctl("topology", "init"); err != nil {
		t.Fatalf("hbctl topology init: %v\n%s", err, out)
	}
	for _, s := range c.Sets {
		db, err := store.OpenDB(s.DSN, 8)
		if err != nil {
			t.Fatal(err)
		}
		c.dbs[s.Name] = db
	}
	var err error
	if c.wallet, err = store.OpenDB(c.WalletDSN, 8); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Sets {
		for i, name := range s.Servers {
			c.add(&proc{kind: Server, name: name, bin: filepath.Join(bin, "hbserver"), ready: s.Addrs[i],
				args: []string{"-config", c.Config, "-set", s.Name, "-listen", s.Addrs[i]}})
		}
		c.add(&proc{kind: Settler, name: s.Name, bin: filepath.Join(bin, "hbsettler"),
			args: []string{"-config", c.Config, "-set", s.Name, "-sweep-after", opts.SweepAfter.String()}})
	}
	for _, p := range c.list() {
		if err := c.launch(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.list() {
		if err := c.waitReady(p); err != nil {
			t.Fatal(err)
		}
	}
	// The router last, so its first health probes find every server up.
	router := &proc{kind: Router, name: Router, bin: filepath.Join(bin, "hbrouter"), ready: c.routerAddr,
		args: []string{"-config", c.Config, "-listen", c.routerAddr}}
	c.add(router)
	if err := c.launch(router); err != nil {
		t.Fatal(err)
	}
	if err := c.waitReady(router); err != nil {
		t.Fatal(err)
	}
	c.Client = &Client{c: c, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 128, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}}
	t.Logf("routertest: cluster of %d SETs x %d servers up in %v (build %v, MariaDB and memcached %v, processes %v; dir %s)",
		opts.Sets, opts.ServersPerSet, time.Since(began).Round(time.Millisecond), built.Sub(began).Round(time.Millisecond),
		dbsUp.Sub(built).Round(time.Millisecond), time.Since(dbsUp).Round(time.Millisecond), c.dir)
	return c
}

func (c *Cluster) writeConfig(t testing.TB) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "timezone: Asia/Shanghai\nsecret: %q\ninternal_secret: %q\ntoken_ttl: 24h\nlog_level: warn\n",
		c.secret, "routertest-internal-secret-0123456789")
	fmt.Fprintf(&b, `limits:
  max_total: 20000
  max_count: 100
  max_share: 20000
  expiry: %s
  max_greeting: 200
queue:
  size: 1024
  batch: 32
  idle: 5s
  tx_timeout: 5s
  slot_cap: 2
cache:
  timeout: 200ms
  conns: 64
db_conns: 16
shutdown_grace: 5s
router:
  listen: %q
meta_dsn: %q
wallet_dsn: %q
sets:
`, c.opts.Expiry, c.routerAddr, c.MetaDSN, c.WalletDSN)
	for _, s := range c.Sets {
		addrs := make([]string, len(s.Addrs))
		for i, a := range s.Addrs {
			addrs[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "  - name: %q\n    servers: [%s]\n    mysql_dsn: %q\n    memcached: [%q]\n",
			s.Name, strings.Join(addrs, ", "), s.DSN, s.Memcached)
	}
	c.Config = filepath.Join(c.dir, "cluster.yaml")
	if err := os.WriteFile(c.Config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// URL returns the router's base URL, e.g. http://127.0.0.1:41234.
func (c *Cluster) URL() string { return "http://" + c.routerAddr }

// Token returns a valid bearer token for user.
func (c *Cluster) Token(user hongbao.UserID) string {
	if tok, ok := c.tokens.Load(user); ok {
		return tok.(string)
	}
	tok := c.signer.Sign(user, time.Now().Add(48*time.Hour))
	c.tokens.Store(user, tok)
	return tok
}

// Ctl runs hbctl with args and the cluster's -config (appended, so it
// follows the subcommand's own flags) and returns its combined output.
func (c *Cluster) Ctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "hbctl"), append(slices.Clone(args), "-config", c.Config)...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// CheckInvariants runs hbctl verify and fails the test with its output
// unless it exits 0. Run it on a quiet cluster (outbox drained). It returns
// the output.
func (c *Cluster) CheckInvariants(t testing.TB) string {
	t.Helper()
	out, err := c.Ctl("verify")
	if err != nil {
		t.Errorf("hbctl verify: %v\n%s", err, out)
	} else if !strings.Contains(out, "OK: every invariant holds") {
		t.Errorf("hbctl verify exited 0 without saying OK:\n%s", out)
	}
	return out
}

// DB returns a pool on the MariaDB of SET set (no database selected: name
// tables in full, db_xx.t_y_dd, hb_set.outbox, hb_fence.owned).
func (c *Cluster) DB(set string) *sql.DB {
	db := c.dbs[set]
	if db == nil {
		c.t.Fatalf("routertest: no SET %q", set)
	}
	return db
}

// WalletDB returns a pool on the wallet database (accounts, ledger).
func (c *Cluster) WalletDB() *sql.DB { return c.wallet }

// SetOf returns the name of the SET owning packet id in the current
// topology.
func (c *Cluster) SetOf(id hongbao.PacketID) (string, error) {
	var name string
	err := c.dbs[c.Sets[0].Name].QueryRow("SELECT set_name FROM hb_meta.buckets WHERE bucket = ?", int(id.Bucket())).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("routertest: SET of %s: %w", id, err)
	}
	return name, nil
}

// ---- building the binaries -------------------------------------------------
