package failover

// The harness of the in-process failover tests (issue 23, findings 3 and
// 5): a meta database of its own on the shared test MariaDB, a SET whose
// MySQL is a real replicated group (dbtest.StartReplicated), and a
// failover acting as hbctl set failover does, with hooks between steps.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// testMeta creates a meta database of its own on test SET a's MariaDB
// (dropped when the test ends) holding sets, and returns a pool on it.
func testMeta(t *testing.T, sets ...topology.Set) *sql.DB {
	t.Helper()
	ctx := context.Background()
	root := dbtest.DB(t, "a", 1)
	name := dbtest.UniqueName("h23meta_")
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.ExecContext(context.Background(), "DROP DATABASE "+name) }) //nolint:errcheck // best effort
	c, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	c.DBName = name
	meta := dbtest.Open(t, c.FormatDSN(), 4)
	if _, err := topology.Init(ctx, meta, sets); err != nil {
		t.Fatal(err)
	}
	return meta
}

// fakeSet is a SET whose MySQL addresses need not exist (the meta
// database only).
func fakeSet(name string, primary string, replicas ...string) topology.Set {
	return topology.Set{Name: name, Servers: []string{"127.0.0.1:1"}, MySQLDSN: primary, Replicas: replicas, Memcached: []string{"127.0.0.1:2"}}
}

// fakeDSN is an application DSN on 127.0.0.1:port.
func fakeDSN(port int) string { return fmt.Sprintf("hongbao:hongbao@tcp(127.0.0.1:%d)/", port) }

// replicatedSet starts a replicated group of a primary and replicas
// replicas and a meta database naming it as SET name (the operator's
// DSNs: root, no password), and returns them with a failover config.
func replicatedSet(t *testing.T, name string, replicas int) (*dbtest.Group, *sql.DB, configs.Replication) {
	t.Helper()
	g := dbtest.StartReplicated(t, 0, replicas)
	var rs []string
	for _, r := range g.Replicas {
		rs = append(rs, r.AppDSN())
	}
	meta := testMeta(t, fakeSet(name, g.Primary.AppDSN(), rs...))
	cfg := configs.Replication{AdminUser: "root", User: dbtest.ReplUser, Password: dbtest.ReplPassword,
		WaitApplied: configs.Duration(10 * time.Second)}
	return g, meta, cfg
}

// syncBuffer is a bytes.Buffer safe for concurrent use: what a failover
// says.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testRun is a failover or rejoin of a group by a Reparenter whose knobs
// the test sets, under lock when set.
type testRun struct {
	r    *Reparenter
	g    *Group
	lock HeldLock
}

func (f *testRun) run(ctx context.Context, o Options) error {
	_, err := f.r.Failover(ctx, f.g, f.lock, o)
	return err
}

func (f *testRun) rejoinAll(ctx context.Context) error {
	_, err := f.r.Rejoin(ctx, f.g, f.lock)
	return err
}

// testReparenter is a Reparenter saying what it does to out.
func testReparenter(cfg configs.Replication, out *syncBuffer) *Reparenter {
	r := New(cfg)
	r.Progress = func(line string) { fmt.Fprintln(out, line) }
	return r
}

// testFailover is a failover of SET name as read from meta now, saying
// what it does to out.
func testFailover(t *testing.T, meta *sql.DB, name string, cfg configs.Replication, out *syncBuffer) *testRun {
	t.Helper()
	g, err := SetGroup(context.Background(), meta, name)
	if err != nil {
		t.Fatal(err)
	}
	return &testRun{r: testReparenter(cfg, out), g: g}
}

// metaPrimary is SET name's mysql_dsn in meta.
func metaPrimary(t *testing.T, meta *sql.DB, name string) string {
	t.Helper()
	var dsn string
	if err := meta.QueryRow("SELECT mysql_dsn FROM sets WHERE name = ?", name).Scan(&dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// readOnly reports m's @@read_only.
func readOnly(t *testing.T, m *dbtest.MariaDB) bool {
	t.Helper()
	db := dbtest.Open(t, m.DSN, 1)
	var ro int
	if err := db.QueryRow("SELECT @@GLOBAL.read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	return ro == 1
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// replicaStart runs the startup step, hbctl replica start
// (Reparenter.StartReplica), on m's address with a configuration whose
// meta database is meta's; it returns what it said and its error.
func replicaStart(t *testing.T, meta *sql.DB, m *dbtest.MariaDB) (string, error) {
	t.Helper()
	var db string
	if err := meta.QueryRow("SELECT DATABASE()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	c, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	c.DBName = db
	metaDSN := c.FormatDSN()
	c.DBName = db + "_wallet"
	path := filepath.Join(t.TempDir(), "replica.yaml")
	raw := fmt.Sprintf(`meta_dsn: %q
wallet_dsn: %q
secret: "0123456789abcdef0123"
internal_secret: "fedcba9876543210fedc"
replication:
  admin_user: root
  user: %s
  password: %s
  wait_applied: 10s
`, metaDSN, c.FormatDSN(), dbtest.ReplUser, dbtest.ReplPassword)
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	_, err = testReparenter(cfg.Replication, out).StartReplica(context.Background(), cfg, fmt.Sprintf("127.0.0.1:%d", m.Port), 10*time.Minute)
	return out.String(), err
}
