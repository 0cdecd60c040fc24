package clustertest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Config is a configuration file of the project's binaries: what a test
// chooses. Everything else (time zone, token life, limits, queue, cache,
// shutdown grace) is the test profile every cluster runs with.
type Config struct {
	Secret, InternalSecret string
	LogLevel               string        // default warn
	Expiry                 time.Duration // limits.expiry; default 24h
	DBConns                int           // default 16
	Router                 string        // router.listen; "" for none
	MetaDSN, WalletDSN     string        // "" for none
	CoreReplicas           []string      // core.replicas: the core group's other members (host:port)
	Extra                  string        // more top-level YAML, written as is
	// RouterExtra is more YAML of the router section (its abuse limits),
	// written as is; "" gives the test profile: no limits, so tests that
	// load the cluster measure it, not the limits.
	RouterExtra string
	Sets        []Set // their Name, Addrs, DSN and Memcached
}

// WriteConfig writes cfg as YAML to path.
func WriteConfig(t testing.TB, path string, cfg Config) {
	t.Helper()
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if cfg.Expiry <= 0 {
		cfg.Expiry = 24 * time.Hour
	}
	if cfg.DBConns <= 0 {
		cfg.DBConns = 16
	}
	var b strings.Builder
	fmt.Fprintf(&b, "timezone: Asia/Shanghai\nsecret: %q\ninternal_secret: %q\ntoken_ttl: 24h\nlog_level: %s\n",
		cfg.Secret, cfg.InternalSecret, cfg.LogLevel)
	fmt.Fprintf(&b, `limits:
  max_total: 20000
  max_count: 100
  max_share: 20000
  expiry: %s
  max_greeting: 200
queue:
  size: 1024
  batch: 32
  merge: 16
  committers: 4
  idle: 5s
  tx_timeout: 5s
  slot_cap: 2
  sold_out_memo: 10000
cache:
  timeout: 200ms
  conns: 64
db_conns: %d
shutdown_grace: 5s
`, cfg.Expiry, cfg.DBConns)
	if cfg.Router != "" {
		fmt.Fprintf(&b, "router:\n  listen: %q\n", cfg.Router)
		extra := cfg.RouterExtra
		if extra == "" {
			extra = "max_per_address: 0\nopen: {per_second: 0}\ngrab: {per_second: 0}\nsend: {per_second: 0}\n"
		}
		for _, line := range strings.Split(strings.TrimSuffix(extra, "\n"), "\n") {
			b.WriteString("  " + line + "\n")
		}
	}
	if cfg.MetaDSN != "" {
		fmt.Fprintf(&b, "meta_dsn: %q\n", cfg.MetaDSN)
	}
	if cfg.WalletDSN != "" {
		fmt.Fprintf(&b, "wallet_dsn: %q\n", cfg.WalletDSN)
	}
	if len(cfg.CoreReplicas) > 0 {
		q := make([]string, len(cfg.CoreReplicas))
		for i, r := range cfg.CoreReplicas {
			q[i] = strconv.Quote(r)
		}
		fmt.Fprintf(&b, "core:\n  replicas: [%s]\n", strings.Join(q, ", "))
	}
	if cfg.Extra != "" {
		b.WriteString(strings.TrimSuffix(cfg.Extra, "\n") + "\n")
	}
	b.WriteString("sets:\n")
	for _, s := range cfg.Sets {
		addrs := make([]string, len(s.Addrs))
		for i, a := range s.Addrs {
			addrs[i] = strconv.Quote(a)
		}
		dsn := s.DSN
		if s.Group != nil {
			dsn = s.Group.Primary.AppDSN()
		}
		fmt.Fprintf(&b, "  - name: %q\n    servers: [%s]\n    mysql_dsn: %q\n    memcached: [%q]\n",
			s.Name, strings.Join(addrs, ", "), dsn, s.Memcached)
		if s.Group != nil {
			rs := make([]string, len(s.Group.Replicas))
			for i, r := range s.Group.Replicas {
				rs[i] = strconv.Quote(r.AppDSN())
			}
			fmt.Fprintf(&b, "    replicas: [%s]\n", strings.Join(rs, ", "))
		}
		writeAdmin(&b, s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeAdmin lists a SET's admin listeners, which the router's dashboard
// scrapes.
func writeAdmin(b *strings.Builder, s Set) {
	if len(s.Admin) > 0 {
		q := make([]string, len(s.Admin))
		for i, a := range s.Admin {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(b, "    admin: [%s]\n", strings.Join(q, ", "))
	}
	if s.SettlerAdmin != "" {
		fmt.Fprintf(b, "    settler_admin: [%q]\n", s.SettlerAdmin)
	}
}
