package crash_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/router"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestCutOffFromMetaNotReady: a server whose link to the meta database is
// cut (a partition: connections stay open, nothing arrives) keeps its last
// topology, so after a failover it would keep the old primary and answer
// 421 for buckets moved into its SET. Its /readyz on the listener the
// routers probe must turn not ready once the topology is older than the
// bound the admin listener checks (5 s), so routers rank it last; and
// ready again once the link heals. Issue 23, finding 6.
func TestCutOffFromMetaNotReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := dbtest.DB(t, "a", 4)
	setName := dbtest.UniqueName("metacut")
	dbtest.Own(t, db, setName, fence.AllBuckets())
	addr, adm := clustertest.FreeAddr(t), clustertest.FreeAddr(t)

	// The meta database, on the shared MariaDB, reached through a proxy.
	mc, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = dbtest.UniqueName("hb_meta_cut_")
	meta, err := topology.OpenMeta(ctx, mc.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + mc.DBName + "`")
		meta.Close()
	})
	if _, err := topology.Init(ctx, meta, []topology.Set{{Name: setName, Servers: []string{addr},
		MySQLDSN: dbtest.DSN(t, "a"), Memcached: []string{dbtest.Memcached(t, "a")}}}); err != nil {
		t.Fatal(err)
	}
	proxy := dbtest.StartProxy(t, mc.Addr)
	mc.Addr = proxy.Addr()

	cfg := filepath.Join(t.TempDir(), "hb.yaml")
	clustertest.WriteConfig(t, cfg, clustertest.Config{Secret: "metacut-test-user-secret-0123456789", InternalSecret: crashInternalSecret,
		MetaDSN: mc.FormatDSN(), WalletDSN: dbtest.DSN(t, "a") + "hb_wallet_test",
		Sets: []clustertest.Set{{Name: setName, Addrs: []string{addr}, DSN: dbtest.DSN(t, "a"), Memcached: dbtest.Memcached(t, "a")}}})
	clustertest.StartProcess(t, &clustertest.Process{Kind: "server", Name: setName, Bin: clustertest.Binary(t, "hbserver"),
		Args: []string{"-config", cfg, "-set", setName, "-listen", addr, "-admin", adm}, Ready: addr})

	hc := &http.Client{Timeout: 3 * time.Second}
	status := func(url string) (int, string) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// waitFor polls url until it answers want, for at most within (a
	// generous upper bound: the promise is 5 s plus a refresh).
	waitFor := func(what, url string, want int, within time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			st, body := status(url)
			if st == want {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET %s still %d %q after %s, want %d", what, url, st, body, within, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if st, body := status("http://" + addr + "/readyz"); st != http.StatusOK {
		t.Fatalf("before the cut: /readyz %d %q, want 200", st, body)
	}
	// A router's health prober, as hbrouter runs it.
	health := router.NewHealth(hc, 200*time.Millisecond, zap.NewNop())
	go health.Run(ctx, func() []string { return []string{addr} })
	healthy := func(what string, want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); health.Healthy(addr) != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the router's prober says healthy=%v, want %v", what, !want, want)
			}
		}
	}
	healthy("before the cut", true)

	proxy.Partition()
	cut := time.Now()
	waitFor("routers' probe, meta cut off", "http://"+addr+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	t.Logf("not ready %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	if body := waitFor("admin listener, meta cut off", "http://"+adm+"/readyz", http.StatusServiceUnavailable, 30*time.Second); !strings.Contains(body, "topology") {
		t.Errorf("admin /readyz %q does not say the topology is stale", body)
	}
	healthy("meta cut off", false)
	// The server still answers requests meanwhile (a router that has
	// nothing better may still send to it): only its rank changes.
	if st, _ := status("http://" + addr + "/healthz"); st != http.StatusOK {
		t.Errorf("/healthz during the cut: %d, want 200", st)
	}

	proxy.Heal()
	waitFor("routers' probe, meta back", "http://"+addr+"/readyz", http.StatusOK, 30*time.Second)
	waitFor("admin listener, meta back", "http://"+adm+"/readyz", http.StatusOK, 30*time.Second)
	healthy("meta back", true)

	// Cut again; this time the network comes back for new connections
	// only, the ones cut stay silent (their peer forgot them, or TCP backs
	// off for minutes): the server must give up on them and be ready again.
	proxy.Partition()
	waitFor("routers' probe, meta cut off again", "http://"+addr+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	proxy.Reopen()
	waitFor("routers' probe, meta reachable again on new connections", "http://"+addr+"/readyz", http.StatusOK, 30*time.Second)
}
