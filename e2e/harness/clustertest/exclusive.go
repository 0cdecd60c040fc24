package clustertest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// OneDevCluster holds, until t ends, this machine's lock on whole dev
// clusters (scripts/dev.sh up: eight MariaDBs, six servers, etcd, and the
// background creation of some 4,000 day tables), waiting for it while
// another test binary holds it. Two of them side by side starve each other
// on two cores: in a make test run, TestDevHosts's cluster, creating its
// day tables, held the chaos run's SET a unwritable for the two minutes it
// lived (its servers' connections timing out at a starved MariaDB), and
// TestDevHosts itself ran out of its four minutes. Each test measures its
// own cluster, not a neighbour's load.
//
// need is how long t takes once it holds the lock: when the test binary's
// deadline leaves less than that, t fails at once, saying it waited,
// rather than being stopped by the deadline's panic with its cluster up
// and its output lost.
func OneDevCluster(t *testing.T, need time.Duration) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "hongbao-dev-cluster.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
	began := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			t.Fatalf("clustertest: lock %s: %v", path, err)
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < need {
			t.Fatalf("waited %v for another test's dev cluster to end (%s): %v is left before the test binary's deadline, and this test needs %v",
				time.Since(began).Round(time.Second), path, time.Until(dl).Round(time.Second), need)
		}
		time.Sleep(time.Second)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %v for another test's dev cluster to end (%s)", waited.Round(time.Second), path)
	}
}
