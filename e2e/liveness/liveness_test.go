// Package liveness_test checks that a host that vanishes (power lost, a
// partition: its sockets go without a FIN or RST) loses what it held
// within seconds: a client's session on MariaDB, with its row locks and
// GET_LOCKs, and a client's wait on a server that is gone. Issue 25,
// finding 1. The hosts are network namespaces (e2e/harness/hosts): the
// tests need root and run inside a private network namespace (`make test`
// runs under unshare -n).
package liveness_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/hosts"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// bound is what the fixes promise: a vanished peer is noticed within it
// (19 s to 22 s measured; replication.TCPKeepalive* on the server,
// sqldb's keepalive and TCP_USER_TIMEOUT on clients).
const bound = 30 * time.Second

// testNet is a Net of hosts named names, removed when the test ends. Its
// names are random, so tests in one namespace do not collide.
func testNet(t *testing.T, names ...string) []*hosts.Host {
	t.Helper()
	dbtest.Need(t)
	ctx := context.Background()
	n, err := hosts.New(ctx, fmt.Sprintf("l%05d", rand.IntN(100000)),
		netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 100+rand.IntN(100), rand.IntN(250))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	var hs []*hosts.Host
	for _, name := range names {
		h, err := n.Add(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

// startMariaDB starts a private MariaDB on host h, with hongbao's options
// (replication.Server) bound to h's address, port 3306; it is killed when
// the test ends. It returns the root DSN over TCP, with database hb.
func startMariaDB(t *testing.T, h *hosts.Host) string {
	t.Helper()
	dir := t.TempDir()
	root := ""
	if os.Geteuid() == 0 {
		root = "root"
	}
	if err := os.Mkdir(dir+"/tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := dbtest.InstallDataDir(dir + "/data"); err != nil {
		t.Fatal(err)
	}
	args := replication.Server{DataDir: dir + "/data", Socket: dir + "/sock", TmpDir: dir + "/tmp",
		Port: 3306, Bind: h.Addr.String(), LogError: dir + "/error.log", User: root,
		BufferPool: "32M", RedoLog: "16M"}.Args()
	// ip netns exec execs mariadbd: the process killed is the server.
	cmd := h.Command(context.Background(), "mariadbd", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("mariadbd on %s: %v", h.Name, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The socket is a file: reached from this namespace. root over TCP
	// from anywhere, and the test's database.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("mariadb", "--no-defaults", "-uroot", "--socket="+dir+"/sock", "-e",
			"CREATE USER IF NOT EXISTS 'root'@'%'; GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION; "+
				"CREATE DATABASE hb; CREATE TABLE hb.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; INSERT INTO hb.t VALUES (1, 0)").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(dir + "/error.log")
			t.Fatalf("MariaDB on %s: %v\n%s\n%s", h.Name, err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("root@tcp(%s:3306)/hb", h.Addr)
}

// locked reports whether row 1 of hb.t or the GET_LOCK "hb-liveness" is
// held by another session.
func locked(ctx context.Context, db *sql.DB) (bool, error) {
	var free sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_FREE_LOCK('hb-liveness')").Scan(&free); err != nil {
		return false, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var v int
	err = tx.QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1 FOR UPDATE NOWAIT").Scan(&v)
	if sqldb.IsLockWait(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return free.Int64 != 1, nil
}

// acked waits until every byte the server on h sent to client is
// acknowledged (the Send-Q of its connections is empty), so that client
// vanishes with nothing in flight: a delayed ACK leaves the last answer
// unacknowledged for up to 40 ms.
func acked(t *testing.T, h, client *hosts.Host) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := h.Command(context.Background(), "ss", "-tnH", "state", "established", "dst", client.Addr.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("ss on %s: %v: %s", h.Name, err, out)
		}
		pending := false
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[1] != "0" {
				pending = true
			}
		}
		if !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's answers to %s not acknowledged: %s", h.Name, client.Name, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVanishedClientReleasesLocks: a client on host "app" holds a row
// lock in an open transaction (as a server mid-open, or a mover's
// freeze, does) and a GET_LOCK (as a watcher mid-failover does); app
// vanishes (Isolate: no FIN, no RST). MariaDB kills its session, and
// another client gets the row and the lock, within bound. Before the
// server's keepalive options: still held after 60 s (Linux's default
// keepalive probes after 2 h, wait_timeout is 8 h).
func TestVanishedClientReleasesLocks(t *testing.T) {
	t.Parallel()
	hs := testNet(t, "db", "app")
	dbHost, app := hs[0], hs[1]
	dsn := startMariaDB(t, dbHost)
	here := dbtest.Open(t, dsn, 2)
	ctx := context.Background()

	appDB, err := sqldb.OpenDial(dsn, 1, app.Dial)
	if err != nil {
		t.Fatal(err)
	}
	defer appDB.Close()
	txCtx, cancel := context.WithCancel(ctx)
	defer cancel() // rolls back, closing the connection (gone by then)
	tx, err := appDB.BeginTx(txCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v, got int
	if err := tx.QueryRowContext(txCtx, "SELECT v FROM t WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(txCtx, "SELECT GET_LOCK('hb-liveness', 0)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK on app: %d, %v", got, err)
	}
	if held, err := locked(ctx, here); err != nil || !held {
		t.Fatalf("app's locks seen from here: held %v, %v; want held", held, err)
	}

	// The host vanishes once the server's last answer is acknowledged:
	// data left unacknowledged is retransmitted (Linux's tcp_retries2,
	// about 15 min), not probed; see docs/REPLICATION.md.
	acked(t, dbHost, app)
	if err := app.Isolate(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		held, err := locked(ctx, here)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			t.Logf("the vanished client's row lock and GET_LOCK released after %v", time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > bound {
			t.Fatalf("the vanished client's locks still held after %v (want released within %v)", time.Since(start).Round(time.Second), bound)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestVanishedServerFailsQueries: the MariaDB's host vanishes while a
// client waits on a statement (SELECT SLEEP: the server was busy, its
// socket quiet) and while another connection is idle; a statement sent
// to the vanished server then and the one in flight both return an error
// within bound, neither hangs. Before sqldb's keepalive and
// TCP_USER_TIMEOUT: neither returned within 60 s (Go's keepalive gives up
// after 150 s; a statement never acknowledged is retransmitted for about
// 15 min). Both kinds of pool: a plain one (the core group's, the
// wallet's) and a Switch (every server's and settler's SET pool, which
// wraps its connections and once had none of the keepalive).
func TestVanishedServerFailsQueries(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T, dsn string) *sql.DB{
		"pool": func(t *testing.T, dsn string) *sql.DB { return dbtest.Open(t, dsn, 2) },
		"switch": func(t *testing.T, dsn string) *sql.DB {
			s, err := sqldb.OpenSwitch(dsn, 2)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.DB().Close() })
			return s.DB()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			vanishedServerFailsQueries(t, open)
		})
	}
}

func vanishedServerFailsQueries(t *testing.T, open func(t *testing.T, dsn string) *sql.DB) {
	hs := testNet(t, "db")
	dbHost := hs[0]
	db := open(t, startMariaDB(t, dbHost))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idle, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := idle.PingContext(ctx); err != nil {
		t.Fatal(err)
	}

	type result struct {
		what string
		err  error
		took time.Duration
	}
	results := make(chan result, 2)
	sleeping := make(chan struct{})
	go func() {
		close(sleeping)
		start := time.Now()
		_, err := busy.ExecContext(ctx, "DO SLEEP(600)")
		results <- result{"a statement in flight", err, time.Since(start)}
	}()
	<-sleeping
	// The sleep has reached the server when the processlist shows it.
	for {
		var n int
		if err := idle.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'DO SLEEP%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := dbHost.Isolate(ctx); err != nil {
		t.Fatal(err)
	}
	isolated := time.Now()
	go func() {
		start := time.Now()
		var one int
		err := idle.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		results <- result{"a statement sent after", err, time.Since(start)}
	}()
	timeout := time.NewTimer(bound + 5*time.Second)
	defer timeout.Stop()
	for range 2 {
		select {
		case r := <-results:
			if r.err == nil {
				t.Errorf("%s: answered by a vanished server", r.what)
			} else if r.took > bound {
				t.Errorf("%s: error after %v (want within %v): %v", r.what, r.took.Round(100*time.Millisecond), bound, r.err)
			} else {
				t.Logf("%s: error after %v: %v", r.what, r.took.Round(100*time.Millisecond), r.err)
			}
		case <-timeout.C:
			t.Errorf("a statement still waits on the vanished server %v after it vanished (want an error within %v)",
				time.Since(isolated).Round(time.Second), bound)
			cancel() // the driver closes the connections: the goroutines return
			<-results
			<-results
			return
		}
	}
}
