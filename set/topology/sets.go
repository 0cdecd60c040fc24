package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// ErrSetExists and ErrSetNotEmpty are refusals of the SET lifecycle.
var (
	ErrSetExists   = errors.New("topology: a SET of that name exists")
	ErrNoSet       = errors.New("topology: no such SET")
	ErrSetNotEmpty = errors.New("topology: the SET still owns buckets")
)

// validName is what a SET may be called: it ends up in metric labels,
// fence rows and log lines.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ValidName reports whether name may name a SET.
func ValidName(name string) bool { return validName.MatchString(name) }

// AddSet records a new SET owning no buckets, and bumps the version so
// routers and servers learn of it.
func AddSet(ctx context.Context, meta *sql.DB, s Set) (int64, error) {
	if !ValidName(s.Name) {
		return 0, fmt.Errorf("topology: SET name %q: want lower-case letters, digits, - or _", s.Name)
	}
	return change(ctx, meta, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM sets WHERE name = ?", s.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %s", ErrSetExists, s.Name)
		}
		return upsertSet(ctx, tx, s)
	})
}

// SetState changes a SET's state (Active or Draining) and weight (0: keep).
func SetState(ctx context.Context, meta *sql.DB, name, state string, weight int) (int64, error) {
	if state != Active && state != Draining {
		return 0, fmt.Errorf("topology: unknown SET state %q", state)
	}
	return change(ctx, meta, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE sets SET state = ?, weight = IF(? > 0, ?, weight) WHERE name = ?", state, weight, weight, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var exists int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM sets WHERE name = ?", name).Scan(&exists); err != nil {
				return err
			}
			if exists == 0 {
				return fmt.Errorf("%w: %s", ErrNoSet, name)
			}
		}
		return nil
	})
}

// RemoveSet forgets a SET that owns no bucket.
func RemoveSet(ctx context.Context, meta *sql.DB, name string) (int64, error) {
	return change(ctx, meta, func(tx *sql.Tx) error {
		var owned int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM buckets WHERE set_name = ?", name).Scan(&owned); err != nil {
			return err
		}
		if owned > 0 {
			return fmt.Errorf("%w: %s owns %d", ErrSetNotEmpty, name, owned)
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM sets WHERE name = ?", name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %s", ErrNoSet, name)
		}
		return nil
	})
}

// ErrPublished is Failover's refusal: the SET's primary in the meta
// database is no longer the one the failover started from (another
// failover published its own meanwhile).
var ErrPublished = errors.New("topology: another failover published a primary meanwhile")

// Failover publishes primary as SET name's MySQL and replicas as its
// replicas (the old primary among them), in one new version: servers and
// settlers move their pools to it when they see the version. It is a
// compare-and-set: it publishes only while the SET's MySQL is still from,
// the primary the failover started from, and otherwise fails with
// ErrPublished naming what is published: two failovers of one primary
// never publish in turn (the second would take the SET away from a
// primary that acknowledged commits).
func Failover(ctx context.Context, meta *sql.DB, name, from, primary string, replicas []string) (int64, error) {
	return change(ctx, meta, func(tx *sql.Tx) error {
		var now string
		err := tx.QueryRowContext(ctx, "SELECT mysql_dsn FROM sets WHERE name = ? FOR UPDATE", name).Scan(&now)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNoSet, name)
		}
		if err != nil {
			return fmt.Errorf("topology: failover of %s: %w", name, err)
		}
		if now != from {
			return fmt.Errorf("%w: SET %s's primary is %s, not %s this failover started from; %s was not published",
				ErrPublished, name, sqldb.Addr(now), sqldb.Addr(from), sqldb.Addr(primary))
		}
		if _, err := tx.ExecContext(ctx, "UPDATE sets SET mysql_dsn = ?, replicas = ? WHERE name = ?", primary, JoinDSNs(replicas), name); err != nil {
			return fmt.Errorf("topology: failover of %s: %w", name, err)
		}
		// Published: the promotion is no longer one to resume.
		if _, err := tx.ExecContext(ctx, "DELETE FROM promotions WHERE set_name = ?", name); err != nil {
			return fmt.Errorf("topology: failover of %s: %w", name, err)
		}
		return nil
	})
}

// ErrFailoverBusy is returned by LockFailover when another failover or
// rejoin of the SET holds its lock.
var ErrFailoverBusy = errors.New("topology: another failover or rejoin of the SET is running")

// LockFailover makes the caller the only one failing SET name over or
// rejoining its old primary until Release (an operator's hbctl set
// failover and the watchdog's must never run at once): a MySQL user lock
// on one connection of the meta database, dropped with it when the
// holder dies. The connection is on the core group's primary, so a core
// failover that fences it (its connections killed) or loses it drops the
// lock too, and another actor may then take it on the new core primary:
// the holder calls Held before each step that must not be done twice.
func LockFailover(ctx context.Context, meta *sql.DB, name string) (*FailoverLock, error) {
	l, err := getLock(ctx, meta, "hb_failover:"+name, 0)
	if errors.Is(err, errLockHeld) {
		return nil, fmt.Errorf("%w: %s", ErrFailoverBusy, name)
	}
	return l, err
}

// errLockHeld is getLock's answer when another session holds the lock.
var errLockHeld = errors.New("held by another session")

// getLock takes user lock key on a connection of meta of its own, waiting
// up to wait for it.
func getLock(ctx context.Context, meta *sql.DB, key string, wait time.Duration) (*FailoverLock, error) {
	conn, err := meta.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("topology: failover lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, wait.Seconds()).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("topology: failover lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, errLockHeld
	}
	return &FailoverLock{conn: conn, key: key}, nil
}

// TakeOverFailover takes SET name's failover lock from the connection
// that holds it: it kills that connection (KILL CONNECTION, allowed on
// the same account's sessions) and waits up to wait for the lock. Only a
// caller that knows the holder is no longer entitled to it may call it:
// one holding the group's etcd lease, which the holder lost (it was
// paused, hung or cut off past the lease's TTL). A holder that is alive
// but hung keeps its connection, and with it the lock, for as long as its
// host answers TCP keepalives; without this nobody could fail the SET
// over until it dies.
func TakeOverFailover(ctx context.Context, meta *sql.DB, name string, wait time.Duration) (lock *FailoverLock, killed int64, err error) {
	key := "hb_failover:" + name
	var holder sql.NullInt64
	if err := meta.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", key).Scan(&holder); err != nil {
		return nil, 0, fmt.Errorf("topology: failover lock's holder: %w", err)
	}
	if holder.Valid {
		// It may have ended by itself meanwhile: then the lock is free anyway.
		if _, err := meta.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", holder.Int64)); err != nil && !isNoSuchThread(err) {
			return nil, 0, fmt.Errorf("topology: ending the failover lock's holder (connection %d): %w", holder.Int64, err)
		}
	}
	l, err := getLock(ctx, meta, key, wait)
	if errors.Is(err, errLockHeld) {
		return nil, 0, fmt.Errorf("%w: %s (still held after its holder's connection %d was killed)", ErrFailoverBusy, name, holder.Int64)
	}
	return l, holder.Int64, err
}

// isNoSuchThread is MariaDB's answer to a KILL of a connection gone
// (1094, ER_NO_SUCH_THREAD).
func isNoSuchThread(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1094
}

// FailoverLock is a SET's failover lock, held (LockFailover).
type FailoverLock struct {
	conn *sql.Conn
	key  string
}

// ErrLockLost is Held's answer when the lock is no longer the caller's.
var ErrLockLost = errors.New("topology: the failover lock was lost")

// lockCheckTimeout bounds Held: a core primary that is paused holds the
// connection and answers nothing.
const lockCheckTimeout = 2 * time.Second

// Held reports (nil) whether the lock is still held by its own
// connection: IS_USED_LOCK names that connection. A connection killed (a
// core failover's fence), gone with its server or silent fails with
// ErrLockLost.
func (l *FailoverLock) Held(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lockCheckTimeout)
	defer cancel()
	var mine sql.NullInt64
	if err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.key).Scan(&mine); err != nil {
		return fmt.Errorf("%w (%s): its meta connection: %v", ErrLockLost, l.key, err)
	}
	if mine.Int64 != 1 {
		return fmt.Errorf("%w (%s): another connection holds it or none does", ErrLockLost, l.key)
	}
	return nil
}

// Release drops the lock (a no-op when it was lost).
func (l *FailoverLock) Release() {
	_, _ = l.conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", l.key)
	l.conn.Close()
}

// change runs fn in a transaction holding the version row and bumps the
// version: every change of the topology is one new version.
func change(ctx context.Context, meta *sql.DB, fn func(*sql.Tx) error) (int64, error) {
	if err := schema.EnsureMeta(ctx, meta); err != nil {
		return 0, err
	}
	tx, err := meta.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("topology: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var version int64
	if err := tx.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1 FOR UPDATE").Scan(&version); err != nil {
		return 0, fmt.Errorf("topology: version: %w", err)
	}
	if err := fn(tx); err != nil {
		return 0, err
	}
	if err := bump(ctx, tx, version); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("topology: %w", err)
	}
	return version + 1, nil
}
