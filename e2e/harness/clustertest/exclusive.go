package clustertest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// OneDevCluster holds, until t ends, this machine's lock on whole dev
// clusters (scripts/dev.sh up, HOSTS=1: eight MariaDBs, six servers,
// three etcd members, and the background creation of some 4,000 day
// tables), waiting for it while another test binary holds it. Two of them
// side by side starve each other on two cores: in a make test run,
// TestDevHosts's cluster, creating its day tables, held the chaos run's
// SET a unwritable for the two minutes it lived (its own connections
// timing out at a MariaDB starved of I/O), and TestDevHosts itself ran
// out of its four minutes. Each test measures its own cluster, not a
// neighbour's load.
func OneDevCluster(t testing.TB) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "hongbao-dev-cluster.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	began := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("clustertest: lock %s: %v", path, err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %v for another test's dev cluster to end (%s)", waited.Round(time.Second), path)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}
