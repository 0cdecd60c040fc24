package configs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeConfig writes a config file made of dev.yaml with edit applied.
func writeConfig(t *testing.T, edit func(string) string) string {
	t.Helper()
	raw, err := os.ReadFile("dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "test.yaml")
	if err := os.WriteFile(path, []byte(edit(string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func replace(t *testing.T, old, new string) func(string) string {
	t.Helper()
	return func(s string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("dev.yaml has no %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func TestLoadDev(t *testing.T) {
	c, err := Load("dev.yaml", nil)
	if err != nil {
		t.Fatalf("Load(dev.yaml): %v", err)
	}
	if c.TimeZone != "Asia/Shanghai" || c.Location().String() != "Asia/Shanghai" {
		t.Errorf("time zone %q / %s", c.TimeZone, c.Location())
	}
	if c.Secret != "dev-secret-change-me-0123456789" {
		t.Errorf("secret %q", c.Secret)
	}
	if c.TokenTTL.D() != 24*time.Hour {
		t.Errorf("token_ttl %s", c.TokenTTL.D())
	}
	wantLimits := Limits{MaxTotal: 20000, MaxCount: 100, MaxShare: 20000, Expiry: Duration(24 * time.Hour), MaxGreeting: 200, MaxAudience: 500}
	if c.Limits != wantLimits {
		t.Errorf("limits = %+v, want %+v", c.Limits, wantLimits)
	}
	wantQueue := Queue{Size: 1024, Batch: 256, Idle: Duration(5 * time.Second), TxTimeout: Duration(5 * time.Second), SlotCap: 2,
		Merge: 128, Committers: 4, Memo: 1_000_000}
	if c.Queue != wantQueue {
		t.Errorf("queue = %+v, want %+v", c.Queue, wantQueue)
	}
	if c.Cache.Timeout.D() != 200*time.Millisecond || c.Cache.Conns != 64 {
		t.Errorf("cache = %+v", c.Cache)
	}
	if c.DBConns != 64 || c.ShutdownGrace.D() != 20*time.Second || c.LogLevel != "info" || c.Router.Listen != "127.0.0.1:8080" {
		t.Errorf("db_conns %d, shutdown_grace %s, log_level %q, router %q", c.DBConns, c.ShutdownGrace.D(), c.LogLevel, c.Router.Listen)
	}
	if len(c.Sets) != 2 || c.Sets[0].Name != "a" || c.Sets[1].Name != "b" {
		t.Fatalf("sets = %+v, want a and b", c.Sets)
	}
	b, err := c.Set("b")
	if err != nil || len(b.Servers) != 2 || b.MySQLDSN == "" || len(b.Memcached) != 1 {
		t.Errorf("Set(b) = %+v, %v", b, err)
	}
	if _, err := c.Set("zz"); err == nil {
		t.Error("Set(zz) found a SET that does not exist")
	}
	if _, err := c.Logger("test"); err != nil {
		t.Errorf("Logger: %v", err)
	}
	if got := c.CoreMembers(); !slices.Equal(got, []string{"127.0.0.1:3346", "127.0.0.1:3347"}) {
		t.Errorf("CoreMembers() = %q, want the core primary then its replica", got)
	}
}

func TestLoadEnvOverrides(t *testing.T) {
	env := []string{
		"PATH=/usr/bin",
		"HB_LIMITS_MAX_TOTAL=50000",
		"HB_QUEUE_IDLE=9s",
		"HB_SECRET=an-override-secret-of-32-bytes!!",
		"HB_LOG_LEVEL=warn",
		"HB_ROUTER_LISTEN=0.0.0.0:9000",
		"HB_LIMITS_EXPIRY=1h",
		"HB_QUEUE_BATCH=1",
		"HB_DB_CONNS=8",
		"HB_TIMEZONE=UTC",
		"HB_ETCD_ENDPOINTS=10.0.0.1:2379,10.0.0.2:2379",
		"HB_LIMITS_MAX_AUDIENCE=40",
		"HB_LIMITS_DAILY_SEND_COUNT=10",
		"HB_LIMITS_DAILY_SEND_TOTAL=500000",
		"HB_LIMITS_DAILY_RECEIVE_TOTAL=300000",
		"HB_SETTLE_DELIVER_EVERY=250ms",
		"HB_WATCH_ACCEPT_SINGLE_COPY=true",
		"HB_NOT_A_KEY=1", // unknown variables are ignored
		"NOEQUALS",
	}
	c, err := Load("dev.yaml", env)
	if err != nil {
		t.Fatalf("Load with overrides: %v", err)
	}
	if c.Limits.MaxTotal != 50000 {
		t.Errorf("max_total = %d, want 50000", c.Limits.MaxTotal)
	}
	if c.Queue.Idle.D() != 9*time.Second {
		t.Errorf("queue idle = %s, want 9s", c.Queue.Idle.D())
	}
	if c.Secret != "an-override-secret-of-32-bytes!!" {
		t.Errorf("secret = %q", c.Secret)
	}
	if c.WalletDSN != "hongbao:hongbao@tcp(127.0.0.1:3346)/hb_wallet" {
		t.Errorf("wallet_dsn = %q", c.WalletDSN)
	}
	if c.LogLevel != "warn" || c.Router.Listen != "0.0.0.0:9000" || c.Limits.Expiry.D() != time.Hour ||
		c.Queue.Batch != 1 || c.DBConns != 8 || c.Location() != time.UTC {
		t.Errorf("overrides not applied: %+v", c)
	}
	if want := []string{"10.0.0.1:2379", "10.0.0.2:2379"}; !slices.Equal(c.Etcd.Endpoints, want) || c.Etcd.TTL.D() != 10*time.Second {
		t.Errorf("etcd = %+v, want endpoints %v and the default ttl", c.Etcd, want)
	}
	if !c.Watch.AcceptSingleCopy {
		t.Errorf("watch.accept_single_copy = false, want the override's true")
	}
	if l := c.Limits; l.MaxAudience != 40 || l.DailySendCount != 10 || l.DailySendTotal != 500000 || l.DailyReceiveTotal != 300000 {
		t.Errorf("audience and daily limits overrides not applied: %+v", l)
	}
	if c.Settle.DeliverEvery.D() != 250*time.Millisecond || c.Settle.SweepAfter.D() != 30*time.Second {
		t.Errorf("settle = %+v, want deliver_every 250ms and the file's sweep_after", c.Settle)
	}
	// What was not overridden keeps the file's value.
	if c.Limits.MaxCount != 100 || c.Queue.Size != 1024 || c.InternalSecret != "dev-internal-secret-0123456789" {
		t.Errorf("untouched values changed: %+v", c)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		path    func(t *testing.T) string
		env     []string
		mention []string // substrings the error must contain
	}{
		{"bad int override", nil, []string{"HB_LIMITS_MAX_TOTAL=lots"}, []string{"HB_LIMITS_MAX_TOTAL"}},
		{"fractional int override", nil, []string{"HB_LIMITS_MAX_COUNT=1.5"}, []string{"HB_LIMITS_MAX_COUNT"}},
		{"duration without unit", nil, []string{"HB_QUEUE_IDLE=9"}, []string{"HB_QUEUE_IDLE"}},
		{"bad duration", nil, []string{"HB_TOKEN_TTL=forever"}, []string{"HB_TOKEN_TTL"}},
		{"bad bool override", nil, []string{"HB_WATCH_ACCEPT_SINGLE_COPY=sometimes"}, []string{"HB_WATCH_ACCEPT_SINGLE_COPY"}},
		{"list of SETs", nil, []string{"HB_SETS=a"}, []string{"HB_SETS"}},
		{"short secret override", nil, []string{"HB_SECRET=short"}, []string{"secret"}},
		{"short internal secret", nil, []string{"HB_INTERNAL_SECRET=short"}, []string{"internal_secret"}},
		{"negative max total", nil, []string{"HB_LIMITS_MAX_TOTAL=-1"}, []string{"max_total"}},
		{"zero max audience", nil, []string{"HB_LIMITS_MAX_AUDIENCE=0"}, []string{"max_audience"}},
		{"negative daily send count", nil, []string{"HB_LIMITS_DAILY_SEND_COUNT=-1"}, []string{"daily_send_count"}},
		{"negative daily receive total", nil, []string{"HB_LIMITS_DAILY_RECEIVE_TOTAL=-5"}, []string{"daily_receive_total"}},
		{"fractional daily send total", nil, []string{"HB_LIMITS_DAILY_SEND_TOTAL=1.5"}, []string{"HB_LIMITS_DAILY_SEND_TOTAL"}},
		{"zero expiry", nil, []string{"HB_LIMITS_EXPIRY=0s"}, []string{"expiry"}},
		{"bad log level", nil, []string{"HB_LOG_LEVEL=loud"}, []string{"log_level"}},
		{"15-byte secret", nil, []string{"HB_SECRET=123456789012345"}, []string{"secret"}},
		{"empty wallet DSN", nil, []string{"HB_WALLET_DSN="}, []string{"wallet_dsn"}},
		{"etcd ttl under a second", nil, []string{"HB_ETCD_ENDPOINTS=127.0.0.1:2379", "HB_ETCD_TTL=500ms"}, []string{"etcd: ttl"}},
		{"bad time zone", nil, []string{"HB_TIMEZONE=Mars/Olympus"}, []string{"timezone"}},
		{"negative deliver_every", nil, []string{"HB_SETTLE_DELIVER_EVERY=-1s"}, []string{"deliver_every"}},
		{"deliver_every of two seconds", nil, []string{"HB_SETTLE_DELIVER_EVERY=2s"}, []string{"deliver_every"}},
		{"missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.yaml") }, nil, []string{"none.yaml"}},
		{"unknown top-level key", func(t *testing.T) string {
			return writeConfig(t, func(s string) string { return s + "\nbogus_key: 1\n" })
		}, nil, []string{"bogus_key"}},
		{"unknown nested key", func(t *testing.T) string {
			return writeConfig(t, replace(t, "  max_count: 100", "  max_cnt: 100"))
		}, nil, []string{"max_cnt"}},
		{"short secret in file", func(t *testing.T) string {
			return writeConfig(t, replace(t, "secret: dev-secret-change-me-0123456789", "secret: tooshort"))
		}, nil, []string{"secret"}},
		{"bad duration in file", func(t *testing.T) string {
			return writeConfig(t, replace(t, "  idle: 5s", "  idle: 5"))
		}, nil, []string{"line"}},
		{"string for int in file", func(t *testing.T) string {
			return writeConfig(t, replace(t, "  max_total: 20000", "  max_total: lots"))
		}, nil, []string{"lots"}},
		{"repeated SET name", func(t *testing.T) string {
			return writeConfig(t, replace(t, "  - name: b", "  - name: a"))
		}, nil, []string{"sets[1]"}},
		{"core replica not host:port", func(t *testing.T) string {
			return writeConfig(t, replace(t, `replicas: ["127.0.0.1:3347"]`, `replicas: ["hongbao:hongbao@tcp(127.0.0.1:3347)/"]`))
		}, nil, []string{"core: replicas[0]", "host:port"}},
		{"core replica is the primary", func(t *testing.T) string {
			return writeConfig(t, replace(t, `replicas: ["127.0.0.1:3347"]`, `replicas: ["127.0.0.1:3346"]`))
		}, nil, []string{"core: replicas[0]", "twice"}},
		{"core with wallet elsewhere", nil, []string{`HB_WALLET_DSN=hongbao:hongbao@tcp(127.0.0.1:3316)/hb_wallet`},
			[]string{"core:", "wallet_dsn"}},
		{"SET without DSN", func(t *testing.T) string {
			return writeConfig(t, replace(t, `    mysql_dsn: "hongbao:hongbao@tcp(127.0.0.1:3326)/"`, ""))
		}, nil, []string{"mysql_dsn"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "dev.yaml"
			if tt.path != nil {
				path = tt.path(t)
			}
			c, err := Load(path, tt.env)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", c)
			}
			if c != nil {
				t.Errorf("Load returned a config with error %v", err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestDefaultsNeedSecrets(t *testing.T) {
	// The defaults alone are not a working config: secrets must be set.
	err := Defaults().Check()
	if err == nil || !strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "internal_secret") {
		t.Errorf("Defaults().Check() = %v, want secret and internal_secret refused", err)
	}
	// Secrets of exactly 16 bytes are enough (other required settings,
	// such as DSNs, may still be missing from the bare defaults).
	d := Defaults()
	d.Secret, d.InternalSecret = strings.Repeat("s", 16), strings.Repeat("i", 16)
	if err := d.Check(); err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("defaults with 16-byte secrets: %v", err)
	}
}

// TestSettleDeliverEveryBounds: the settlers' pace takes 0 (back to back)
// up to a second, both ends included.
func TestSettleDeliverEveryBounds(t *testing.T) {
	for _, v := range []struct {
		env  string
		want time.Duration
	}{{"0s", 0}, {"1s", time.Second}, {"250ms", 250 * time.Millisecond}} {
		c, err := Load("dev.yaml", []string{"HB_SETTLE_DELIVER_EVERY=" + v.env})
		if err != nil {
			t.Errorf("deliver_every %s: %v", v.env, err)
			continue
		}
		if got := c.Settle.DeliverEvery.D(); got != v.want {
			t.Errorf("deliver_every %s: %v, want %v", v.env, got, v.want)
		}
	}
}
