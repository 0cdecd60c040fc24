package rebalance

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// ErrMismatch is a verify that found the target differing from the source
// under the fence: the move stops and the source keeps the bucket.
var ErrMismatch = errors.New("rebalance: verify found the target differs from the source")

// Mover applies rebalances from the journal.
type Mover struct {
	Meta    *sql.DB
	Journal *topology.Journal
	Fleet   *Fleet
	Now     func() time.Time
	// Parallel is how many buckets move at once (default 1).
	Parallel int
	// Grace is how long the source's copy is kept after the publish, so
	// servers still on the old topology read it and refuse writes by
	// their fence (default 3 s: more than two topology polls).
	Grace time.Duration
	// Report receives the progress.
	Report Reporter
	// Fault is a test's fault injection (zero: none).
	Fault Fault
	// SmallDelta ends catching up: a pass that copied no more rows than
	// this is followed by the freeze (default 500).
	SmallDelta int64
	// MaxPasses bounds the catch-up passes before the freeze (default 8).
	MaxPasses int
	// Log receives what the Fleet's following of the SETs' primaries
	// says (nil: nothing).
	Log *zap.Logger

	parts sync.Map      // *topology.Move -> FreezeParts of its freeze
	drops chan struct{} // bounds the deletions of sources' copies at once
	pubs  chan publication
}

// publication is a frozen move waiting for the publisher.
type publication struct {
	m    *topology.Move
	done chan error
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

// Apply moves every bucket of r not done yet, Parallel at a time, and
// records r's end in the journal. A verify mismatch stops the rebalance
// (moves under way finish; none starts); any other error stops it too and
// leaves it running, for the next apply to continue.
func (mv *Mover) Apply(ctx context.Context, r *topology.Rebalance) error {
	var todo []*topology.Move
	for i := range r.Moves {
		if s := r.Moves[i].Step; s != topology.Done && s != topology.Failed {
			todo = append(todo, &r.Moves[i])
		}
	}
	mv.Report.Event(Event{Kind: "start", Rebalance: r, Total: len(r.Moves), Todo: len(todo)})
	// The SETs' pools follow their primaries through a failover during
	// the apply (the topology names the promoted one).
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	log := mv.Log
	if log == nil {
		log = zap.NewNop()
	}
	if err := mv.Fleet.Watch(watch, mv.Meta, log); err != nil {
		return err
	}
	mv.drops = make(chan struct{}, max(mv.Parallel, 1))
	mv.pubs = make(chan publication)
	published := make(chan struct{})
	go func() { defer close(published); mv.publisher(ctx) }()
	work := make(chan *topology.Move)
	var mu sync.Mutex
	var errs []error
	var wg, cleanups sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	finish := func(m *topology.Move, began time.Time, err error) {
		var parts FreezeParts
		if p, ok := mv.parts.LoadAndDelete(m); ok {
			parts = p.(FreezeParts)
		}
		mv.Report.Event(Event{Kind: kindOf(m, err), Rebalance: r, Move: *m, Took: mv.now().Sub(began), Err: err, Freeze: parts})
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("bucket %d: %w", m.Bucket, err))
			mu.Unlock()
			once.Do(func() { close(stop) })
		}
	}
	for range max(mv.Parallel, 1) {
		wg.Go(func() {
			for m := range work {
				began, switches := mv.now(), mv.Fleet.Switches()
				cleanup, err := mv.moveOne(ctx, m)
				if err != nil && !errors.Is(err, ErrMismatch) && mv.Fleet.Switches() != switches {
					err = fmt.Errorf("%w (a SET's primary changed during the move, a failover: its statements on the old one were cut; run hbctl rebalance apply again to continue)", err)
				}
				if err != nil || cleanup == nil {
					finish(m, began, err)
					continue
				}
				// The source's copy goes after the grace, while this
				// worker moves the next bucket.
				cleanups.Go(func() { finish(m, began, cleanup()) })
			}
		})
	}
feed:
	for _, m := range todo {
		select {
		case work <- m:
		case <-stop:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(mv.pubs)
	<-published
	cleanups.Wait()
	err := errors.Join(errs...)
	if err == nil {
		err = ctx.Err()
	}
	state, note := topology.Finished, ""
	switch {
	case errors.Is(err, ErrMismatch):
		state, note = topology.Stopped, err.Error()
	case err != nil:
		mv.Report.Event(Event{Kind: "interrupted", Rebalance: r, Err: err})
		return err
	}
	// A background context: the journal must say how it ended.
	if ferr := mv.Journal.Finish(context.WithoutCancel(ctx), r.ID, state, note); ferr != nil {
		return errors.Join(err, ferr)
	}
	r.State = state
	mv.Report.Event(Event{Kind: "done", Rebalance: r, Err: err})
	return err
}

func kindOf(m *topology.Move, err error) string {
	if err != nil {
		return "failed"
	}
	return "moved"
}

func (mv *Mover) now() time.Time {
	if mv.Now != nil {
		return mv.Now()
	}
	return time.Now()
}

// moveOne takes one bucket's move from the step the journal has it at to
// Published, and returns what is left: the deletion of the source's copy
// after the grace (nil when there is none).
func (mv *Mover) moveOne(ctx context.Context, m *topology.Move) (func() error, error) {
	t, err := topology.Load(ctx, mv.Meta)
	if err != nil {
		return nil, err
	}
	src, ok1 := t.Set(m.From)
	dst, ok2 := t.Set(m.To)
	if !ok1 || !ok2 {
		return nil, mv.fail(ctx, m, fmt.Errorf("%w: SET %s or %s is gone", ErrMismatch, m.From, m.To))
	}
	from, err := mv.Fleet.Side(src)
	if err != nil {
		return nil, err
	}
	to, err := mv.Fleet.Side(dst)
	if err != nil {
		return nil, err
	}
	cleanup := func() error { return mv.cleanup(ctx, m, from) }
	owner := t.Owner(m.Bucket).Name
	switch {
	case owner == m.To && (m.Step == topology.Disowning || m.Step == topology.Published):
		m.Step = topology.Published // a server finished the publish for a mover that died
		return cleanup, nil
	case owner == m.To:
		m.Error = "already on " + m.To + " before this move"
		m.Step = topology.Done
		return nil, mv.Journal.Record(ctx, m, 0)
	case owner != m.From:
		return nil, mv.fail(ctx, m, fmt.Errorf("%w: bucket %d is on SET %s, not %s", ErrMismatch, m.Bucket, owner, m.From))
	}
	if m.Step == topology.Disowning {
		if published, err := mv.resume(ctx, m, from); err != nil || published {
			return cleanup, err
		}
	}
	b := &migrate.Bucket{B: m.Bucket, From: from, To: to}
	if err := mv.copyLive(ctx, m, b); err != nil {
		return nil, err
	}
	if err := mv.freeze(ctx, m, b, t.Version); err != nil {
		return nil, err
	}
	return cleanup, nil
}

// resume finishes a move its mover left Disowning: published when the
// source's fence no longer has the bucket, otherwise sent back to
// catching up. It reports whether the move is published.
func (mv *Mover) resume(ctx context.Context, m *topology.Move, from migrate.Side) (bool, error) {
	held, busy, err := fence.Holds(ctx, from.Live, m.From, m.Bucket)
	switch {
	case err != nil:
		return false, err
	case busy:
		return false, fmt.Errorf("bucket %d: the source's fence is held by another mover", m.Bucket)
	case held:
		m.Step = topology.CatchingUp
		return false, mv.Journal.Retry(ctx, m)
	}
	if _, err := mv.Journal.Publish(ctx, m); err != nil {
		return false, err
	}
	m.Step = topology.Published
	return true, nil
}

// copyLive copies the bucket while the source serves, then catches up
// until a pass copies little.
func (mv *Mover) copyLive(ctx context.Context, m *topology.Move, b *migrate.Bucket) error {
	// The target's fence table now, so the freeze runs no DDL.
	if err := schema.EnsureFence(ctx, b.To.Live); err != nil {
		return err
	}
	m.Step = topology.Copying
	for {
		st, err := b.Pass(ctx)
		if err != nil {
			return err
		}
		m.RowsCopied += st.Rows
		m.Passes++
		if err := mv.Journal.Record(ctx, m, 0); err != nil {
			return err
		}
		mv.Report.Event(Event{Kind: "pass", Move: *m, Stats: st})
		mv.Fault.at(m.Step)
		if st.Rows+st.Deleted <= mv.smallDelta() || m.Passes >= mv.maxPasses() {
			return nil
		}
		m.Step = topology.CatchingUp
	}
}

func (mv *Mover) smallDelta() int64 {
	if mv.SmallDelta > 0 {
		return mv.SmallDelta
	}
	return 500
}

func (mv *Mover) maxPasses() int {
	if mv.MaxPasses > 0 {
		return mv.MaxPasses
	}
	return 8
}

// freeze takes the source's fence in a transaction left open (writes of
// the bucket wait on it; if the mover dies MySQL rolls it back and the
// source serves again), copies the last delta, verifies, gives the target
// its fence, commits the source's loss of it and publishes the topology.
func (mv *Mover) freeze(ctx context.Context, m *topology.Move, b *migrate.Bucket, version int64) error {
	tx, err := b.From.Live.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	began := mv.now()
	var parts FreezeParts
	lap := func(d *time.Duration) {
		now := mv.now()
		*d = now.Sub(began) - parts.Fence - parts.Delta - parts.Verify
	}
	defer func() { mv.parts.Store(m, parts) }()
	if err := fence.Disown(ctx, tx, m.From, []hongbao.Bucket{m.Bucket}); err != nil {
		return err
	}
	lap(&parts.Fence)
	m.Step = topology.Frozen
	st, err := b.Delta(ctx)
	if err != nil {
		return err
	}
	lap(&parts.Delta)
	m.RowsCopied += st.Rows
	m.Passes++
	mv.Fault.at(m.Step)
	_, bad, err := b.Verify(ctx)
	lap(&parts.Verify)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		tx.Rollback() //nolint:errcheck // the source keeps the bucket
		err := fmt.Errorf("%w: %s", ErrMismatch, strings.Join(bad, "; "))
		// The target never owned the bucket: its copy is only in the way
		// (of verify, and of a later move, which would copy it again).
		if derr := migrate.Drop(ctx, b.To, m.Bucket); derr != nil {
			err = errors.Join(err, derr)
		}
		return mv.fail(ctx, m, err)
	}
	step := mv.now()
	since := func(d *time.Duration) {
		now := mv.now()
		*d, step = now.Sub(step), now
	}
	if err := claimTarget(ctx, mv.Journal, m, b.To.Live, version+1, func() { since(&parts.Lease) }); err != nil {
		return err
	}
	since(&parts.Claim)
	// Both fences hold the bucket until the commit: a test pauses here
	// (HBCTL_FAULT=pause@claimed:PATH) to check verify counts it once.
	mv.Fault.at(FaultClaimed)
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit the source's fence: %w", err)
	}
	since(&parts.Commit)
	mv.Fault.at(m.Step)
	if err := mv.publish(ctx, m); err != nil {
		return err
	}
	if err := mv.published(ctx, m); err != nil {
		return err
	}
	since(&parts.Publish)
	m.Step = topology.Published
	m.FreezeMS = int(mv.now().Sub(began).Milliseconds())
	parts.Handover = mv.now().Sub(began) - parts.Fence - parts.Delta - parts.Verify
	if err := mv.Journal.Record(ctx, m, 0); err != nil {
		return err
	}
	mv.Fault.at(m.Step)
	return nil
}

// claimTarget records m Disowning with a one-second lease (until it ends
// no server finishes the move for its mover), then claims the target's
// fence at version; leased runs between the two. The record comes first:
// a claim with no Disowning move behind it is stale (its mover died), and
// the target's servers delete it (RemoveStaleClaims); one made after this
// record is never taken for one.
func claimTarget(ctx context.Context, j *topology.Journal, m *topology.Move, to *sql.DB, version int64, leased func()) error {
	m.Step = topology.Disowning
	if err := j.Record(ctx, m, time.Second); err != nil {
		return err
	}
	leased()
	return fence.Claim(ctx, to, m.To, version, []hongbao.Bucket{m.Bucket})
}

// published checks that m's publish took place: PublishAll marks m
// Published when it published it; otherwise a server published it for its
// mover (the topology names the target) or the journal no longer had the
// move at Disowning, and then nothing may be recorded Published: the
// cleanup would delete the source's copy, the one the topology names.
func (mv *Mover) published(ctx context.Context, m *topology.Move) error {
	if m.Step == topology.Published {
		return nil
	}
	t, err := topology.Load(ctx, mv.Meta)
	if err != nil {
		return err
	}
	if owner := t.Owner(m.Bucket).Name; owner != m.To {
		return fmt.Errorf("bucket %d: the source gave it up but the move was not published (the journal no longer had it at %s; the topology names %s): see hbctl rebalance status; hbctl rebalance apply finishes it",
			m.Bucket, topology.Disowning, owner)
	}
	return nil
}

// publish hands m to the publisher and waits for its publication.
func (mv *Mover) publish(ctx context.Context, m *topology.Move) error {
	p := publication{m: m, done: make(chan error, 1)}
	select {
	case mv.pubs <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-p.done
}

// publisher publishes the moves that froze meanwhile together, in one
// meta transaction and one topology version, while moves keep freezing:
// the version row's lock and the meta database's commit are the handover's
// cost, and the freezes waited on them one by one.
func (mv *Mover) publisher(ctx context.Context) {
	for p := range mv.pubs {
		batch := []publication{p}
	more:
		for {
			select {
			case q, ok := <-mv.pubs:
				if !ok {
					break more
				}
				batch = append(batch, q)
			default:
				break more
			}
		}
		ms := make([]*topology.Move, len(batch))
		for i, q := range batch {
			ms[i] = q.m
		}
		// A background context: a move given up at the source must be
		// published even when the apply is interrupted.
		_, err := mv.Journal.PublishAll(context.WithoutCancel(ctx), ms)
		for _, q := range batch {
			q.done <- err
		}
	}
}

// cleanup deletes the source's copy once servers have had the grace to
// see the new topology.
func (mv *Mover) cleanup(ctx context.Context, m *topology.Move, from migrate.Side) error {
	grace := mv.Grace
	if grace <= 0 {
		grace = 3 * time.Second
	}
	if wait := grace - mv.now().Sub(m.UpdatedAt); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case mv.drops <- struct{}{}:
		defer func() { <-mv.drops }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := migrate.Drop(ctx, from, m.Bucket); err != nil {
		return err
	}
	m.Step = topology.Done
	return mv.Journal.Record(ctx, m, 0)
}

// fail records m as failed with err and returns err.
func (mv *Mover) fail(ctx context.Context, m *topology.Move, err error) error {
	m.Step, m.Error = topology.Failed, err.Error()
	if rerr := mv.Journal.Record(context.WithoutCancel(ctx), m, 0); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}
