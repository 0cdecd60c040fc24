// Package configs loads the YAML configuration of every hongbao process
// (dev.yaml beside it is the commented dev setup) and applies environment
// overrides: HB_<SECTION>_<KEY>, e.g. HB_LIMITS_MAX_TOTAL=50000.
package configs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration.
type Config struct {
	TimeZone       string   `yaml:"timezone"`
	Secret         string   `yaml:"secret"`          // signs user tokens
	InternalSecret string   `yaml:"internal_secret"` // router -> server requests
	TokenTTL       Duration `yaml:"token_ttl"`
	Limits         Limits   `yaml:"limits"`
	Queue          Queue    `yaml:"queue"`
	Cache          Cache    `yaml:"cache"`
	Router         Router   `yaml:"router"`
	Archive        Archive  `yaml:"archive"`
	Settle         Settle   `yaml:"settle"`
	Webhooks       Webhooks `yaml:"webhooks"`
	Admin          Admin    `yaml:"admin"`
	Dashboard      Console  `yaml:"dashboard"`
	Sets           []Set    `yaml:"sets"`
	// Replication is how hbctl fails a SET's MySQL over and rejoins it.
	Replication Replication `yaml:"replication"`
	// Watch tunes the failover watchdog, hbwatch.
	Watch Watch `yaml:"watch"`
	// Etcd decides who may act on a group or bucket (set/lease).
	Etcd      Etcd   `yaml:"etcd"`
	MetaDSN   string `yaml:"meta_dsn"`   // topology database
	WalletDSN string `yaml:"wallet_dsn"` // accounts and ledger
	// Core is the replicated MariaDB group of the meta and wallet
	// databases (meta_dsn's and wallet_dsn's server is one member).
	Core Core `yaml:"core"`
	// DevGrant credits each sender once on first send (fen); dev only.
	DevGrant      int64    `yaml:"dev_grant"`
	DBConns       int      `yaml:"db_conns"` // MySQL pool size per server
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	LogLevel      string   `yaml:"log_level"` // debug, info, warn, error
}

// Settle tunes the settlers and what hbctl verify expects of them.
type Settle struct {
	// SweepAfter is how old a pending send must be before the settler's
	// sweeper decides it (funds or cancels it); hbctl verify calls a
	// packet past its expiry by more than this, without the mark that
	// settles it, an orphan. One key for both, so they cannot disagree.
	SweepAfter Duration `yaml:"sweep_after"`
	// DeliverEvery is how often at most a settler delivers credits while
	// they come in a steady stream and no backlog builds (each delivery
	// costs a wallet transaction on the core group and a delete on the
	// SET whatever it carries): a credit waits up to this long more.
	DeliverEvery Duration `yaml:"deliver_every"`
}

// Queue tunes the per-packet queues.
type Queue struct {
	Size      int      `yaml:"size"`
	Batch     int      `yaml:"batch"`
	Idle      Duration `yaml:"idle"`
	TxTimeout Duration `yaml:"tx_timeout"`
	SlotCap   int      `yaml:"slot_cap"`
	Merge     int      `yaml:"merge"` // packets' batches per transaction
	// Committers is how many open transactions a server runs at once (at
	// most db_conns): few and full beats many and contended.
	Committers int `yaml:"committers"`
	Memo       int `yaml:"sold_out_memo"` // openers of sold-out packets kept in process
}

// Cache tunes the memcached clients.
type Cache struct {
	Timeout Duration `yaml:"timeout"`
	Conns   int      `yaml:"conns"`
}

// Archive configures the archival cron.
type Archive struct {
	RetentionDays int `yaml:"retention_days"` // days a day stays in the live tables
	AheadDays     int `yaml:"ahead_days"`     // days of tables created ahead
	// Textfile is where `hbarchive run` writes its summary as Prometheus
	// metrics (node_exporter's textfile format); "" writes none.
	Textfile string `yaml:"textfile"`
	// StatementDir is where `hbarchive run` writes the previous day's
	// wallet statement (statement-YYYY-MM-DD.csv, atomically); "": none.
	StatementDir string `yaml:"statement_dir"`
}

// Admin configures the admin listeners (metrics, health, pprof) of the
// long-running processes: loopback by default, never the public port. Each
// process's -admin flag overrides its address ("" turns it off).
type Admin struct {
	Router  string `yaml:"router"`
	Server  string `yaml:"server"`
	Settler string `yaml:"settler"`
	Watch   string `yaml:"watch"` // hbwatch's
	// DrainGrace is how long a server answers not-ready on SIGTERM before
	// it stops taking requests and drains its queues, so routers notice.
	DrainGrace Duration `yaml:"drain_grace"`
}

// Router configures the public entry point.
type Router struct {
	Listen       string `yaml:"listen"`
	RouterLimits `yaml:",inline"`
	// Coalesce batches the concurrent requests bound for one server into
	// one signed exchange (POST /internal/v1/batch).
	Coalesce Coalesce `yaml:"coalesce"`
}

// Coalesce configures the router's request coalescing.
type Coalesce struct {
	// Batch is the most requests in one batch; 0 turns coalescing off
	// (each request is one exchange with its server).
	Batch int `yaml:"batch"`
	// InFlight is how many batches may be in flight to one server: while
	// fewer are, a request leaves at once; others gather for the next.
	// One (the default) makes the fullest batches: on 2 cores it served
	// 35% more pings per core-second at 64 connections than two, and as
	// many hot opens, with Batch large enough (256) that one batch carries
	// what gathered during a commit (BENCHMARKS.md, issue 27).
	InFlight int `yaml:"in_flight"`
}

// Set is one SET: its servers, its MySQL and its memcached.
type Set struct {
	Name     string   `yaml:"name"`
	Servers  []string `yaml:"servers"`
	MySQLDSN string   `yaml:"mysql_dsn"`
	// Replicas are the DSNs of the MySQL's replicas (same account), the
	// candidates of hbctl set failover.
	Replicas  []string `yaml:"replicas"`
	Memcached []string `yaml:"memcached"`
	// Admin lists the admin listeners of the SET's servers (in the order
	// of Servers) and SettlerAdmin its settlers': the router's operator
	// dashboard scrapes their /metrics and /readyz. Optional.
	Admin        []string `yaml:"admin"`
	SettlerAdmin []string `yaml:"settler_admin"`
	// ArchiveDSN is the SET's cold store (default: its MySQL, databases
	// db_xx_archive).
	ArchiveDSN string `yaml:"archive_dsn"`
}

// Replication configures replicated SET databases (hbctl set failover and
// rejoin): the accounts hbctl acts with and the semi-sync timeout it sets.
type Replication struct {
	// SemiSyncTimeout is rpl_semi_sync_master_timeout: how long a commit
	// waits for a replica's acknowledgement before the primary degrades
	// to asynchronous replication. 0 (the default, for money) waits
	// forever: no commit is acknowledged that is not on two machines,
	// and writes stall while no replica answers.
	SemiSyncTimeout Duration `yaml:"semi_sync_timeout"`
	// AdminUser and AdminPassword: the operator's account on every SET
	// database (read_only, KILL, replication: SUPER, READ ONLY ADMIN,
	// CONNECTION ADMIN, REPLICATION SLAVE ADMIN).
	AdminUser     string `yaml:"admin_user"`
	AdminPassword string `yaml:"admin_password"`
	// User and Password: the account replicas connect with (REPLICATION
	// SLAVE).
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// WaitApplied bounds the wait for a replica to apply what it received
	// before it is promoted (default 60s).
	WaitApplied Duration `yaml:"wait_applied"`
	// ReadReplica makes a SET's servers read packet details (GET
	// /v1/packets/{id}) from the SET's first replica while it replicates
	// within MaxReplicaLag; never the open path's reads, which decide
	// money. A packet the replica lacks (not applied yet) is read from the
	// primary.
	ReadReplica bool `yaml:"read_replica"`
	// MaxReplicaLag is how far behind the replica may be and still serve
	// reads: it must apply the primary's position within it (default 1s).
	MaxReplicaLag Duration `yaml:"max_replica_lag"`
}

// Core names the members of the core group, the replicated MariaDB that
// holds the meta and wallet databases apart from every SET's: losing it
// stops no SET's opens, and hbctl core failover promotes one of its
// replicas. The server of meta_dsn and wallet_dsn is the member the group
// started with; every process probes all the members and follows the
// writable one with the highest failover epoch, so the configuration
// need not change after a failover.
type Core struct {
	// Replicas are the addresses (host:port) of the group's other
	// members; meta_dsn's and wallet_dsn's account and databases are
	// used on each. None: the meta and wallet server is not replicated.
	Replicas []string `yaml:"replicas"`
}

// CoreMembers returns the addresses of the core group's members, the
// server of meta_dsn first; nil when the group has no replicas.
func (c *Config) CoreMembers() []string {
	if len(c.Core.Replicas) == 0 {
		return nil
	}
	return append([]string{dsnAddr(c.MetaDSN)}, c.Core.Replicas...)
}

// dsnAddr is a DSN's network address ("" when it does not parse, which
// checkCore refuses). It is not sqldb.Addr, the one of messages: configs
// imports nothing of hongbao's (architecture_test.go), and a member's
// address must not read "?".
func dsnAddr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	return cfg.Addr
}

// checkCore validates the core group: addresses of distinct members, the meta
// and wallet databases on the same one.
func (c *Config) checkCore() error {
	if len(c.Core.Replicas) == 0 {
		return nil
	}
	meta, wallet := dsnAddr(c.MetaDSN), dsnAddr(c.WalletDSN)
	if meta == "" || meta != wallet {
		return fmt.Errorf("core: replicas need meta_dsn and wallet_dsn on the same server (meta %q, wallet %q)", meta, wallet)
	}
	seen := map[string]bool{meta: true}
	for i, r := range c.Core.Replicas {
		if _, _, err := net.SplitHostPort(r); err != nil {
			return fmt.Errorf("core: replicas[%d]: %q is not host:port: %w", i, r, err)
		}
		if seen[r] {
			return fmt.Errorf("core: replicas[%d]: %s is listed twice (or is meta_dsn's server)", i, r)
		}
		seen[r] = true
	}
	return nil
}

// Cold returns the DSN of the SET's archive.
func (s Set) Cold() string {
	if s.ArchiveDSN != "" {
		return s.ArchiveDSN
	}
	return s.MySQLDSN
}

// Duration is a time.Duration written as "24h" in YAML and environment.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a Go duration string ("24h0m0s"), which
// UnmarshalYAML reads back: a configuration written by a program (the test
// harness's) loads like a hand-written one.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Load reads path, applies environment overrides from env (os.Environ form)
// and checks the result.
func Load(path string, env []string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := Defaults()
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := override(reflect.ValueOf(c).Elem(), "HB", lookup(env)); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Defaults is the configuration before the file is read.
func Defaults() *Config {
	return &Config{
		TimeZone: "Asia/Shanghai",
		TokenTTL: Duration(24 * time.Hour),
		// The domain's DefaultLimits (a test of set/settings
		// keeps the two equal; configs imports nothing of hongbao's).
		Limits: Limits{MaxTotal: 20000, MaxCount: 100, MaxShare: 20000, Expiry: Duration(24 * time.Hour), MaxGreeting: 200,
			MaxAudience: 500},
		Queue: Queue{Size: 1024, Batch: 256, Idle: Duration(5 * time.Second), TxTimeout: Duration(5 * time.Second), SlotCap: 2,
			Merge: 64, Committers: 4, Memo: 1_000_000},
		Cache:         Cache{Timeout: Duration(200 * time.Millisecond), Conns: 64},
		Router:        Router{Listen: "127.0.0.1:8080", RouterLimits: defaultRouterLimits(), Coalesce: Coalesce{Batch: 256, InFlight: 1}},
		Archive:       Archive{RetentionDays: 7, AheadDays: 2},
		Settle:        Settle{SweepAfter: Duration(30 * time.Second), DeliverEvery: Duration(100 * time.Millisecond)},
		Replication:   Replication{AdminUser: "root", User: "repl", WaitApplied: Duration(time.Minute), MaxReplicaLag: Duration(time.Second)},
		Admin:         Admin{Router: "127.0.0.1:9080", Server: "127.0.0.1:9081", Settler: "127.0.0.1:9082", Watch: "127.0.0.1:9083", DrainGrace: Duration(2 * time.Second)},
		Watch:         Watch{Interval: Duration(time.Second), After: Duration(10 * time.Second), ProbeTimeout: Duration(time.Second), Refresh: Duration(5 * time.Second)},
		Etcd:          Etcd{TTL: Duration(10 * time.Second)},
		DBConns:       64,
		ShutdownGrace: Duration(20 * time.Second),
		LogLevel:      "info",
	}
}

// maxTotal bounds any packet: 10^12 fen (10 billion CNY).
const maxTotal = 1e12

// Check validates the configuration.
func (c *Config) Check() error {
	errs := c.Webhooks.check()
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		errs = append(errs, fmt.Errorf("timezone: %w", err))
	}
	if len(c.Secret) < 16 {
		errs = append(errs, errors.New("secret: must be at least 16 bytes"))
	}
	if c.WalletDSN == "" {
		errs = append(errs, errors.New("wallet_dsn: required (money moves through the wallet)"))
	}
	if len(c.InternalSecret) < 16 {
		errs = append(errs, errors.New("internal_secret: must be at least 16 bytes"))
	}
	errs = append(errs, c.Limits.check()...)
	if q := c.Queue; q.Size < 1 || q.Batch < 1 || q.SlotCap < 1 || q.Merge < 1 || q.Committers < 1 || q.Idle <= 0 || q.TxTimeout <= 0 || q.Memo < 0 {
		errs = append(errs, errors.New("queue: size, batch, slot_cap, merge, committers, idle and tx_timeout must be positive, sold_out_memo not negative"))
	}
	if c.Queue.Committers > c.DBConns {
		errs = append(errs, errors.New("queue: committers must be at most db_conns"))
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("log_level: %w", err))
	}
	if err := c.Router.check(); err != nil {
		errs = append(errs, err)
	}
	if co := c.Router.Coalesce; co.Batch < 0 || co.Batch > 512 || co.InFlight < 0 {
		errs = append(errs, errors.New("router.coalesce: batch must be 0 (off) to 512, in_flight not negative"))
	}
	if c.Dashboard.AuditEvery < 0 {
		errs = append(errs, errors.New("dashboard: audit_every must not be negative"))
	}
	if c.Admin.DrainGrace < 0 || c.Admin.DrainGrace >= c.ShutdownGrace {
		errs = append(errs, errors.New("admin: drain_grace must be at least 0 and less than shutdown_grace"))
	}
	if r := c.Replication; r.SemiSyncTimeout < 0 || r.WaitApplied <= 0 {
		errs = append(errs, errors.New("replication: semi_sync_timeout must be at least 0 (0: wait forever), wait_applied positive"))
	}
	if err := c.checkCore(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Etcd.check(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Watch.check(); err != nil {
		errs = append(errs, err)
	}
	if c.Replication.MaxReplicaLag < 0 {
		errs = append(errs, errors.New("replication: max_replica_lag must be at least 0"))
	}
	if c.Settle.SweepAfter <= 0 {
		errs = append(errs, errors.New("settle: sweep_after must be positive"))
	}
	if d := c.Settle.DeliverEvery; d < 0 || d > Duration(time.Second) {
		errs = append(errs, errors.New("settle: deliver_every must be between 0 and 1s"))
	}
	if a := c.Archive; a.AheadDays < 0 || a.AheadDays > 7 {
		errs = append(errs, errors.New("archive: ahead_days must be between 0 and 7"))
	}
	seen := map[string]bool{}
	for i, s := range c.Sets {
		if s.Name == "" || seen[s.Name] {
			errs = append(errs, fmt.Errorf("sets[%d]: name missing or repeated", i))
		}
		seen[s.Name] = true
		if s.MySQLDSN == "" {
			errs = append(errs, fmt.Errorf("sets[%d] (%s): mysql_dsn missing", i, s.Name))
		}
	}
	return errors.Join(errs...)
}

// Location is the cluster's time zone.
func (c *Config) Location() *time.Location {
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil { // Check refused it already
		return time.UTC
	}
	return loc
}

// Set returns the SET called name.
func (c *Config) Set(name string) (Set, error) {
	for _, s := range c.Sets {
		if s.Name == name {
			return s, nil
		}
	}
	return Set{}, fmt.Errorf("config: no SET named %q", name)
}

func lookup(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// override walks the struct and sets every scalar field whose variable
// (prefix + "_" + upper-cased yaml key) is in env. Lists of SETs are left
// to the file.
func override(v reflect.Value, prefix string, env map[string]string) error {
	t := v.Type()
	for i := range t.NumField() {
		tag, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		f := v.Field(i)
		if opts == "inline" && f.Kind() == reflect.Struct {
			if err := override(f, prefix, env); err != nil { // its keys are the parent's
				return err
			}
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		name := prefix + "_" + strings.ToUpper(tag)
		if f.Kind() == reflect.Struct {
			if err := override(f, name, env); err != nil {
				return err
			}
			continue
		}
		s, ok := env[name]
		if !ok {
			continue
		}
		if err := setScalar(f, s); err != nil {
			return fmt.Errorf("%s=%q: %w", name, s, err)
		}
	}
	return nil
}

func setScalar(f reflect.Value, s string) error {
	switch {
	case f.Type() == reflect.TypeOf(Duration(0)):
		d, err := time.ParseDuration(s)
		f.SetInt(int64(d))
		return err
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		f.SetBool(b)
		return err
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		f.SetInt(n)
		return err
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.ValueOf(strings.Split(s, ",")))
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// Logger builds the JSON logger of a process. Sampling is off: the lines
// about money must never be dropped as repetitive.
func (c *Config) Logger(process string) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	zc.Sampling = nil
	zc.DisableStacktrace = true
	lvl, err := zapcore.ParseLevel(c.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("config: log_level: %w", err)
	}
	// The core takes everything from info; moneyCore applies log_level
	// to all but the money lines (MoneyLogger).
	zc.Level = zap.NewAtomicLevelAt(min(lvl, zapcore.InfoLevel))
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	log, err := zc.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return MoneyCore(c, lvl) }))
	if err != nil {
		return nil, fmt.Errorf("config: logger: %w", err)
	}
	return log.With(zap.String("process", process)), nil
}
