package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// The core group's failover lock. hbctl core failover, core rejoin and
// core watch's automatic failover exclude each other with it, as a SET's
// actors do with topology.LockFailover. It cannot live in the meta
// database as a SET's does: the meta database is on the core primary,
// the server a core failover replaces, and a user lock on a dead (or
// fenced) server is gone exactly when it is needed. So it is a user lock
// (GET_LOCK hb_core_failover) on every core member that answers, each
// held by a connection of the actor's own; an actor needs it on at least
// one member and gives up when any member that answers has it elsewhere.
//
// Two actors that can reach a common member therefore exclude each
// other: the first holds that member's lock, so the second fails there.
// When the core primary dies its lock goes with it, but the holder still
// has the replicas' (and a newcomer, who cannot reach the dead primary
// either, finds them taken). Actors on one host see the same members,
// and a host cut off from every member cannot fail anything over; actors
// on different sides of a partition may not exclude each other: the
// single actor across hosts comes with the hosts issue.
//
// A holder's own steps kill some of its lock connections (the fence of
// the old primary, the fence of each replica it repoints): the lock is
// still its own while one of its connections holds it (Held).

// coreLockKey is the user lock's name on every core member.
const coreLockKey = "hb_core_failover"

// lockCheck bounds taking or checking the lock on one member: a paused
// member accepts the connection and answers nothing.
const lockCheck = 2 * time.Second

// ErrCoreBusy is LockCore's refusal: another actor holds the lock.
var ErrCoreBusy = errors.New("another core failover, rejoin or watch holds the core failover lock")

// CoreLock is the core failover lock, held on the members in conns.
//
// Its sessions have the operator's wait_timeout (Reparenter.Idle): a
// holder that hangs loses the lock when they have been quiet that long.
// A live holder's keeper pings them three times per wait_timeout, so a
// failover, however long, keeps its lock.
type CoreLock struct {
	mu    sync.Mutex // one statement at a time on each connection
	conns []lockConn
	// Unlocked names the members it is not held on (they did not
	// answer), with why.
	Unlocked []string

	stop   context.CancelFunc // ends the keeper
	keeper sync.WaitGroup
}

type lockConn struct {
	dsn  string
	db   *sql.DB
	conn *sql.Conn
}

// LockCoreOf takes the core failover lock on the members cfg names.
func (r *Reparenter) LockCoreOf(ctx context.Context, cfg *configs.Config) (*CoreLock, error) {
	dsns, err := coreAdminDSNs(cfg)
	if err != nil {
		return nil, err
	}
	return r.LockCore(ctx, dsns)
}

// LockCore takes the core failover lock on every member of dsns that
// answers (see above).
func (r *Reparenter) LockCore(ctx context.Context, dsns []string) (*CoreLock, error) {
	f := r.op(nil, nil)
	l := &CoreLock{}
	var down []string
	for _, d := range dsns {
		c, got, err := f.lockOn(ctx, d)
		if err != nil {
			down = append(down, fmt.Sprintf("%s (%v)", sqldb.Addr(d), err))
			continue
		}
		if !got {
			l.Release()
			return nil, fmt.Errorf("%w: held on core member %s; wait for it or stop it (hbctl core watch runs one)", ErrCoreBusy, sqldb.Addr(d))
		}
		l.conns = append(l.conns, c)
	}
	if len(l.conns) == 0 {
		return nil, fmt.Errorf("core failover lock: no core member answers: %s", strings.Join(down, "; "))
	}
	l.Unlocked = down
	kctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	every := r.idle() / 3
	l.keeper.Go(func() { l.keep(kctx, every) })
	return l, nil
}

// keep pings the lock's connections every period until ctx ends, so that
// their sessions are never idle for the operator's wait_timeout. A ping
// that fails is left to Held, which the failover calls before each step.
func (l *CoreLock) keep(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		for _, c := range l.conns {
			pctx, cancel := context.WithTimeout(ctx, lockCheck)
			_ = c.conn.PingContext(pctx) // see above
			cancel()
		}
		l.mu.Unlock()
	}
}

// stopKeeper ends the keeper and waits for it.
func (l *CoreLock) stopKeeper() {
	if l.stop != nil {
		l.stop()
	}
	l.keeper.Wait()
}

// lockOn tries GET_LOCK on dsn's member, on a connection kept for the
// lock; got is false when another connection holds it.
func (f *op) lockOn(ctx context.Context, dsn string) (c lockConn, got bool, err error) {
	db, err := f.admin(dsn)
	if err != nil {
		return c, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, lockCheck)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return c, false, err
	}
	var n sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", coreLockKey).Scan(&n); err != nil || n.Int64 != 1 {
		conn.Close()
		db.Close()
		return c, false, err
	}
	return lockConn{dsn: dsn, db: db, conn: conn}, true, nil
}

// Held reports (nil) whether one of the lock's connections still holds
// it.
func (l *CoreLock) Held(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var why []string
	for _, c := range l.conns {
		cctx, cancel := context.WithTimeout(ctx, lockCheck)
		var mine sql.NullInt64
		err := c.conn.QueryRowContext(cctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", coreLockKey).Scan(&mine)
		cancel()
		if err == nil && mine.Int64 == 1 {
			return nil
		}
		why = append(why, fmt.Sprintf("%s: %v", sqldb.Addr(c.dsn), errors.Join(err, errors.New("not held"))))
	}
	return fmt.Errorf("core failover lock lost on every member (%s)", strings.Join(why, "; "))
}

// Release drops the lock where it is held.
func (l *CoreLock) Release() {
	l.stopKeeper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_, _ = c.conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", coreLockKey)
		c.conn.Close()
		c.db.Close()
	}
	l.conns = nil
}

// coreAdminDSNs is meta_dsn on each core member's address, as the operator
// reads the members.
func coreAdminDSNs(cfg *configs.Config) ([]string, error) {
	var dsns []string
	for _, addr := range cfg.CoreMembers() {
		c, err := mysql.ParseDSN(cfg.MetaDSN)
		if err != nil {
			return nil, fmt.Errorf("meta_dsn: %w", err)
		}
		c.Addr, c.DBName = addr, ""
		dsns = append(dsns, c.FormatDSN())
	}
	return dsns, nil
}
