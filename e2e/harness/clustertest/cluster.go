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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

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
	// ConfigYAML is more top-level YAML of the configuration every
	// process reads, e.g. a webhooks section.
	ConfigYAML string
	// Spare SETs get their MariaDB, memcached and addresses but are in
	// neither the configuration nor the topology, and run no process:
	// a test adds one with `hbctl set add` and starts it with StartSet.
	Spare int
	// ClockOffsets skews processes' wall clocks (their -clock-offset),
	// by the name their log is under: "server-a1", "settler-a", "router".
	// A process not named runs on the host's clock.
	ClockOffsets map[string]time.Duration
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
	dbtest.Need(t)
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
				s.Group = dbtest.StartReplicated(g, opts.SemiSyncTimeout, opts.Replicas)
				s.DSN = s.Group.Primary.DSN
			})
		} else {
			wg.Go(func() {
				s.MariaDB = dbtest.StartMariaDB(g)
				s.DSN = s.MariaDB.DSN
			})
		}
		wg.Go(func() { s.Memcached = dbtest.StartMemcached(g).Addr })
	}
	if opts.Core > 0 {
		wg.Go(func() { c.Core = dbtest.StartReplicated(g, opts.SemiSyncTimeout, opts.Core) })
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
		CoreReplicas: core[min(1, len(core)):], Extra: opts.ConfigYAML, Edit: func(f *configs.Config) {
			f.DevGrant = opts.DevGrant
			f.Archive.Textfile, f.Dashboard.VerifyTextfile = c.ArchiveTextfile, c.VerifyTextfile
			f.Settle.SweepAfter = configs.Duration(opts.SweepAfter)
			// root over TCP is the operator's account on a private MariaDB.
			f.Replication.SemiSyncTimeout = configs.Duration(opts.SemiSyncTimeout)
			f.Replication.AdminUser, f.Replication.AdminPassword = "root", ""
			f.Replication.User, f.Replication.Password = dbtest.ReplUser, dbtest.ReplPassword
			f.Replication.WaitApplied, f.Replication.ReadReplica = configs.Duration(30*time.Second), opts.ReadReplica
		}})

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
		Args: c.skewed(Router, Router, "-config", c.Config, "-listen", c.routerAddr, "-admin", radm)}
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
			Args: c.skewed(Server, name, "-config", c.Config, "-set", s.Name, "-listen", s.Addrs[i], "-admin", adm)})
	}
	if !c.opts.NoSettlers {
		adm := s.SettlerAdmin
		ps = append(ps, &Process{Kind: Settler, Name: s.Name, Bin: filepath.Join(c.bin, "hbsettler"), Admin: adm,
			Args: c.skewed(Settler, s.Name, "-config", c.Config, "-set", s.Name, "-admin", adm)})
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
