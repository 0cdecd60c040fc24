package dev_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// The dev cluster's supervisor (scripts/dev.sh): a process killed with
// kill -9 serves again within seconds by itself, make up right after a
// MariaDB's kill -9 succeeds, make down leaves nothing running. It runs
// scripts/dev_test.sh against a whole dev cluster in a network namespace of
// its own (the cluster's ports are fixed) with its data in a temporary
// directory; without unshare (not root) it fails, saying so.
func TestDevCluster(t *testing.T) {
	dbtest.Need(t)
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		t.Fatalf("unshare -n: %v: the dev cluster's fixed ports need a network namespace of their own (run make test as root)", err)
	}
	clustertest.OneDevCluster(t, 10*time.Minute) // three make ups under load
	run := t.TempDir()
	began := time.Now()
	cmd := exec.Command("unshare", "-n", "bash", "-c", "ip link set lo up && exec scripts/dev_test.sh")
	cmd.Dir = filepath.Join("..", "..") // the module's root
	cmd.Env = append(os.Environ(), "HB_DEV_RUN="+run, "HB_DEV_BIN="+clustertest.BinDir(t), "HB_MARIADB_BUFFER_POOL=128M")
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/dev_test.sh (%v):\n%s", time.Since(began).Round(time.Second), out)
	if err != nil {
		for _, log := range []string{"server-a1.log", "router-r1.log", "mariadb-a.log"} {
			if b, err := os.ReadFile(run + "/" + log); err == nil {
				t.Logf("%s (end):\n%s", log, tail(b, 2000))
			}
		}
		t.Fatal(err)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
