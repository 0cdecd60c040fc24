package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hbdev builds the command into a temporary directory.
func hbdev(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hbdev")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// waitFor polls ok for up to 20 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s: not within 20 s", what)
}

// TestHbdev builds the command once and runs it as dev.sh does.
func TestHbdev(t *testing.T) {
	bin := hbdev(t)
	t.Run("supervise", func(t *testing.T) { testSupervise(t, bin) })
	t.Run("mariadbd-args", func(t *testing.T) { testMariadbdArgs(t, bin) })
	t.Run("down", func(t *testing.T) { testDown(t, bin) })
	t.Run("restart-with", func(t *testing.T) { testRestartWith(t, bin) })
}

// testRestartWith: restart-with restarts a supervised process with its
// arguments and the extra ones (hbchaos's -clock-offset), the supervisor
// keeps them across a kill -9, restart-with and nothing takes them away,
// and a new supervisor starts the command as given.
func testRestartWith(t *testing.T, bin string) {
	run := t.TempDir()
	out := filepath.Join(run, "argv")
	// Each start appends its arguments to out, then sleeps.
	cmd := []string{"sh", "-c", `echo "$*" >>` + out + `; exec sleep 1000`, "sh", "-config", "x.yaml"}
	ctl := func(args ...string) {
		t.Helper()
		if b, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("hbdev %q: %v\n%s", args, err, b)
		}
	}
	pidFile, supFile := filepath.Join(run, "server-a1.pid"), filepath.Join(run, "sup-server-a1.pid")
	t.Cleanup(func() { stop(supFile); stop(pidFile) })
	starts := func() []string {
		b, _ := os.ReadFile(out)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	ctl(append([]string{"start", "-run", run, "server", "a1"}, cmd...)...)
	waitFor(t, "first start", func() bool { return alive(pidFile) && len(starts()) == 1 && starts()[0] != "" })
	ctl("restart-with", "-run", run, "server", "a1", "-clock-offset", "-7m0s")
	waitFor(t, "the skewed start", func() bool { return len(starts()) == 2 })
	if err := syscall.Kill(pidOf(pidFile), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the start after kill -9", func() bool { return len(starts()) == 3 })
	ctl("restart-with", "-run", run, "server", "a1")
	waitFor(t, "the start set right", func() bool { return len(starts()) == 4 })
	ctl("restart-with", "-run", run, "server", "a1", "-clock-offset", "2m0s")
	waitFor(t, "the second skewed start", func() bool { return len(starts()) == 5 })
	ctl("stop", supFile)
	ctl(append([]string{"start", "-run", run, "server", "a1"}, cmd...)...)
	waitFor(t, "a new supervisor's start", func() bool { return len(starts()) == 6 })
	want := []string{"-config x.yaml", "-config x.yaml -clock-offset -7m0s", "-config x.yaml -clock-offset -7m0s",
		"-config x.yaml", "-config x.yaml -clock-offset 2m0s", "-config x.yaml"}
	if got := starts(); !slices.Equal(got, want) {
		t.Errorf("the starts' arguments:\n%q\nwant\n%q", got, want)
	}
}

// testDown: down stops the supervised processes and the databases, and
// leaves make test's instances (*-test-*) alone.
func testDown(t *testing.T, bin string) {
	run := t.TempDir()
	if out, err := exec.Command(bin, "start", "-run", run, "server", "a1", "sleep", "1000").CombinedOutput(); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	server := filepath.Join(run, "server-a1.pid")
	waitFor(t, "start", func() bool { return pidOf(server) != 0 })
	// Stand-ins for a dev and a test memcached.
	daemons := map[string]*exec.Cmd{}
	for _, name := range []string{"memcached-a", "memcached-test-a"} {
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait() // reaped when it ends, so gone says so
		daemons[name] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		if err := os.WriteFile(filepath.Join(run, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pids := []int{pidOf(server), pidOf(filepath.Join(run, "sup-server-a1.pid")), daemons["memcached-a"].Process.Pid}
	if out, err := exec.Command(bin, "down", "-run", run).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	for _, p := range pids {
		waitFor(t, fmt.Sprintf("pid %d gone", p), func() bool { return gone(p) })
	}
	if !alive(filepath.Join(run, "memcached-test-a.pid")) {
		t.Error("down stopped the test instance")
	}
	left, _ := filepath.Glob(filepath.Join(run, "*.pid"))
	if len(left) != 1 || filepath.Base(left[0]) != "memcached-test-a.pid" {
		t.Errorf("pid files left: %v, want only memcached-test-a.pid", left)
	}
}

// testSupervise: a supervised process killed with kill -9 runs again
// under a new pid; stop ends the supervisor and its child and removes both
// pid files; the log says each start, exit and the stop.
func testSupervise(t *testing.T, bin string) {
	run := t.TempDir()
	ctl := func(args ...string) error { return exec.Command(bin, args...).Run() }
	if err := ctl("start", "-run", run, "proc", "x", "sleep", "1000"); err != nil {
		t.Fatal(err)
	}
	pidFile, supFile := filepath.Join(run, "proc-x.pid"), filepath.Join(run, "sup-proc-x.pid")
	t.Cleanup(func() { stop(supFile); stop(pidFile) })
	waitFor(t, "first start", func() bool { return pidOf(pidFile) != 0 })
	first := pidOf(pidFile)
	if err := ctl("start", "-run", run, "proc", "x", "sleep", "1000"); err != nil || pidOf(pidFile) != first {
		t.Fatalf("a second start: %v, pid %d, want %d left alone", err, pidOf(pidFile), first)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart after kill -9", func() bool { p := pidOf(pidFile); return p != 0 && p != first && alive(pidFile) })
	second, sup := pidOf(pidFile), pidOf(supFile)
	if err := ctl("alive", pidFile); err != nil {
		t.Errorf("alive %s: %v", pidFile, err)
	}
	if err := ctl("stop", supFile); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{second, sup} {
		if !gone(p) {
			t.Errorf("pid %d still runs after stop", p)
		}
	}
	for _, f := range []string{pidFile, supFile} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", f, err)
		}
	}
	if err := ctl("alive", pidFile); err == nil {
		t.Error("alive after stop")
	}
	log, err := os.ReadFile(filepath.Join(run, "proc-x.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proc x: started pid", "(start 1)", "exited with status 137", "(start 2)", "stopping pid", "proc x: stopped"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// testMariadbdArgs: a replica is read-only and a semi-sync replica, with
// its binary log in its data directory; a lone server has a thread pool
// and no binary log; the timeout is checked.
func testMariadbdArgs(t *testing.T, bin string) {
	args := func(extra ...string) []string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"mariadbd-args", "-datadir", "/d", "-socket", "/s", "-port", "3316",
			"-log-error", "/l"}, extra...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	replica := args("-server-id", "2", "-primary=false", "-semi-sync-timeout", "10s", "-thread-pool")
	for _, want := range []string{"--server-id=2", "--read-only=1", "--rpl-semi-sync-slave-enabled=1", "--loose-init-rpl-role=SLAVE", "--rpl-semi-sync-master-enabled=0",
		"--log-bin=/d/binlog", "--rpl-semi-sync-master-timeout=10000", "--skip-slave-start", "--thread-handling=one-thread-per-connection"} {
		if !slices.Contains(replica, want) {
			t.Errorf("replica: no %s in %v", want, replica)
		}
	}
	lone := args("-thread-pool", "-tmpdir", "/t")
	for _, want := range []string{"--skip-log-bin", "--thread-handling=pool-of-threads", "--port=3316", "--innodb-buffer-pool-size=1G", "--tmpdir=/t"} {
		if !slices.Contains(lone, want) {
			t.Errorf("lone server: no %s in %v", want, lone)
		}
	}
	if err := exec.Command(bin, "mariadbd-args", "-datadir", "/d", "-socket", "/s", "-port", "1", "-log-error", "/l",
		"-server-id", "1", "-semi-sync-timeout", "soon").Run(); err == nil {
		t.Error("a semi-sync timeout of \"soon\" was accepted")
	}
}
