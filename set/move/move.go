// Package move is the live move of buckets between SETs, the whole
// protocol in one place: the Mover that applies a journalled rebalance
// bucket by bucket with the live copy of store/migrate (copy while the
// source serves, catch up, freeze under the source's fence held in an open
// transaction, copy the last delta, verify, hand the fence to the target,
// publish the topology, delete the source's copy after a grace), the
// Fleet of the SETs' pools and loads it works with, the Operator's
// commands over them (plan, apply, reverse, one bucket), and the Recovery
// every server runs of the moves whose mover died (publish or send back,
// remove stale claims).
//
// It is named for the move, the unit every step here acts on and the one
// the journal records step by step: the rebalance (a plan and its journal)
// and the topology the moves change are set/topology's state; what a move
// copies is store/migrate's, what it fences store/fence's.
package move

import (
	"context"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// StepClaimed is the point between the target's fence claim and the commit
// of the source's release, when both SETs' fences hold the bucket; the
// other points Knobs.At sees are the journal's steps (topology.Copying,
// topology.CatchingUp, topology.Frozen: after the source's fence is taken;
// topology.Disowning: after the source's release committed, before the
// publish; topology.Published).
const StepClaimed = "claimed"

// Knobs are a test's hooks into the protocol, set in process (the zero
// value: none).
type Knobs struct {
	// At runs when a move reaches step. Blocking there pauses the move. An
	// error stops the move there at once, as the death of its process
	// would: nothing more is recorded, published or cleaned up, its open
	// transaction is rolled back (as MySQL rolls back a dead client's) and
	// Apply returns the error. The test then closes the pools it gave the
	// Mover, as a dead process's sockets close.
	At func(ctx context.Context, step string) error
	// AfterStaleCheck runs in the removal of a stale claim after the meta
	// database said the claim is stale, before the delete: a live mover's
	// claim is made to wait there on the row's lock.
	AfterStaleCheck func(hongbao.Bucket)
	// AfterHolds runs in Recovery.Once between the source's fence read and
	// the move's retry: a mover resumes the move there.
	AfterHolds func(*topology.Move)
}

// Event is one step of an apply's progress.
type Event struct {
	Kind      string // start, pass, moved, failed, interrupted, done
	Rebalance *topology.Rebalance
	Move      topology.Move
	Stats     migrate.Stats
	Total     int // start: moves in the rebalance
	Todo      int // start: moves left to do
	Took      time.Duration
	Freeze    FreezeParts // moved: where the freeze's time went
	Err       error
}

// Reporter shows an apply's progress (hbctl: a bar on a terminal, JSON
// lines otherwise).
type Reporter interface {
	Event(Event)
}

// FreezeParts is where a freeze's time went: waiting for the transactions
// holding the source's fence, copying the last delta, verifying, and
// handing over (the target's fence, the journal, the source's commit, the
// publish).
type FreezeParts struct {
	Fence, Delta, Verify, Handover time.Duration
	// The handover's own parts: the target's fence, the journal's lease,
	// the source's commit, the publish.
	Claim, Lease, Commit, Publish time.Duration
}
