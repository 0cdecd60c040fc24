package dbtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Accounts of a replicated pair: the application's (everything but READ
// ONLY ADMIN, so read_only stops it) and the replicas'. root over TCP (the
// MariaDB's DSN) is the operator's.
const (
	AppUser, AppPassword   = "hongbao", "hongbao"
	ReplUser, ReplPassword = "repl", "repl"
)

// Group is a replicated MariaDB: a primary and its read-only replicas,
// with GTIDs in strict mode and semi-synchronous replication waiting
// AFTER_SYNC (replication.ServerArgs, through replication.Server), all
// empty.
type Group struct {
	Primary  *MariaDB
	Replicas []*MariaDB
}

// StartReplicated starts a replicated group of a primary and replicas
// replicas (at least 1) for one test (semi-sync timeout timeout; 0 waits
// forever, the default for money), each member with extra server options;
// removed when the test ends. It may be called from any goroutine.
func StartReplicated(t testing.TB, timeout time.Duration, replicas int, extra ...string) *Group {
	t.Helper()
	Need(t)
	g, err := LaunchReplicated(timeout, replicas, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Remove)
	return g
}

// LaunchReplicated starts a replicated group for a tool; the caller
// removes it.
func LaunchReplicated(timeout time.Duration, replicas int, extra ...string) (*Group, error) {
	replicas = max(replicas, 1)
	g := &Group{Replicas: make([]*MariaDB, replicas)}
	errs := make([]error, replicas+1)
	var wg sync.WaitGroup
	for i := range replicas + 1 {
		member := &replication.Member{ServerID: i + 1, Primary: i == 0, SemiSyncTimeout: timeout}
		m := &g.Primary
		if i > 0 {
			m = &g.Replicas[i-1]
		}
		wg.Go(func() { *m, errs[i] = launch(member, extra) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		g.Remove()
		return nil, err
	}
	if err := g.setUp(); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// Members are the primary and the replicas.
func (g *Group) Members() []*MariaDB { return append([]*MariaDB{g.Primary}, g.Replicas...) }

// setUp empties every binary log, creates the accounts on each without
// logging them, and starts the replicas.
func (g *Group) setUp() error {
	// 2 minutes: on a loaded machine (make test's packages at once, load
	// 30 on 2 cores) one GRANT of a fresh server took over 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, m := range g.Members() {
		db, err := sqldb.Open(m.DSN, 1)
		if err != nil {
			return err
		}
		for _, stmt := range []string{
			"SET sql_log_bin = 0",
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%s'", AppUser, AppPassword),
			fmt.Sprintf("GRANT ALL ON *.* TO '%s'@'127.0.0.1'", AppUser),
			// GRANT ALL includes READ ONLY ADMIN in 10.11, which would let
			// the application write through read_only: the fence.
			fmt.Sprintf("REVOKE READ ONLY ADMIN ON *.* FROM '%s'@'127.0.0.1'", AppUser),
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%s'", ReplUser, ReplPassword),
			fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION SLAVE ADMIN, BINLOG MONITOR ON *.* TO '%s'@'127.0.0.1'", ReplUser),
			"RESET MASTER",
			"SET GLOBAL gtid_slave_pos = ''",
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				db.Close()
				return fmt.Errorf("replicated group: %s: %w", stmt, err)
			}
		}
		db.Close()
	}
	for _, r := range g.Replicas {
		if err := g.follow(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// follow makes replica r replicate from the primary and waits until it
// does.
func (g *Group) follow(ctx context.Context, r *MariaDB) error {
	db, err := sqldb.Open(r.DSN, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := replication.Follow(ctx, db, g.Source(g.Primary), false); err != nil {
		return err
	}
	for ctx.Err() == nil {
		st, err := replication.ReplicaStatus(ctx, db)
		if err != nil {
			return err
		}
		if st.IORunning == "Yes" && st.SQLRunning == "Yes" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("replicated group: the replica on port %d did not connect", r.Port)
}

// Source is m as a primary to replicate from.
func (g *Group) Source(m *MariaDB) replication.Source {
	return replication.Source{Host: "127.0.0.1", Port: m.Port, User: ReplUser, Password: ReplPassword}
}

// Remove stops every member and deletes their files.
func (g *Group) Remove() {
	for _, m := range g.Members() {
		if m != nil {
			m.Remove()
		}
	}
}

// AppDSN is the application's DSN of m (no database selected).
func (m *MariaDB) AppDSN() string {
	return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/", AppUser, AppPassword, m.Port)
}

// Pause stops the server with SIGSTOP (it holds its connections and
// answers nothing) and Resume lets it go on (SIGCONT).
func (m *MariaDB) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume: see Pause.
func (m *MariaDB) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *MariaDB) signal(sig syscall.Signal) error {
	if m.cmd == nil || m.cmd.Process == nil {
		return errors.New("dbtest: MariaDB not running")
	}
	return m.cmd.Process.Signal(sig)
}

// Running reports whether the server process is alive.
func (m *MariaDB) Running() bool {
	return m.cmd != nil && m.cmd.Process != nil && m.cmd.ProcessState == nil
}
