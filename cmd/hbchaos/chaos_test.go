package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The chaos run, shortened (make chaos runs it in full): 200 clients for
// 60 s while every kind of fault hits a whole dev cluster (its own network
// namespace, its data in a temporary directory), then the checks. It fails
// when an acknowledged answer was lost or doubled, money is wrong, verify
// fails or a fault was not recovered from.
func TestChaosShort(t *testing.T) {
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		t.Fatalf("unshare -n: %v: the dev cluster's fixed ports need a network namespace of their own (run make test as root)", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	began := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts", "dev.sh"), "chaos",
		"-clients", "200", "-duration", "60s", "-gap", "2s", "-verify-every", "15s", "-drain", "90s")
	cmd.Env = append(os.Environ(), "HB_DEV_RUN="+run, "HB_MARIADB_BUFFER_POOL=128M", "HB_LIMITS_EXPIRY=15s")
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/dev.sh chaos (%v):\n%s", time.Since(began).Round(time.Second), out)
	if err != nil {
		t.Fatalf("hbchaos: %v", err)
	}
	for _, want := range []string{"| lost | **0**", "| doubled | **0**", "after the run: passes", "OK: every invariant holds"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report does not say %q", want)
		}
	}
	if strings.Contains(string(out), "NOT RECOVERED") {
		t.Error("a fault was not recovered from")
	}
}
