package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// ErrMismatch is a verify that found the target differing from the source
// under the fence: the move stops and the source keeps the bucket.
var ErrMismatch = errors.New("move: verify found the target differs from the source")

// Mover applies rebalances from the journal.
type Mover struct {
	// Meta is the meta database, Journal its journal of rebalances.
	Meta    *sql.DB
	Journal *topology.Journal
	// Fleet is the SETs' pools the moves copy between.
	Fleet *Fleet
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Parallel is how many buckets move at once (default 1).
	Parallel int
	// Grace is how long the source's copy is kept after the publish, so
	// servers still on the old topology read it and refuse writes by
	// their fence (default 3 s: more than two topology polls).
	Grace time.Duration
	// Report receives the progress (nil: none).
	Report Reporter
	// Knobs are a test's hooks (zero: none).
	Knobs Knobs
	// SmallDelta ends catching up: a pass that copied no more rows than
	// this is followed by the freeze (default 500).
	SmallDelta int64
	// MaxPasses bounds the catch-up passes before the freeze (default 8).
	MaxPasses int
	// FreezeIdle is the freeze's session's wait_timeout (default 30 s,
	// rounded up to whole seconds): a mover that stops issuing statements
	// in its freeze (stopped, hung, deadlocked) has MariaDB close the
	// session after this long, which rolls the freeze back and gives the
	// bucket's writes back to the source, as its death would. Without it
	// a process hung on a live host (its kernel answers keepalives) would
	// keep the bucket frozen until it died.
	FreezeIdle time.Duration
	// Log receives what the Fleet's following of the SETs' primaries
	// says (nil: nothing).
	Log *zap.Logger
	// Leases, when set, is the etcd cluster each bucket's move takes the
	// bucket's lease in first ("bucket/N"), checked with the quorum at
	// every step (see lease.go); nil: the journal's lock alone.
	Leases *lease.Client
	// Holder names this process to the actors its leases refuse.
	Holder string

	parts sync.Map      // *topology.Move -> FreezeParts of its freeze
	held  sync.Map      // *topology.Move -> *lease.Held of its bucket
	drops chan struct{} // bounds the deletions of sources' copies at once
	pubs  chan publication
}

// publication is a frozen move waiting for the publisher.
type publication struct {
	m    *topology.Move
	done chan error
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
	mv.report(Event{Kind: "start", Rebalance: r, Total: len(r.Moves), Todo: len(todo)})
	// The SETs' pools follow their primaries through a failover during
	// the apply (the topology names the promoted one).
	log := mv.Log
	if log == nil {
		log = zap.NewNop()
	}
	stopWatch, err := mv.Fleet.Watch(ctx, mv.Meta, log)
	if err != nil {
		return err
	}
	defer stopWatch()
	err = mv.run(ctx, r, todo)
	if err == nil {
		err = ctx.Err()
	}
	state, note := topology.Finished, ""
	switch {
	case errors.Is(err, ErrMismatch):
		state, note = topology.Stopped, err.Error()
	case err != nil:
		mv.report(Event{Kind: "interrupted", Rebalance: r, Err: err})
		return err
	}
	// A background context: the journal must say how it ended.
	if ferr := mv.Journal.Finish(context.WithoutCancel(ctx), r.ID, state, note); ferr != nil {
		return errors.Join(err, ferr)
	}
	r.State = state
	mv.report(Event{Kind: "done", Rebalance: r, Err: err})
	return err
}

// outcome gathers the moves' errors; the first one stops the feed.
type outcome struct {
	mu   sync.Mutex
	errs []error
	stop chan struct{}
	once sync.Once
}

func (o *outcome) add(err error) {
	o.mu.Lock()
	o.errs = append(o.errs, err)
	o.mu.Unlock()
	o.once.Do(func() { close(o.stop) })
}

// run moves todo with Parallel workers and the publisher, and returns
// once every move and cleanup it began has ended.
func (mv *Mover) run(ctx context.Context, r *topology.Rebalance, todo []*topology.Move) error {
	mv.drops = make(chan struct{}, max(mv.Parallel, 1))
	mv.pubs = make(chan publication)
	published := make(chan struct{})
	go func() { defer close(published); mv.publisher(ctx) }()
	work := make(chan *topology.Move)
	out := &outcome{stop: make(chan struct{})}
	var wg, cleanups sync.WaitGroup
	for range max(mv.Parallel, 1) {
		wg.Go(func() {
			for m := range work {
				mv.work(ctx, r, m, out, &cleanups)
			}
		})
	}
feed:
	for _, m := range todo {
		select {
		case work <- m:
		case <-out.stop:
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
	return errors.Join(out.errs...)
}

// work moves m and reports its end; the deletion of the source's copy
// goes on in cleanups after the grace, while the worker moves the next
// bucket.
func (mv *Mover) work(ctx context.Context, r *topology.Rebalance, m *topology.Move, out *outcome, cleanups *sync.WaitGroup) {
	began, switches := mv.now(), mv.Fleet.Switches()
	if err := mv.takeLease(ctx, m); err != nil {
		mv.report(Event{Kind: kindOf(m, err), Rebalance: r, Move: *m, Took: mv.now().Sub(began), Err: err})
		out.add(fmt.Errorf("bucket %d: %w", m.Bucket, err))
		return
	}
	finish := func(err error) {
		mv.dropLease(m)
		var parts FreezeParts
		if p, ok := mv.parts.LoadAndDelete(m); ok {
			parts = p.(FreezeParts)
		}
		mv.report(Event{Kind: kindOf(m, err), Rebalance: r, Move: *m, Took: mv.now().Sub(began), Err: err, Freeze: parts})
		if err != nil {
			out.add(fmt.Errorf("bucket %d: %w", m.Bucket, err))
		}
	}
	cleanup, err := mv.moveOne(ctx, m)
	if err != nil && !errors.Is(err, ErrMismatch) && mv.Fleet.Switches() != switches {
		err = fmt.Errorf("%w (a SET's primary changed during the move, a failover: its statements on the old one were cut; run hbctl rebalance apply again to continue)", err)
	}
	if err != nil || cleanup == nil {
		finish(err)
		return
	}
	cleanups.Go(func() { finish(cleanup()) })
}

func kindOf(m *topology.Move, err error) string {
	if err != nil {
		return "failed"
	}
	return "moved"
}

// report hands e to the Reporter, when there is one.
func (mv *Mover) report(e Event) {
	if mv.Report != nil {
		mv.Report.Event(e)
	}
}

// at is the knob at step, then the check of m's bucket lease: an error
// stops the move where it is.
func (mv *Mover) at(ctx context.Context, m *topology.Move, step string) error {
	if mv.Knobs.At != nil {
		if err := mv.Knobs.At(ctx, step); err != nil {
			return fmt.Errorf("stopped at %s: %w", step, err)
		}
	}
	return mv.checkLease(ctx, m, step)
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
		mv.report(Event{Kind: "pass", Move: *m, Stats: st})
		if err := mv.at(ctx, m, m.Step); err != nil {
			return err
		}
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
