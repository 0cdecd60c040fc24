package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

var (
	buildMu sync.Mutex
	binDir  string               // where this test binary's commands go
	built   = map[string]error{} // by command name: how its build ended
)

const binPrefix = "hbclustertest-bin-"

// Binary returns the path of the project's command name (hbserver,
// hbrouter, hbsettler, hbctl, hbarchive...), built from ./cmd/name at the
// module root once per test binary.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(build(t, name), name)
}

// build compiles the commands not built yet, with one go build, into a
// directory named after this process, and returns the directory;
// directories left by earlier test binaries that are gone are removed.
func build(t testing.TB, names ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binDir == "" {
		removeStaleBins()
		binDir = filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binPrefix, os.Getpid()))
	}
	var pkgs []string
	for _, n := range names {
		if _, done := built[n]; !done {
			pkgs = append(pkgs, "./cmd/"+n)
		}
	}
	if len(pkgs) > 0 {
		err := goBuild(binDir, pkgs)
		for _, pkg := range pkgs {
			built[strings.TrimPrefix(pkg, "./cmd/")] = err
		}
	}
	for _, n := range names {
		if err := built[n]; err != nil {
			t.Fatal(err)
		}
	}
	return binDir
}

// goBuild runs go build -o dir/ pkgs... at the module root.
func goBuild(dir string, pkgs []string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go" // where this machine kind installs Go
	}
	out, err := exec.Command(gobin, "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err != nil || gomod == "" || gomod == os.DevNull {
		return fmt.Errorf("clustertest: go env GOMOD: %v (%s)", err, out)
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clustertest: go build %s: %v\n%s", strings.Join(pkgs, " "), err, buf.String())
	}
	return nil
}

// removeStaleBins deletes the binary directories of test processes that no
// longer run.
func removeStaleBins() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binPrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// goTB lets helpers that fail with t.Fatal run on goroutines of their
// own: a fatal error is recorded and ends only that goroutine, and the
// test's goroutine reports it. Everything else goes to the test.
type goTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (g *goTB) Fatal(args ...any)                 { g.fail(fmt.Sprint(args...)) }
func (g *goTB) Fatalf(format string, args ...any) { g.fail(fmt.Sprintf(format, args...)) }
func (g *goTB) FailNow()                          { g.fail("FailNow called") }

func (g *goTB) fail(msg string) {
	g.mu.Lock()
	g.errs = append(g.errs, msg)
	g.mu.Unlock()
	runtime.Goexit() // deferred calls run: the WaitGroup is released
}

// Listen ports of the servers and the router come from below the kernel's
// ephemeral range: a port from there (dbtest.FreePort) may be taken,
// before the process binds it, by an outgoing connection or by another
// test's FreePort. Ports stay with their process across restarts.
const portLow, portHigh = 27000, 32700

var (
	portMu sync.Mutex
	ports  = map[int]bool{} // handed out by this test binary
)

// FreeAddr returns an address 127.0.0.1:port to listen on, free now and
// not handed out before by this test binary, for a process that may be
// restarted on it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

func freePort(t testing.TB) int {
	t.Helper()
	high := portHigh
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				high = min(high, n)
			}
		}
	}
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		if high-portLow < 1000 {
			break // the ephemeral range starts too low to stay out of it
		}
		p := portLow + rand.IntN(high-portLow)
		if ports[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		ports[p] = true
		return p
	}
	return dbtest.FreePort(t)
}

// withDB returns dsn with database name selected.
func withDB(t testing.TB, dsn, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}
