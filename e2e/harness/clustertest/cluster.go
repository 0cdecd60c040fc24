// Package clustertest starts a whole hongbao cluster for one test, the way
// net/http/httptest starts a server: the real binaries (hbserver, hbrouter,
// hbsettler, hbctl, built once per test binary) run as child processes
// against private MariaDB and memcached instances, one of each per SET, so
// whatever a test checks (hbctl verify, ledger sums) covers only its own
// cluster. Tests talk HTTP to the router like any client, kill and restart
// processes, and read every SET's MySQL directly.
//
//	c := clustertest.Start(t, clustertest.Options{Expiry: 3 * time.Second})
//	r := c.Client.Send(42, hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random}, "key-1")
//	c.Kill(clustertest.Server, "a1")
//	c.Restart(clustertest.Server, "a1")
//	c.CheckInvariants(t)
//
// Everything started is stopped when the test ends; on failure the tails of
// the processes' logs are printed.
//
// Its parts serve tests that run less than a cluster too: Binary builds
// one of the commands, StartProcess runs it (kill -9 and restart with
// Process.Kill and Process.Restart), FreeAddr gives it a port, WriteConfig
// its configuration, and NewRequest, Do and Reply talk HTTP to it at the
// level of headers and problem JSON.
package clustertest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// productionMariaDB returns the server options of scripts/dev.sh that
// shape the open path's cost, which a cluster's MariaDBs share: no column
// statistics. (dev.sh's thread pool is left out: under a crowd it served
// worse on this 2-core test host, and it wedges with semi-sync.)
func productionMariaDB() []string {
	return []string{"--use-stat-tables=never", "--optimizer-use-condition-selectivity=1"}
}

// Options shape a cluster. The zero value is 2 SETs of 2 servers, packets
// living 24h and pending sends swept after 5s.
type Options struct {
	Sets          int           // number of SETs, named "a", "b", ...; default 2
	ServersPerSet int           // hbserver processes per SET; default 2
	Expiry        time.Duration // life of a packet (limits.expiry); default 24h
	SweepAfter    time.Duration // settle.sweep_after (the settlers' and hbctl verify's); default 5s
	// NoSettlers starts no hbsettler: the wallet credits of opens stay in
	// their SET's outbox, where a test can read them.
	NoSettlers bool
	// RouterYAML is YAML of the router section (abuse limits), e.g.
	// "open: {per_second: 5, burst: 5}"; "" is no limits.
	RouterYAML string
	// DevGrant is the configuration's dev_grant: when positive the router
	// serves the red-packet page's dev sign-in and top-up.
	DevGrant int64
	// Replicated names the SETs whose MariaDB is a replicated group
	// (dbtest.StartReplicated: a primary and Replicas read-only replicas,
	// at least 1,
	// semi-sync AFTER_SYNC, SemiSyncTimeout, 0 waiting forever): the
	// configuration lists the replica, the servers connect as the
	// application's account (which read_only stops) and hbctl set failover
	// works. Without Core the meta and wallet databases are on the first
	// SET's MariaDB: replicate and fail over another SET.
	Replicated      []string
	Replicas        int
	SemiSyncTimeout time.Duration
	// ReadReplica is replication.read_replica: the servers of Replicated
	// SETs read packet details from the first replica while it is fresh.
	ReadReplica bool
	// Core, when positive, puts the meta and wallet databases on a
	// replicated group of their own (the core group: a primary and Core
	// replicas, semi-sync as Replicated's), apart from every SET's
	// MariaDB; the configuration lists its members (core.replicas) and
	// hbctl core failover works. 0 leaves them on the first SET's MariaDB.
	Core int
	// Spare SETs get their MariaDB, memcached and addresses but are in
	// neither the configuration nor the topology, and run no process:
	// a test adds one with `hbctl set add` and starts it with StartSet.
	Spare int
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
	Name    string
	Servers []string // process names of its servers: "a1", "a2"...
	Addrs   []string // their listen addresses, in the same order
	DSN     string   // its private MariaDB, root, no database selected
	// Group is its replicated MariaDB (Options.Replicated), nil otherwise;
	// DSN is then its primary's at the start.
	Group *dbtest.Group
	// MariaDB is its MariaDB when not replicated (nil with a Group).
	MariaDB   *dbtest.MariaDB
	Memcached string   // its private memcached
	Admin     []string // its servers' admin listeners, in the order of Addrs
	// SettlerAdmin is its settler's admin listener ("" without settlers).
	SettlerAdmin string
}

// Cluster is a running cluster.
type Cluster struct {
	Sets []Set
	// Spares are the SETs of Options.Spare, named after the others.
	Spares    []Set
	Config    string // path of the YAML configuration every process reads
	MetaDSN   string // topology database (on the first SET's MariaDB, or the core group's primary)
	WalletDSN string // wallet database (beside it)
	// Core is the replicated group of the meta and wallet databases
	// (Options.Core), nil otherwise.
	Core           *dbtest.Group
	InternalSecret string // what the router signs its requests to the servers with
	// VerifyTextfile is where `hbctl verify --textfile` should write for
	// the dashboard (dashboard.verify_textfile); ArchiveTextfile is
	// archive.textfile.
	VerifyTextfile, ArchiveTextfile string
	// Client talks to the router. It does not retry; see Client.Retrying.
	Client *Client

	t          testing.TB
	opts       Options
	dir        string
	bin        string
	routerAddr string
	secret     string
	signer     *hongbao.Signer
	dbs        map[string]*sqldb.Switch
	wallet     *wallet.Wallet
	meta       *sql.DB

	mu     sync.Mutex
	procs  map[string]*Process // by kind + "/" + name
	tokens sync.Map            // hongbao.UserID -> string
}

// Start builds the binaries (once per test binary), starts a private
// MariaDB and memcached per SET, writes the configuration, seeds the
// topology with hbctl, starts every server, one settler per SET (unless
// opts.NoSettlers) and the router, and waits until they are ready. It must
// be called from the test's goroutine.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults()
	began := time.Now()
	bin := build(t, "hbserver", "hbrouter", "hbsettler", "hbctl")
	built := time.Now()
	c := &Cluster{t: t, opts: opts, dir: t.TempDir(), bin: bin, dbs: map[string]*sqldb.Switch{}, procs: map[string]*Process{}}
	c.secret = "clustertest-user-secret-" + strconv.FormatInt(began.UnixNano(), 36)
	c.InternalSecret = "clustertest-internal-secret-0123456789"
	c.signer = hongbao.NewSigner([]byte(c.secret))

	// Every SET's MariaDB and memcached start at once: MariaDB takes
	// seconds to initialise on a busy machine.
	all := make([]Set, opts.Sets+opts.Spare)
	g := &goTB{TB: t}
	var wg sync.WaitGroup
	for i := range all {
		s := &all[i]
		s.Name = string(rune('a' + i))
		if slices.Contains(opts.Replicated, s.Name) {
			wg.Go(func() {
				s.Group = dbtest.StartReplicated(g, opts.SemiSyncTimeout, opts.Replicas, productionMariaDB()...)
				s.DSN = s.Group.Primary.DSN
			})
		} else {
			wg.Go(func() {
				s.MariaDB = dbtest.StartMariaDB(g, productionMariaDB()...)
				s.DSN = s.MariaDB.DSN
			})
		}
		wg.Go(func() { s.Memcached = dbtest.StartMemcached(g).Addr })
	}
	if opts.Core > 0 {
		wg.Go(func() { c.Core = dbtest.StartReplicated(g, opts.SemiSyncTimeout, opts.Core, productionMariaDB()...) })
	}
	wg.Wait()
	if len(g.errs) > 0 {
		t.Fatal(strings.Join(g.errs, "\n"))
	}
	dbsUp := time.Now()
	for i := range all {
		s := &all[i]
		for j := range opts.ServersPerSet {
			s.Servers = append(s.Servers, fmt.Sprintf("%s%d", s.Name, j+1))
			s.Addrs = append(s.Addrs, FreeAddr(t))
			s.Admin = append(s.Admin, FreeAddr(t))
		}
		if !opts.NoSettlers {
			s.SettlerAdmin = FreeAddr(t)
		}
	}
	c.Sets, c.Spares = all[:opts.Sets], all[opts.Sets:]
	metaOn := c.Sets[0].DSN
	var core []string
	if c.Core != nil {
		metaOn = c.Core.Primary.AppDSN()
		for _, m := range c.Core.Members() {
			core = append(core, fmt.Sprintf("127.0.0.1:%d", m.Port))
		}
	}
	c.MetaDSN = withDB(t, metaOn, "hb_meta")
	c.WalletDSN = withDB(t, metaOn, "hb_wallet")
	c.routerAddr = FreeAddr(t)
	// Registered after the databases' cleanups, so it runs before them:
	// the processes die before their MariaDB does.
	t.Cleanup(c.stop)
	c.Config = filepath.Join(c.dir, "cluster.yaml")
	c.VerifyTextfile, c.ArchiveTextfile = filepath.Join(c.dir, "hbverify.prom"), filepath.Join(c.dir, "hbarchive.prom")
	WriteConfig(t, c.Config, Config{Secret: c.secret, InternalSecret: c.InternalSecret, Expiry: opts.Expiry,
		Router: c.routerAddr, RouterExtra: opts.RouterYAML, MetaDSN: c.MetaDSN, WalletDSN: c.WalletDSN, Sets: c.Sets,
		CoreReplicas: core[min(1, len(core)):],
		Extra: fmt.Sprintf("dev_grant: %d\narchive:\n  textfile: %q\ndashboard:\n  verify_textfile: %q\nsettle:\n  sweep_after: %s\n"+
			"replication:\n  semi_sync_timeout: %s\n  admin_user: root\n  admin_password: \"\"\n  user: %s\n  password: %s\n  wait_applied: 30s\n"+
			"  read_replica: %t\n",
			opts.DevGrant, c.ArchiveTextfile, c.VerifyTextfile, opts.SweepAfter, opts.SemiSyncTimeout, dbtest.ReplUser, dbtest.ReplPassword, opts.ReadReplica)})

	c.MustCtl(t, "topology", "init")
	for _, s := range all {
		db, err := sqldb.OpenSwitch(s.DSN, 8)
		if err != nil {
			t.Fatal(err)
		}
		c.dbs[s.Name] = db
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if c.wallet, err = wallet.Open(ctx, c.WalletDSN, core, 8, time.Now); err != nil {
		t.Fatal(err)
	}
	if c.meta, err = topology.OpenMeta(ctx, c.MetaDSN, core, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Sets {
		c.addSet(s)
	}
	for _, p := range c.list() {
		if err := p.launch(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.list() {
		if err := p.waitReady(); err != nil {
			t.Fatal(err)
		}
	}
	// The router last, so its first health probes find every server up.
	radm := FreeAddr(t)
	router := &Process{Kind: Router, Name: Router, Bin: filepath.Join(bin, "hbrouter"), Ready: c.routerAddr, Admin: radm,
		Args: []string{"-config", c.Config, "-listen", c.routerAddr, "-admin", radm}}
	c.add(router)
	if err := router.Start(); err != nil {
		t.Fatal(err)
	}
	c.Client = &Client{c: c, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}}
	t.Logf("clustertest: cluster of %d SETs x %d servers up in %v (build %v, MariaDB and memcached %v, processes %v; dir %s)",
		opts.Sets, opts.ServersPerSet, time.Since(began).Round(time.Millisecond), built.Sub(began).Round(time.Millisecond),
		dbsUp.Sub(built).Round(time.Millisecond), time.Since(dbsUp).Round(time.Millisecond), c.dir)
	return c
}

// addSet registers the processes of SET s: its servers and its settler.
func (c *Cluster) addSet(s Set) []*Process {
	var ps []*Process
	for i, name := range s.Servers {
		adm := s.Admin[i]
		ps = append(ps, &Process{Kind: Server, Name: name, Bin: filepath.Join(c.bin, "hbserver"), Ready: s.Addrs[i], Admin: adm,
			Args: []string{"-config", c.Config, "-set", s.Name, "-listen", s.Addrs[i], "-admin", adm}})
	}
	if !c.opts.NoSettlers {
		adm := s.SettlerAdmin
		ps = append(ps, &Process{Kind: Settler, Name: s.Name, Bin: filepath.Join(c.bin, "hbsettler"), Admin: adm,
			Args: []string{"-config", c.Config, "-set", s.Name, "-admin", adm}})
	}
	for _, p := range ps {
		c.add(p)
	}
	return ps
}

// AddSetArgs returns the arguments of `hbctl set add` for spare SET name.
func (c *Cluster) AddSetArgs(name string) []string {
	s := c.spare(name)
	return []string{"set", "add", s.Name, "--servers", strings.Join(s.Addrs, ","), "--mysql", s.DSN, "--memcached", s.Memcached}
}

// StartSet starts the servers and settler of spare SET name (added to the
// meta database first, with AddSetArgs) and waits until they are ready.
func (c *Cluster) StartSet(t testing.TB, name string) {
	t.Helper()
	for _, p := range c.addSet(c.spare(name)) {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *Cluster) spare(name string) Set {
	for _, s := range c.Spares {
		if s.Name == name {
			return s
		}
	}
	c.t.Fatalf("clustertest: no spare SET %q", name)
	return Set{}
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

// Request builds a request to url (the router's, c.URL() + path, or
// straight to a server) with body as its JSON (nil: no body), the given
// headers and user's bearer token (user 0: none).
func (c *Cluster) Request(method, url string, user hongbao.UserID, body []byte, header map[string]string) *http.Request {
	req, err := NewRequest(method, url, body, header)
	if err != nil {
		panic(err)
	}
	if user != 0 {
		req.Header.Set("Authorization", "Bearer "+c.Token(user))
	}
	return req
}

// Do sends req over the Client's connection pool and reads the answer.
func (c *Cluster) Do(req *http.Request) Reply { return Do(c.Client.http, req) }

// Ctl runs hbctl with args and the cluster's -config (appended, so it
// follows the subcommand's own flags) and returns its combined output.
func (c *Cluster) Ctl(args ...string) (string, error) { return c.CtlWith(nil, args...) }

// CtlWith is Ctl with more environment variables (e.g. HBCTL_FAULT) and
// room for long commands (10 minutes).
func (c *Cluster) CtlWith(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "hbctl"), append(slices.Clone(args), "-config", c.Config)...)
	cmd.Env = append(Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// StartCtl starts a long-running hbctl (e.g. set watch) with args, the
// cluster's -config and the environment variables env, in the background
// like the cluster's processes: its output goes to its Log, it is killed
// when the test ends (Signal and Wait stop it gracefully).
func (c *Cluster) StartCtl(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	return StartProcess(t, &Process{Kind: "hbctl", Name: strings.Join(args[:min(2, len(args))], "-"),
		Bin: filepath.Join(c.bin, "hbctl"), Args: append(slices.Clone(args), "-config", c.Config), Env: env})
}

// MustCtl is Ctl failing the test when hbctl does.
func (c *Cluster) MustCtl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Ctl(args...)
	if err != nil {
		t.Fatalf("hbctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
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

// Credit credits user with amount fen through hbctl wallet credit, as an
// operator does; a key makes the credit idempotent (--key), "" is none.
// It is safe from any goroutine.
func (c *Cluster) Credit(user hongbao.UserID, amount int64, key string) error {
	args := []string{"wallet", "credit", "--user", user.String(), "--amount", strconv.FormatInt(amount, 10)}
	if key != "" {
		args = append(args, "--key", key)
	}
	out, err := c.Ctl(args...)
	if err != nil {
		return fmt.Errorf("hbctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// TopUp is Credit without a key, failing the test when it fails.
func (c *Cluster) TopUp(t testing.TB, user hongbao.UserID, amount int64) {
	t.Helper()
	if err := c.Credit(user, amount, ""); err != nil {
		t.Fatal(err)
	}
}

// Set returns the SET called name.
func (c *Cluster) Set(name string) Set {
	for _, s := range c.Sets {
		if s.Name == name {
			return s
		}
	}
	c.t.Fatalf("clustertest: no SET %q", name)
	return Set{}
}

// DB returns a pool on the MariaDB of SET set (no database selected: name
// tables in full, db_xx.t_y_dd, hb_set.outbox, hb_fence.owned).
func (c *Cluster) DB(set string) *sql.DB {
	db := c.dbs[set]
	if db == nil {
		c.t.Fatalf("clustertest: no SET %q", set)
	}
	return db.DB()
}

// Follow points DB(set) at the member of replicated SET set's group that
// the meta database names its primary (after hbctl set failover), and
// returns it.
func (c *Cluster) Follow(t testing.TB, set string) *dbtest.MariaDB {
	t.Helper()
	s := c.Set(set)
	if s.Group == nil {
		t.Fatalf("clustertest: SET %s is not replicated", set)
	}
	var dsn string
	if err := c.DB(c.Sets[0].Name).QueryRow("SELECT mysql_dsn FROM hb_meta.sets WHERE name = ?", set).Scan(&dsn); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.Group.Members() {
		if m.AppDSN() == dsn {
			if _, err := c.dbs[set].To(m.DSN); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("clustertest: SET %s's MySQL %q is none of its group", set, dsn)
	return nil
}

// Wallet returns the wallet (accounts, ledger).
func (c *Cluster) Wallet() *wallet.Wallet { return c.wallet }

// Meta is a pool on the meta database (following the core group's
// primary, as the processes do).
func (c *Cluster) Meta() *sql.DB { return c.meta }

// WalletDB returns a pool on the wallet database.
func (c *Cluster) WalletDB() *sql.DB { return c.wallet.DB() }

// SetOf returns the name of the SET owning packet id in the current
// topology.
func (c *Cluster) SetOf(id hongbao.PacketID) (string, error) {
	var name string
	err := c.DB(c.Sets[0].Name).QueryRow("SELECT set_name FROM hb_meta.buckets WHERE bucket = ?", int(id.Bucket())).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("clustertest: SET of %s: %w", id, err)
	}
	return name, nil
}

// ---- processes ---------------------------------------------------------------

func (c *Cluster) add(p *Process) {
	p.Log = filepath.Join(c.dir, p.Kind+"-"+p.Name+".log")
	c.mu.Lock()
	c.procs[p.Kind+"/"+p.Name] = p
	c.mu.Unlock()
}

// Processes returns the cluster's processes, servers first and the router
// last: their Admin addresses serve /metrics, /livez, /readyz and pprof.
func (c *Cluster) Processes() []*Process { return c.list() }

// list returns the processes, servers first and the router last.
func (c *Cluster) list() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]*Process, 0, len(c.procs))
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	order := map[string]int{Server: 0, Settler: 1, Router: 2}
	slices.SortFunc(ps, func(a, b *Process) int {
		if d := order[a.Kind] - order[b.Kind]; d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return ps
}

func (c *Cluster) proc(kind, name string) (*Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[kind+"/"+name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("clustertest: no %s named %q", kind, name)
}

// Kill kills a process with SIGKILL (kill -9) and waits until it is gone:
// kind is Server, Settler or Router. Problems fail the test; it is safe to
// call from any goroutine.
func (c *Cluster) Kill(kind, name string) { c.apply(kind, name, (*Process).Kill) }

// Restart starts a process again with its original arguments (killing it
// first if it still runs) and waits until it is ready. Problems fail the
// test; it is safe to call from any goroutine, but not for one process
// from two goroutines at once.
func (c *Cluster) Restart(kind, name string) { c.apply(kind, name, (*Process).Restart) }

// apply calls do on the process, failing the test on a problem.
func (c *Cluster) apply(kind, name string, do func(*Process) error) {
	p, err := c.proc(kind, name)
	if err == nil {
		err = do(p)
	}
	if err != nil {
		c.t.Error(err)
	}
}

// stop kills every process, closes the pools and, if the test failed,
// prints the end of every log.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, p := range c.list() {
		wg.Go(func() { _ = p.Kill() })
	}
	wg.Wait()
	if c.t.Failed() {
		for _, p := range c.list() {
			p.logTail(c.t)
		}
	}
	for _, db := range c.dbs {
		db.DB().Close()
	}
	if c.wallet != nil {
		c.wallet.Close()
	}
	if c.meta != nil {
		c.meta.Close()
	}
	if c.Client != nil {
		c.Client.http.CloseIdleConnections()
	}
}
