package clustertest_test

import (
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

// TestWriteConfigLoadsBack: the file WriteConfig writes loads (configs.Load,
// its checks included) to exactly the configuration it was written from,
// and Extra, RouterExtra and Edit reach it. It needs no database.
func TestWriteConfigLoadsBack(t *testing.T) {
	cfg := clustertest.Config{
		Secret: "config-test-user-secret-0123456789", InternalSecret: "config-test-internal-secret-0123456789",
		Expiry: 3 * time.Second, Router: "127.0.0.1:18080", RouterExtra: "open: {per_second: 5, burst: 5}",
		MetaDSN: "root@tcp(127.0.0.1:13306)/hb_meta", WalletDSN: "root@tcp(127.0.0.1:13306)/hb_wallet",
		CoreReplicas: []string{"127.0.0.1:13307"},
		Extra:        "archive:\n  retention_days: 3\n",
		Sets: []clustertest.Set{
			{Name: "a", Addrs: []string{"127.0.0.1:18081", "127.0.0.1:18082"}, DSN: "root@tcp(127.0.0.1:13306)/",
				Memcached: "127.0.0.1:21211", Admin: []string{"127.0.0.1:19081", "127.0.0.1:19082"}, SettlerAdmin: "127.0.0.1:19085"},
			{Name: "b", Addrs: []string{"127.0.0.1:18083"}, DSN: "root@tcp(127.0.0.1:13307)/", Memcached: "127.0.0.1:21212"},
		},
		Edit: func(f *configs.Config) { f.DevGrant = 1000 },
	}
	want, err := cfg.File()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	clustertest.WriteConfig(t, path, cfg)
	got, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Compared as YAML: an empty list written loads back as an empty
	// list where the original had none, which says the same.
	if g, w := marshal(t, got), marshal(t, want); g != w {
		t.Errorf("loaded back:\n%s\nwritten from:\n%s", g, w)
	}
	for what, ok := range map[string]bool{
		"limits.expiry":       got.Limits.Expiry.D() == 3*time.Second,
		"router.open":         got.Router.Open == configs.Rate{PerSecond: 5, Burst: 5},
		"router.grab":         got.Router.Grab == configs.Defaults().Router.Grab,
		"archive":             got.Archive.RetentionDays == 3 && got.Archive.AheadDays == configs.Defaults().Archive.AheadDays,
		"dev_grant":           got.DevGrant == 1000,
		"core.replicas":       len(got.Core.Replicas) == 1 && got.Core.Replicas[0] == "127.0.0.1:13307",
		"sets[0].admin":       len(got.Sets[0].Admin) == 2 && got.Sets[0].SettlerAdmin[0] == "127.0.0.1:19085",
		"sets[1].memcached":   got.Sets[1].Memcached[0] == "127.0.0.1:21212",
		"queue (profile)":     got.Queue.Batch == 32 && got.Queue.Memo == 10000,
		"log_level (profile)": got.LogLevel == "warn",
	} {
		if !ok {
			t.Errorf("%s: not as written: %+v", what, got)
		}
	}
	if _, err := (clustertest.Config{Extra: "no_such_key: 1\n"}).File(); err == nil {
		t.Error("Extra with a key configs.Config lacks was accepted")
	}
}

func marshal(t *testing.T, c *configs.Config) string {
	t.Helper()
	raw, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
