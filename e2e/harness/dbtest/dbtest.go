// Package dbtest is the database harness: it gives tests the real MariaDB and memcached that
// `make test` starts (scripts/dev.sh test), can start private MariaDB and
// memcached processes for tests that need their own or stop one on
// purpose, and reads a SET's MySQL with the tests' own SQL: packets and
// their invariants (CheckPacket), outbox credits, table lists, sums and
// checksums.
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/devrun"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Need skips t under `go test -short` (make test-short), which runs only
// the tests that need no database: t needs MariaDB, memcached, a cluster
// of the binaries or Chromium. Every harness that starts or reaches one
// calls it; `make test` (no -short) runs them all.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs MariaDB, memcached, a cluster or Chromium: skipped with -short (make test runs it)")
	}
}

// env returns a required variable; without it the test fails, never skips
// (but with -short, see Need), and says how to run it.
func env(t testing.TB, name string) string {
	t.Helper()
	Need(t)
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the tests with `make test`, which starts MariaDB and memcached "+
			"(or `eval \"$(scripts/dev.sh test-env)\"` then go test)", name)
	}
	return v
}

// DSN returns the DSN of test SET a ("a") or b ("b").
func DSN(t testing.TB, set string) string {
	t.Helper()
	return env(t, "HB_TEST_MYSQL_"+strings.ToUpper(set))
}

// DB opens a pool on test SET set's MariaDB, closed when the test ends.
func DB(t testing.TB, set string, conns int) *sql.DB {
	t.Helper()
	db := Open(t, DSN(t, set), conns)
	if err := db.Ping(); err != nil {
		t.Fatalf("MariaDB of test SET %s: %v", set, err)
	}
	return db
}

// Open opens a pool of conns connections on dsn (sqldb.Open), closed
// when the test ends.
func Open(t testing.TB, dsn string, conns int) *sql.DB {
	t.Helper()
	db, err := sqldb.Open(dsn, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Memcached returns the address of test SET set's memcached.
func Memcached(t testing.TB, set string) string {
	t.Helper()
	return env(t, "HB_TEST_MEMCACHED_"+strings.ToUpper(set))
}

// Process is a private memcached started for one test.
type Process struct {
	Addr string
	cmd  *exec.Cmd
}

// StartMemcached starts a private memcached on a free port; it is killed
// when the test ends.
func StartMemcached(t testing.TB) *Process {
	t.Helper()
	Need(t)
	port := FreePort(t)
	args := []string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-m", "32", "-c", "4096"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	cmd := exec.Command("memcached", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start memcached: %v", err)
	}
	p := &Process{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(p.Stop)
	WaitTCP(t, p.Addr)
	return p
}

// Stop kills the memcached (a crash, as far as clients can tell).
func (p *Process) Stop() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := PickPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// PickPort asks the kernel for a free TCP port on 127.0.0.1, for tools that
// start servers of their own.
func PickPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitTCP waits until addr accepts connections.
func WaitTCP(t testing.TB, addr string) {
	t.Helper()
	if err := waitTCP(addr); err != nil {
		t.Fatal(err)
	}
}

// waitTCP waits for addr to take connections. 30 s: on a loaded 2-core
// machine (make test runs 4 packages at once) a fresh MariaDB's start
// took over 10 s, and each of launch's retries starts from scratch.
func waitTCP(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not accept connections", addr)
}

// MariaDB is a private MariaDB server started for one test: an empty
// instance, so a test can check totals over everything in it.
type MariaDB struct {
	// DSN connects as root over TCP, with no database selected.
	DSN  string
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	// stopped: Restart leaves a replica's replication stopped.
	stopped bool
}

// StartMariaDB initialises and starts a private MariaDB in a temporary
// directory, with extra server options; it is stopped (and its data
// removed) when the test ends. It may be called from any goroutine.
func StartMariaDB(t testing.TB, extra ...string) *MariaDB {
	t.Helper()
	Need(t)
	m, err := Launch(extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	return m
}

// bufferPool is the InnoDB buffer pool of private MariaDBs:
// HB_TEST_MARIADB_BUFFER_POOL (a benchmark filling 1,000 buckets wants its
// data in memory, as production has), else 32M.
func bufferPool() string {
	if v := os.Getenv("HB_TEST_MARIADB_BUFFER_POOL"); v != "" {
		return v
	}
	return "32M"
}

// Launch starts a private MariaDB for a tool (the benchmark's crash runs),
// with extra server options, without a binary log; the caller removes it.
func Launch(extra ...string) (*MariaDB, error) { return launch(nil, extra) }

// launch starts a private MariaDB, a member of a replicated group when
// member is not nil (see replication.Server). A start that fails is tried
// again from scratch, up to four times: the port picked may be taken
// before mariadbd binds it, and a loaded host now and then breaks a
// bootstrap.
func launch(member *replication.Member, extra []string) (*MariaDB, error) {
	var errs []string
	for attempt := 1; attempt <= 4; attempt++ {
		m, err := startMariaDB(member, extra)
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Sprintf("attempt %d: %.300v", attempt, err))
	}
	return nil, fmt.Errorf("private MariaDB did not start:\n%s", strings.Join(errs, "\n"))
}

// startMariaDB makes one attempt; on failure it leaves nothing behind.
func startMariaDB(member *replication.Member, extra []string) (m *MariaDB, err error) {
	dir, err := os.MkdirTemp("", "hbmariadb")
	if err != nil {
		return nil, err
	}
	started := &MariaDB{dir: dir}
	m = started
	defer func() {
		if err != nil { // m is nil by then: remove what was started
			started.Remove()
		}
	}()
	if m.Port, err = PickPort(); err != nil {
		return nil, err
	}
	root := ""
	if os.Geteuid() == 0 {
		root = "root"
	}
	// A private tmpdir: a mariadbd starting elsewhere on the host must not
	// clean up the temporary tables of this install.
	if err := os.Mkdir(dir+"/tmp", 0o700); err != nil {
		return nil, err
	}
	if err := InstallDataDir(dir + "/data"); err != nil {
		return nil, err
	}
	// The options of every hongbao MariaDB (replication.Server), sized
	// for a test: a small buffer pool and redo log.
	m.args = append(replication.Server{DataDir: dir + "/data", Socket: dir + "/sock", TmpDir: dir + "/tmp", Port: m.Port,
		LogError: dir + "/error.log", User: root, BufferPool: bufferPool(), RedoLog: "16M", Member: member}.Args(), extra...)
	if err := m.Restart(); err != nil {
		return nil, err
	}
	// root@localhost only: grant root over TCP through the socket. Not
	// logged: a semi-sync primary without its replica yet would wait.
	deadline := time.Now().Add(20 * time.Second)
	for {
		grant := exec.Command("mariadb", "--no-defaults", "-uroot", "--socket="+dir+"/sock", "-e",
			"SET sql_log_bin = 0; CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;")
		out, err := grant.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(dir + "/error.log")
			return nil, fmt.Errorf("grant on private MariaDB: %v\n%s\n%s", err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.Port)
	return m, nil
}

// Restart starts the server on its data and port again, after Stop (a
// kill -9): InnoDB recovers what was committed.
//
// A member of a replicated pair comes back in the role its data says: a
// replica (a primary configured, master.info) or a primary. A replica
// (started with --skip-slave-start, replication.ServerArgs) applies what
// its relay log holds before it replicates again (replication.StartReplica).
func (m *MariaDB) Restart() error {
	_, err := os.Stat(m.dir + "/data/master.info")
	return m.restartAs(err != nil)
}

// RestartAsReplica starts a killed primary again as a replica, as a
// failover's old primary comes back (scripts/dev.sh's .new-replica mark):
// read-only, a semi-sync replica whose crash recovery drops what no
// replica acknowledged; replicating from nobody until it is rejoined.
func (m *MariaDB) RestartAsReplica() error { return m.restartAs(false) }

// restartAs is Restart in the role given.
func (m *MariaDB) restartAs(primary bool) error {
	for i, a := range m.args {
		switch {
		case strings.HasPrefix(a, "--rpl-semi-sync-master-enabled="):
			m.args[i] = replication.MasterArg(primary)
		case strings.HasPrefix(a, "--rpl-semi-sync-slave-enabled="):
			m.args[i] = replication.SlaveArg(!primary)
		case strings.HasPrefix(a, "--loose-init-rpl-role="):
			m.args[i] = replication.RoleArg(primary)
		case strings.HasPrefix(a, "--read-only="):
			m.args[i] = replication.ReadOnlyArg(!primary)
		}
	}
	m.cmd = exec.Command("mariadbd", m.args...)
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("mariadbd: %w", err)
	}
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", m.Port)); err != nil {
		log, _ := os.ReadFile(m.dir + "/error.log")
		return fmt.Errorf("mariadbd: %w\n%s", err, log)
	}
	if _, err := os.Stat(m.dir + "/data/master.info"); err != nil || m.stopped || !slices.Contains(m.args, "--skip-slave-start") {
		return nil
	}
	return m.startReplica()
}

// RestartStopped is Restart without starting a replica's replication: a
// replica whose mysqld started (--skip-slave-start) and that nobody
// started yet (hbctl replica start), its relay log as it was.
func (m *MariaDB) RestartStopped() error {
	m.stopped = true
	defer func() { m.stopped = false }()
	return m.Restart()
}

// startReplica starts a restarted replica's replication, its relay log
// applied first.
func (m *MariaDB) startReplica() error {
	db, err := sqldb.Open(m.DSN, 1)
	if err != nil {
		return fmt.Errorf("mariadbd: replica: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := replication.StartReplica(ctx, db, time.Minute); err != nil {
		return fmt.Errorf("mariadbd on port %d: %w", m.Port, err)
	}
	return nil
}

// Stop kills the server (SIGKILL).
func (m *MariaDB) Stop() {
	if m.cmd != nil && m.cmd.Process != nil && m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	}
}

// CPU returns the user and system CPU time the server's process has used
// since it started, for benchmarks that count what MariaDB spends per
// operation.
func (m *MariaDB) CPU() (time.Duration, error) {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0, fmt.Errorf("dbtest: MariaDB on port %d not started", m.Port)
	}
	return devrun.CPUTime(m.cmd.Process.Pid)
}

// Remove stops the server and deletes its files.
func (m *MariaDB) Remove() {
	m.Stop()
	os.RemoveAll(m.dir)
}

// Clock is a settable clock for code under test that takes a
// func() time.Time; it is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the time last set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set sets the time.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// InstallDataDir makes datadir a fresh data directory for a test's
// MariaDB (replication.InstallDataDir) with the redo log the server runs
// with from the start: a first start resizing it (96 MiB -> 16 MiB),
// killed soon after (as the failover tests do), once failed its crash
// recovery ("Not applying UNDO_APPEND due to corruption").
func InstallDataDir(datadir string) error {
	return replication.InstallDataDir(datadir, "--innodb-log-file-size=16M")
}
