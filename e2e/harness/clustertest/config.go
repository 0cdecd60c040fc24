package clustertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hongbao-dev/hongbao/configs"
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
	// Extra is more top-level YAML, decoded onto the configuration before
	// it is written (a key configs.Config lacks fails the test).
	Extra string
	// RouterExtra is more YAML of the router section (its abuse limits),
	// decoded onto it; "" gives the test profile: no limits, so tests that
	// load the cluster measure it, not the limits.
	RouterExtra string
	Sets        []Set // their Name, Addrs, DSN and Memcached
	// Edit, when set, changes the configuration last, in Go: what Extra
	// says in YAML, checked by the compiler.
	Edit func(*configs.Config)
}

// File returns the configuration cfg stands for: configs.Defaults with
// the test profile and cfg's choices, what WriteConfig writes.
func (cfg Config) File() (*configs.Config, error) {
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if cfg.Expiry <= 0 {
		cfg.Expiry = 24 * time.Hour
	}
	if cfg.DBConns <= 0 {
		cfg.DBConns = 16
	}
	f := configs.Defaults()
	f.TimeZone, f.Secret, f.InternalSecret, f.LogLevel = "Asia/Shanghai", cfg.Secret, cfg.InternalSecret, cfg.LogLevel
	f.TokenTTL = configs.Duration(24 * time.Hour)
	// The defaults' other limits (the audience's size, no daily limits).
	f.Limits.MaxTotal, f.Limits.MaxCount, f.Limits.MaxShare = 20000, 100, 20000
	f.Limits.Expiry, f.Limits.MaxGreeting = configs.Duration(cfg.Expiry), 200
	// Small batches and a small memo: a test's few packets go through
	// the same paths a crowd's do.
	f.Queue = configs.Queue{Size: 1024, Batch: 32, Merge: 16, Committers: 4, Idle: configs.Duration(5 * time.Second),
		TxTimeout: configs.Duration(5 * time.Second), SlotCap: 2, Memo: 10000}
	f.Cache = configs.Cache{Timeout: configs.Duration(200 * time.Millisecond), Conns: 64}
	f.DBConns, f.ShutdownGrace = cfg.DBConns, configs.Duration(5*time.Second)
	if cfg.Router != "" {
		f.Router.Listen = cfg.Router
		if cfg.RouterExtra == "" {
			f.Router.MaxPerAddress = 0
			f.Router.Open.PerSecond, f.Router.Grab.PerSecond, f.Router.Send.PerSecond = 0, 0, 0
		} else if err := decode(cfg.RouterExtra, &f.Router); err != nil {
			return nil, fmt.Errorf("clustertest: RouterExtra: %w", err)
		}
	}
	f.MetaDSN, f.WalletDSN = cfg.MetaDSN, cfg.WalletDSN
	f.Core.Replicas = cfg.CoreReplicas
	if cfg.Extra != "" {
		if err := decode(cfg.Extra, f); err != nil {
			return nil, fmt.Errorf("clustertest: Extra: %w", err)
		}
	}
	for _, s := range cfg.Sets {
		set := configs.Set{Name: s.Name, Servers: s.Addrs, MySQLDSN: s.DSN, Memcached: []string{s.Memcached}, Admin: s.Admin}
		if s.Group != nil {
			set.MySQLDSN = s.Group.Primary.AppDSN()
			for _, r := range s.Group.Replicas {
				set.Replicas = append(set.Replicas, r.AppDSN())
			}
		}
		// The settler's admin listener, which the router's dashboard
		// scrapes, as the servers'.
		if s.SettlerAdmin != "" {
			set.SettlerAdmin = []string{s.SettlerAdmin}
		}
		f.Sets = append(f.Sets, set)
	}
	if cfg.Edit != nil {
		cfg.Edit(f)
	}
	return f, nil
}

// decode decodes YAML onto v, refusing keys v lacks, as configs.Load does.
func decode(src string, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// WriteConfig writes cfg as YAML to path: cfg.File() marshalled, so the
// file has exactly configs.Config's keys.
func WriteConfig(t testing.TB, path string, cfg Config) {
	t.Helper()
	f, err := cfg.File()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
