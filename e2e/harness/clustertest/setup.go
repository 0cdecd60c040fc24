package clustertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
	binDir  string               // where this checkout's commands go
	goRoot  string               // the module's root, where go build runs
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

// BinDir is the directory the commands are built into, shared by every
// test binary of this checkout; a test that runs scripts/dev.sh passes it
// as HB_DEV_BIN, so that the dev cluster's builds link nothing that is
// already there.
func BinDir(t testing.TB) string {
	t.Helper()
	return build(t)
}

// build compiles the commands not built yet in this test binary, with one
// go build, and returns their directory. The directory is shared by every
// test binary of one checkout (named after its module root): go build
// leaves a command whose build ID matches its sources as it is, so only
// the first package to need a command links it, where each package used
// to link its own (a tenth of make test's CPU went to the linker). Builds
// hold the directory's lock (goBuild).
func build(t testing.TB, names ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binDir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(root))
		binDir = filepath.Join(os.TempDir(), binPrefix+hex.EncodeToString(sum[:6]))
		goRoot = root
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

// goBin is the go command.
func goBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go" // where this machine kind installs Go
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command(goBin(), "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("clustertest: go env GOMOD: %v (%s)", err, out)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// goBuild runs go build -o dir/ pkgs... at the module root, holding
// dir/.lock (scripts/dev.sh's build takes it too). go build writes a
// binary it takes from its cache in place, not by a rename: a second build
// racing the first could rewrite a binary another test binary is about to
// run. Once one build made them, the others find them up to date and
// write nothing.
func goBuild(dir string, pkgs []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("clustertest: lock %s: %w", lock.Name(), err)
	}
	cmd := exec.Command(goBin(), append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = goRoot
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clustertest: go build %s: %v\n%s", strings.Join(pkgs, " "), err, buf.String())
	}
	return nil
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
	// portLocks are the open files whose locks reserve ports (reservePort).
	portLocks []*os.File
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
		if !reservePort(p) {
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

// reservePort holds an exclusive lock on a file named for port until the
// test binary exits, so that the test binaries make test runs side by
// side (one per package) never hand out the same port: between one's
// probe and its process's bind, another could pick it (a server "bind:
// address already in use", in a clean-clone check). false: another live
// binary holds it. A file that cannot be locked here reserves nothing.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "hongbao-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	portLocks = append(portLocks, f) // held (open) for the binary's life
	return true
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
