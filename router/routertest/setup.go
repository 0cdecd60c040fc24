package routertest

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

	"github.com/hongbao-dev/hongbao/store/storetest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build compiles the commands once per test binary, from the module root,
// into a directory named after this process; directories left by earlier
// test binaries that are gone are removed.
func build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBins()
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
			buildErr = fmt.Errorf("routertest: go env GOMOD: %v (%s)", err, out)
			return
		}
		binDir = filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binPrefix, os.Getpid()))
		// The four commands by name: ./cmd/... would also build whatever
		// else is under cmd/, which need not be a working command.
		cmd := exec.Command("go", append([]string{"build", "-o", binDir + string(filepath.Separator)}, commands...)...)
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("routertest: go build %s: %v\n%s", strings.Join(commands, " "), err, buf.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

const binPrefix = "hbroutertest-bin-"

// commands are the packages a cluster runs.
var commands = []string{"./cmd/hbserver", "./cmd/hbrouter", "./cmd/hbsettler", "./cmd/hbctl"}

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

// ---- HTTP client -----------------------------------------------------------

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

// startMariaDB starts a private MariaDB, trying again when it fails:
// mariadb-install-db runs that overlap (other SETs, other test binaries)
// share the default tmpdir /tmp and now and then break each other's
// bootstrap ("Unknown table 'mysql.tmp_user_sys'", signal 11). A failed
// attempt's files are removed by its own cleanup.
func startMariaDB(t testing.TB) (string, error) {
	var errs []string
	for attempt := 1; attempt <= 3; attempt++ {
		g := &goTB{TB: t}
		var dsn string
		done := make(chan struct{})
		go func() { defer close(done); dsn = storetest.StartMariaDB(g).DSN }()
		<-done
		if len(g.errs) == 0 {
			return dsn, nil
		}
		t.Logf("routertest: private MariaDB, attempt %d failed: %s", attempt, firstLines(strings.Join(g.errs, "\n"), 4))
		errs = append(errs, g.errs...)
	}
	return "", errors.New(strings.Join(errs, "\n"))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// Listen ports of the servers and the router come from below the kernel's
// ephemeral range: a port from there (storetest.FreePort) may be taken,
// before the process binds it, by an outgoing connection or by another
// test's FreePort. Ports stay with their process across restarts.
const portLow, portHigh = 27000, 32700

var (
	portMu sync.Mutex
	ports  = map[int]bool{} // handed out by this test binary
)

// freePort returns a port free on 127.0.0.1 that this test binary has not
// handed out before.
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
	return storetest.FreePort(t)
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
