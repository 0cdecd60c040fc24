package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// Which SET counts a bucket. An audit opens one consistent snapshot per SET,
// one after another, and a live rebalance hands buckets over meanwhile: a
// bucket whose source gave it up after the source's snapshot and whose
// target claimed it before the target's was counted twice (the other way
// round: not at all), and a mover claims the target's fence before it
// commits the source's release, so for a few milliseconds both fences hold
// the bucket. Counting "every bucket its fence holds" in each snapshot is
// therefore wrong during moves (and forever after a mover died between the
// two commits: the source rolled back and serves, the target keeps a stale
// claim).
//
// So every bucket is counted in exactly one snapshot, chosen with the meta
// database, read around the snapshots' opening (t0, d0 before the first,
// d1 then t1 after the last; each SET's snapshot is opened and its fence
// read in it within milliseconds, the counting comes after):
//
//   - the topology names the same SET S for b in t0 and t1, and S's fence
//     holds b in S's snapshot: S counts b. S was published before the
//     snapshot, and a published owner holds the bucket's true rows from its
//     publication until it commits its release, after which its fence no
//     longer has b; the only other fence that may hold b then is a move's
//     target (a copy, stale until the freeze), which no server writes to
//     before it is published.
//   - else, b's move S -> T was Disowning in d0 and T's fence holds b in
//     T's snapshot (so T's claim, made after the verify under the freeze
//     and after that record, is older than T's snapshot): T counts b. S released it; T's copy was verified under the freeze and
//     nobody writes it until the publish, which t1 has not seen.
//   - else, b's move is Disowning in d1, or t0 and t1 name different SETs
//     for b: a handover overlapped the pass. The snapshots are closed and
//     opened again (a handover takes milliseconds; a mover that died in it
//     is finished by the source's servers after its one-second lease),
//     for at most settleFor, then the audit fails with an error naming the
//     buckets: never a silent guess.
//   - else the fences and the topology disagree without a move under way
//     (a topology changed by hand): every snapshot whose fence holds b
//     counts it, as before, and a double count shows as a violation.
//
// If the meta database fails over and loses a publish, t1 differs from t0
// (or goes back): read again, as for a handover.
//
// A lock in the meta database, held by the mover across each handover and
// by the audit while opening its snapshots, was the alternative: it would
// serialise the parallel movers' handovers on one lock, add a meta round
// trip and a dependency on the meta database to every freeze, be lost
// silently in a meta failover, and still count the stale claim a dead
// mover leaves. Reading what the mover journals anyway costs the movers
// nothing and the audit a retry now and then.
const settleFor = 10 * time.Second

// ownerView is what the meta database and the SETs' fences said around
// the opening of one pass's snapshots.
type ownerView struct {
	v0, v1 int64                            // the topology's versions
	t0, t1 func(hongbao.Bucket) string      // the topology's owners
	d0, d1 map[hongbao.Bucket]topology.Move // Disowning moves by bucket
	fences map[string]map[hongbao.Bucket]bool
}

// assign returns the buckets each SET's snapshot counts (by SET name; a
// map for every SET with a fence, possibly empty) and the buckets whose
// handover overlapped the pass (see above), in order.
func assign(v ownerView) (map[string]map[hongbao.Bucket]bool, []hongbao.Bucket) {
	counted := map[string]map[hongbao.Bucket]bool{}
	for name := range v.fences {
		counted[name] = map[hongbao.Bucket]bool{}
	}
	if v.v1 < v.v0 { // the meta database went back: a failover
		return counted, fence.AllBuckets()
	}
	var unsettled []hongbao.Bucket
	for b := range hongbao.Bucket(hongbao.Buckets) {
		owner := v.t1(b)
		m0, in0 := v.d0[b]
		_, in1 := v.d1[b]
		switch {
		case v.t0(b) != owner:
			unsettled = append(unsettled, b)
		case v.fences[owner][b]:
			counted[owner][b] = true
		case in0 && m0.From == owner && v.fences[m0.To][b]:
			counted[m0.To][b] = true
		case in0 || in1:
			unsettled = append(unsettled, b)
		default:
			for name, fence := range v.fences {
				if fence[b] {
					counted[name][b] = true
				}
			}
		}
	}
	return counted, unsettled
}

// staleClaims names the fence rows of v that nothing backs: a SET's claim
// of a bucket the topology gives another SET (in t0 and t1) with no move
// of it to that SET Disowning (d0 or d1). A mover killed between its
// claim and the source's release leaves one; the claiming SET's servers
// delete it within a second (move.Recovery.RemoveStaleClaims), and its
// settler and archiver never act on it, but it is shown: an operator
// reading the fence must not take it for ownership.
func staleClaims(v ownerView) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(v.fences)) {
		for _, b := range slices.Sorted(maps.Keys(v.fences[name])) {
			owner := v.t1(b)
			if owner == name || v.t0(b) == name || v.d0[b].To == name || v.d1[b].To == name {
				continue
			}
			out = append(out, fmt.Sprintf("SET %s: stale claim of bucket %d in its fence (hb_fence.owned): the topology gives it to SET %s and no move of it to %s is under way; its servers delete it (is one running?)",
				name, b, owner, name))
		}
	}
	return out
}

// setPools are one SET's pools, open for the whole audit.
type setPools struct {
	set      string // its name
	name     string // its fence's name; "": every table (no meta database)
	db, cold *sql.DB
}

// openSnapshots begins every SET's snapshot and counts in each the
// buckets assign gives it, reading again while a handover overlaps the
// opening (at most settleFor; retry, when not nil, is told each time) or
// a day's tables are created under it (store.ErrYounger).
// meta nil: no topology, every snapshot counts every table. The snapshots
// are returned in the order of pools, with the stale claims; the caller
// closes them.
func openSnapshots(ctx context.Context, meta *sql.DB, pools []setPools, loc *time.Location,
	retry func([]hongbao.Bucket)) ([]*store.Snapshot, []string, error) {
	deadline := time.Now().Add(settleFor)
	for {
		snaps, unsettled, stale, err := openPass(ctx, meta, pools, loc)
		if errors.Is(err, store.ErrYounger) && time.Now().Before(deadline) {
			continue // a day's tables were being created as it opened (openPass closed its snapshots)
		}
		if err != nil || len(unsettled) == 0 {
			return snaps, stale, err
		}
		closeAll(snaps)
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("buckets %v were being handed over between SETs for %s: no consistent view of them (a move stuck at %s? see hbctl rebalance status); run verify again",
				unsettled[:min(len(unsettled), 10)], settleFor, topology.Disowning)
		}
		if retry != nil {
			retry(unsettled)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// openPass is one attempt of openSnapshots: the snapshots, with their
// buckets assigned and counted, and the stale claims (staleClaims), or the
// buckets a handover overlapped.
func openPass(ctx context.Context, meta *sql.DB, pools []setPools, loc *time.Location) (_ []*store.Snapshot, unsettled []hongbao.Bucket, stale []string, err error) {
	var snaps []*store.Snapshot
	defer func() {
		if err != nil {
			closeAll(snaps)
		}
	}()
	var v ownerView
	if meta != nil {
		t0, d0, err := readOwners(ctx, meta)
		if err != nil {
			return nil, nil, nil, err
		}
		v.v0, v.t0, v.d0 = t0.Version, ownerOf(t0), d0
	}
	v.fences = map[string]map[hongbao.Bucket]bool{}
	for _, p := range pools {
		s, err := store.BeginSnapshot(ctx, p.db, p.name, loc)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("SET %s: %w", p.set, err)
		}
		snaps = append(snaps, s)
		v.fences[p.name] = s.Fence()
	}
	counted := map[string]map[hongbao.Bucket]bool{} // no meta: nil, every table
	if meta != nil {
		// The journal before the topology: a publish between them shows
		// in t1 (see the comment above settleFor).
		if v.d1, err = topology.DisowningMoves(ctx, meta); err != nil {
			return nil, nil, nil, err
		}
		t1, err := topology.Load(ctx, meta)
		if err != nil {
			return nil, nil, nil, err
		}
		v.v1, v.t1 = t1.Version, ownerOf(t1)
		if counted, unsettled = assign(v); len(unsettled) > 0 {
			return snaps, unsettled, nil, nil
		}
		stale = staleClaims(v)
	}
	for i, p := range pools {
		if err := snaps[i].Count(ctx, p.cold, counted[p.name]); err != nil {
			return nil, nil, nil, fmt.Errorf("SET %s: %w", p.set, err)
		}
	}
	return snaps, nil, stale, nil
}

// readOwners reads the topology and the Disowning moves, in this order.
func readOwners(ctx context.Context, meta *sql.DB) (*topology.Map, map[hongbao.Bucket]topology.Move, error) {
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, nil, err
	}
	d, err := topology.DisowningMoves(ctx, meta)
	return t, d, err
}

// ownerOf is t's owner of a bucket, by name.
func ownerOf(t *topology.Map) func(hongbao.Bucket) string {
	return func(b hongbao.Bucket) string { return t.Owner(b).Name }
}

// closeAll closes snapshots, for a pass read again or given up.
func closeAll(snaps []*store.Snapshot) {
	for _, s := range snaps {
		s.Close()
	}
}
