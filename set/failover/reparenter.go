package failover

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Reparenter fails groups over and rejoins them with the operator's
// account (configs.Replication). Its exported fields are knobs, set
// before use; the zero knobs are production's.
type Reparenter struct {
	cfg configs.Replication
	// Dial, when set, dials every MySQL connection the Reparenter makes
	// (network "tcp", addr host:port): a test cuts this process alone off
	// from a server with it. Nil: the driver's dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Hook, when set, runs before each destructive step of a failover
	// (StepFence, StepStop, StepPromote, StepPublish); an error stops the
	// failover there. A test's knob, e.g. to die before publishing.
	Hook func(step string) error
	// Progress, when set, receives each line of a report as it is made
	// (hbctl prints it at once, the watchdog logs it): a failover may take
	// a minute. The Report holds every line either way.
	Progress func(line string)
	// Leases, when set, is the etcd cluster every failover, rejoin and
	// replica start of a group takes the group's lease in first (see
	// lease.go); nil: the group's MySQL lock alone (one host).
	Leases *lease.Client
	// Holder names this process to the actors its lease refuses.
	Holder string
	// Idle is wait_timeout of every operator session the Reparenter
	// opens (0: operatorIdle); a test shortens it.
	Idle time.Duration
	// Now is the wall clock a promotion stamps the core group's epoch
	// with (the -clock-offset of hbctl and hbwatch; nil: time.Now).
	Now func() time.Time
}

// now is Now, or time.Now.
func (r *Reparenter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// operatorIdle is wait_timeout of the operator's sessions: MariaDB ends a
// session idle that long. An actor that hangs (SIGSTOP, a host whose
// kernel still answers keepalives but whose processes are stuck) thus
// gives back its sessions, and the core failover lock they hold, after a
// minute instead of MariaDB's default 8 h, and another actor can fail
// the core over. A long failover is not cut short by it: a holder keeps
// its lock's connections busy while it holds it (CoreLock's keeper), and
// the other operator sessions are never quiet between statements for
// long (a MASTER_GTID_WAIT that waits is a statement running, not an
// idle session). interactive_timeout only applies to clients that say
// they are interactive (the mariadb CLI), never to Go's driver.
const operatorIdle = time.Minute

// idle is the operator sessions' wait_timeout (see operatorIdle).
func (r *Reparenter) idle() time.Duration { return cmp.Or(r.Idle, operatorIdle) }

// New returns a Reparenter acting as cfg's operator account.
func New(cfg configs.Replication) *Reparenter {
	return &Reparenter{cfg: cfg, Holder: lease.Holder()}
}

// Report is what a failover, rejoin or replica start did, line by line,
// and its outcome.
type Report struct {
	Lines []string // what was done, in order, for the operator
	// Previous and Promoted are the DSNs of the old and the new primary
	// of a failover that published one (Promoted "" otherwise).
	Previous, Promoted string
	Took               time.Duration // how long the failover took
}

// Options are a failover's choices (hbctl's flags).
type Options struct {
	To         string // the replica (DSN) to promote; "": the most advanced
	SingleCopy bool   // --accept-single-copy
}

// UsageError is a mistake in what the caller asked (e.g. Options.To not a
// replica of the group), not a fault of the group: hbctl exits 2 on it.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// HeldLock is a failover lock its holder may have lost meanwhile
// (topology.FailoverLock, CoreLock).
type HeldLock interface {
	Held(ctx context.Context) error
	Release()
}

// The destructive steps of a failover, in order (Reparenter.Hook).
const (
	StepFence   = "fence"   // fence the old primary
	StepStop    = "stop"    // stop the replicas receiving
	StepPromote = "promote" // promote the chosen replica
	StepPublish = "publish" // publish it
)

// dbTimeout bounds each step against a database that may be paused (a
// stopped process accepts TCP connections and answers nothing).
const dbTimeout = 5 * time.Second

// op is one failover, rejoin or start of a group: the Reparenter's
// knobs, the group, the lock held for it and the report it writes.
type op struct {
	r    *Reparenter
	cfg  configs.Replication
	g    *Group
	lock HeldLock // when set, checked before each destructive step
	rep  *Report
}

func (r *Reparenter) op(g *Group, lock HeldLock) *op {
	return &op{r: r, cfg: r.cfg, g: g, lock: lock, rep: &Report{}}
}

// say reports a step.
func (f *op) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	f.rep.Lines = append(f.rep.Lines, line)
	if f.r.Progress != nil {
		f.r.Progress(line)
	}
}

// step is called before each destructive step of run: it aborts the
// failover when the step must not run: the failover lock was lost (e.g.
// its meta connection was killed by a core failover, and another actor
// may hold it now).
func (f *op) step(ctx context.Context, name string) error {
	if f.r.Hook != nil {
		if err := f.r.Hook(name); err != nil {
			return fmt.Errorf("%s: before the step %q: %w", f.g.name, name, err)
		}
	}
	if f.lock != nil {
		if err := f.lock.Held(ctx); err != nil {
			return fmt.Errorf("%s: stopped before the step %q (the steps before it are done; run the failover again): %w", f.g.name, name, err)
		}
	}
	return nil
}

// admin opens a pool on dsn's server as the operator, with short timeouts:
// a read waits at most dbTimeout, so a paused server (a stopped process
// accepts TCP connections and answers nothing) is an error, not a hang.
func (f *op) admin(dsn string) (*sql.DB, error) { return f.adminWait(dsn, dbTimeout) }

// adminWait is admin with reads waiting up to read (a statement that
// waits on the server, e.g. MASTER_GTID_WAIT, needs longer).
func (f *op) adminWait(dsn string, read time.Duration) (*sql.DB, error) {
	return f.r.adminTimeouts(dsn, 2*time.Second, read, dbTimeout)
}

// adminTimeouts opens a pool on dsn's server as the operator with the
// driver's dial, read and write timeouts, dialling through Dial.
func (r *Reparenter) adminTimeouts(dsn string, dial, read, write time.Duration) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	c.User, c.Passwd, c.DBName = r.cfg.AdminUser, r.cfg.AdminPassword, ""
	c.Timeout, c.ReadTimeout, c.WriteTimeout = dial, read, write
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["wait_timeout"] = strconv.Itoa(max(1, int(r.idle()/time.Second)))
	return sqldb.OpenDial(c.FormatDSN(), 2, r.Dial)
}

// on runs fn on dsn's server as the operator, bounded by dbTimeout.
func (f *op) on(ctx context.Context, dsn string, fn func(context.Context, *sql.DB) error) error {
	db, err := f.admin(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	return fn(ctx, db)
}
