package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/topology"
	"go.uber.org/zap"
)

// One actor per group across hosts. A group's MySQL lock (the SET's
// GET_LOCK in the meta database, the core lock on the core members) lives
// in the databases a failover replaces and dies with them; two actors on
// two hosts that reach disjoint members would not exclude each other.
// When the Reparenter has Leases (configs.Etcd), every failover, rejoin
// and replica start of a group first takes the group's lease in etcd
// ("set/NAME", "core"), then the MySQL lock as before; before each
// destructive step both are checked (op.step): the lease against the etcd
// quorum, so an actor paused past the lease's TTL, or on the minority side
// of a partition, stops instead of acting beside the one that took over.

// ErrBusy is returned when another actor holds a group's lease: its
// holder is named in the message.
var ErrBusy = errors.New("another actor acts on this group")

// leased is a group's MySQL lock together with its etcd lease.
type leased struct {
	HeldLock
	lease *lease.Held
}

// Held checks the lease with the etcd quorum, then the MySQL lock.
func (l leased) Held(ctx context.Context) error {
	if err := l.lease.Check(ctx); err != nil {
		return err
	}
	return l.HeldLock.Held(ctx)
}

// Release releases the MySQL lock, then the lease (a lease that cannot be
// released expires after its TTL).
func (l leased) Release() {
	l.HeldLock.Release()
	l.lease.Drop()
}

// takeLease takes group's lease when the Reparenter has Leases; nil
// otherwise.
func (r *Reparenter) takeLease(ctx context.Context, group string) (*lease.Held, error) {
	if r.Leases == nil {
		return nil, nil
	}
	h, err := r.Leases.TryAcquire(ctx, group, r.Holder)
	if errors.Is(err, lease.ErrBusy) {
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return h, err
}

// withLease is lock guarded by h too (lock alone when h is nil).
func withLease(lock HeldLock, h *lease.Held) HeldLock {
	if h == nil {
		return lock
	}
	return leased{HeldLock: lock, lease: h}
}

// dropLease releases h when the MySQL lock could not be taken after it.
func dropLease(h *lease.Held) {
	if h != nil {
		h.Drop()
	}
}

// lockSet takes SET name's lease (with Leases) and then its failover lock
// in the meta database.
func (r *Reparenter) lockSet(ctx context.Context, meta *sql.DB, name string) (HeldLock, error) {
	h, err := r.takeLease(ctx, "set/"+name)
	if err != nil {
		return nil, err
	}
	mlock, err := topology.LockFailover(ctx, meta, name)
	if errors.Is(err, topology.ErrFailoverBusy) && h != nil {
		// The lease is ours, so whoever holds the MySQL lock lost its
		// lease: paused, hung or cut off past the TTL, yet its connection
		// lives. Every step it would still take checks the lease first
		// and stops; end its session and take the lock.
		var killed int64
		mlock, killed, err = topology.TakeOverFailover(ctx, meta, name, 5*time.Second)
		if err == nil && r.Progress != nil {
			r.Progress(fmt.Sprintf("SET %s: its failover lock was held by meta connection %d, which holds no lease: that connection was killed and the lock taken over", name, killed))
		}
	}
	if err != nil {
		dropLease(h)
		return nil, err
	}
	return withLease(mlock, h), nil
}

// lockCore takes the core group's lease (with Leases) and then the core
// failover lock on its members; the CoreLock says which did not answer.
func (r *Reparenter) lockCore(ctx context.Context, cfg *configs.Config) (HeldLock, *CoreLock, error) {
	h, err := r.takeLease(ctx, "core")
	if err != nil {
		return nil, nil, err
	}
	clock, err := r.LockCoreOf(ctx, cfg)
	if err != nil {
		dropLease(h)
		return nil, nil, err
	}
	return withLease(clock, h), clock, nil
}

// Open is New for cfg's operator account with the leases of cfg's etcd
// cluster when it has one (configs.Etcd); Close closes them.
func Open(ctx context.Context, cfg *configs.Config, log *zap.Logger) (*Reparenter, error) {
	r := New(cfg.Replication)
	lc, err := lease.Open(ctx, cfg.Etcd, log)
	if err != nil {
		return nil, err
	}
	r.Leases = lc
	return r, nil
}

// Close closes the Reparenter's connection to etcd, if any. Leases still
// held expire after their TTL.
func (r *Reparenter) Close() error {
	if r.Leases == nil {
		return nil
	}
	return r.Leases.Close()
}
