package move

import (
	"context"
	"fmt"

	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// One mover per bucket across hosts. The journal's lock is a GET_LOCK in
// the meta database, on the core primary: it dies with it, and two hbctl
// processes on two sides of a core failover would each hold one. With
// Leases (configs.Etcd) each bucket's move first takes "bucket/N" in etcd
// and checks it with the quorum before every step that changes anything
// (Mover.at): a mover paused past the lease's TTL, or cut off from the
// quorum, stops instead of freezing, claiming or publishing beside another.

// takeLease takes m's bucket lease when the Mover has Leases.
func (mv *Mover) takeLease(ctx context.Context, m *topology.Move) error {
	if mv.Leases == nil {
		return nil
	}
	h, err := mv.Leases.TryAcquire(ctx, fmt.Sprintf("bucket/%d", m.Bucket), mv.Holder)
	if err != nil {
		return err
	}
	mv.held.Store(m, h)
	return nil
}

// checkLease asks the quorum whether m's bucket lease is still held.
func (mv *Mover) checkLease(ctx context.Context, m *topology.Move, step string) error {
	h, ok := mv.held.Load(m)
	if !ok {
		return nil
	}
	if err := h.(*lease.Held).Check(ctx); err != nil {
		return fmt.Errorf("stopped before %s: %w", step, err)
	}
	return nil
}

// dropLease releases m's bucket lease, if it has one (one that cannot be
// released expires after its TTL).
func (mv *Mover) dropLease(m *topology.Move) {
	h, ok := mv.held.LoadAndDelete(m)
	if !ok {
		return
	}
	h.(*lease.Held).Drop()
}
