package crash_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// On SIGTERM a server turns not ready at once (public and admin /readyz
// answer 503, so routers stop sending it packets) while it still serves
// for admin.drain_grace, then drains and exits.
func TestSIGTERMTurnsNotReadyThenDrains(t *testing.T) {
	db := dbtest.DB(t, "a", 4)
	setName := dbtest.UniqueName("drain")
	dbtest.Own(t, db, setName, fence.AllBuckets())
	addr, adm := clustertest.FreeAddr(t), clustertest.FreeAddr(t)
	cfg := filepath.Join(t.TempDir(), "hb.yaml")
	clustertest.WriteConfig(t, cfg, clustertest.Config{Secret: "drain-test-user-secret-0123456789", InternalSecret: crashInternalSecret,
		WalletDSN: dbtest.DSN(t, "a") + "hb_wallet_test", Extra: "admin:\n  drain_grace: 3s\n",
		Sets: []clustertest.Set{{Name: setName, Addrs: []string{addr}, DSN: dbtest.DSN(t, "a"), Memcached: dbtest.Memcached(t, "a")}}})
	srv := clustertest.StartProcess(t, &clustertest.Process{Kind: "server", Name: setName, Bin: clustertest.Binary(t, "hbserver"),
		Args: []string{"-config", cfg, "-set", setName, "-listen", addr, "-admin", adm}, Ready: addr})

	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get("http://" + adm + "/readyz"); st != http.StatusOK {
		t.Fatalf("admin /readyz before SIGTERM: %d %s", st, body)
	}
	if err := srv.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not ready at once, still serving: within the 3 s grace.
	deadline := time.Now().Add(time.Second)
	for {
		st, _ := get("http://" + addr + "/readyz")
		if st == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("public /readyz after SIGTERM: %d, want 503", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tests := []struct {
		url    string
		status int
		has    string
	}{
		{"http://" + adm + "/readyz", http.StatusServiceUnavailable, "draining"},
		{"http://" + adm + "/livez", http.StatusOK, "ok"},
		{"http://" + addr + "/healthz", http.StatusOK, "ok"},
	}
	for _, tt := range tests {
		if st, body := get(tt.url); st != tt.status || !strings.Contains(body, tt.has) {
			t.Errorf("during the drain grace, GET %s: %d %q, want %d with %q", tt.url, st, body, tt.status, tt.has)
		}
	}
	if err := srv.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}
