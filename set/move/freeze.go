package move

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// freeze takes the source's fence in a transaction left open (writes of
// the bucket wait on it; if the mover dies MySQL rolls it back and the
// source serves again), copies the last delta, verifies, and hands over
// (handOver).
func (mv *Mover) freeze(ctx context.Context, m *topology.Move, b *migrate.Bucket, version int64) error {
	conn, err := idleBounded(ctx, b.From.Live, cmp.Or(mv.FreezeIdle, defaultFreezeIdle))
	if err != nil {
		return err
	}
	defer restoreIdle(conn)
	tx, err := conn.BeginTx(ctx, nil)
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
	if err := mv.at(ctx, m, m.Step); err != nil {
		return err
	}
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
	return mv.handOver(ctx, m, b, tx, version, began, &parts)
}

// defaultFreezeIdle is Mover.FreezeIdle's default: far above a freeze's
// quiet moments (a delta, a verify and a claim on other connections take
// well under a second), far below a bucket frozen for good.
const defaultFreezeIdle = 30 * time.Second

// idleBounded is a connection of db whose session MariaDB closes after
// idle without a statement (wait_timeout, whole seconds).
func idleBounded(ctx context.Context, db *sql.DB, idle time.Duration) (*sql.Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	secs := int64(math.Ceil(idle.Seconds()))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", max(secs, 1))); err != nil {
		conn.Close()
		return nil, fmt.Errorf("the freeze's session: %w", err)
	}
	return conn, nil
}

// restoreIdle gives conn its server's wait_timeout back and returns it to
// its pool; a connection that cannot take it back (its session ended) is
// dropped from the pool instead.
func restoreIdle(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = @@GLOBAL.wait_timeout"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // the pool discards it
	}
	conn.Close()
}

// handOver gives the target its fence, commits tx (the source's loss of
// it) and publishes the topology, timing its parts in parts.
func (mv *Mover) handOver(ctx context.Context, m *topology.Move, b *migrate.Bucket, tx *sql.Tx, version int64, began time.Time, parts *FreezeParts) error {
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
	// (Knobs.At at StepClaimed) to check verify counts it once.
	if err := mv.at(ctx, m, StepClaimed); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit the source's fence: %w", err)
	}
	since(&parts.Commit)
	if err := mv.at(ctx, m, m.Step); err != nil {
		return err
	}
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
	return mv.at(ctx, m, m.Step)
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
