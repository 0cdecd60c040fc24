package devrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestWaitEnsure(t *testing.T) {
	run := t.TempDir()
	ctx := t.Context()
	if !WaitEnsure(ctx, run, time.Second, func() { t.Error("waited without a pid file") }) {
		t.Error("no ensure.pid: not ended")
	}
	sleeper := func(d string) *exec.Cmd {
		c := exec.Command("sleep", d)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, "ensure.pid"), []byte(strconv.Itoa(c.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return c
	}

	long := sleeper("30")
	defer long.Process.Kill() //nolint:errcheck // best effort
	if p, err := Pid(run, "ensure"); err != nil || p != long.Process.Pid || !Alive(p) {
		t.Fatalf("Pid %d, %v, alive %v; want %d alive", p, err, Alive(p), long.Process.Pid)
	}
	waited := 0
	if WaitEnsure(ctx, run, 1500*time.Millisecond, func() { waited++ }) {
		t.Error("a creation that runs on: ended")
	}
	if waited != 1 {
		t.Errorf("waiting called %d times; want once", waited)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if WaitEnsure(cancelled, run, time.Minute, nil) {
		t.Error("cancelled while it runs: ended")
	}

	short := sleeper("1")
	go short.Wait() //nolint:errcheck // reaped, as dev.sh's setsid parent would
	if !WaitEnsure(ctx, run, 30*time.Second, nil) {
		t.Error("a creation that ends within the limit: not ended")
	}
	if Alive(short.Process.Pid) {
		t.Error("Alive after the process ended")
	}
}
