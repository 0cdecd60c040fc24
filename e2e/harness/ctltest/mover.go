package ctltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// The fault tests run the mover in their own process, as hbctl runs it,
// with knobs at its steps: a kill makes the mover stop dead where it is
// (ErrKilled), and the test then closes the pools it gave the mover, as a
// dead process's sockets close; a pause blocks the mover until the test
// releases it.

// ErrKilled is a mover killed by a knob, as by kill -9.
var ErrKilled = errors.New("killed by the test's knob")

// KillAt is knobs that kill the mover when a move reaches step.
func KillAt(step string) move.Knobs {
	return move.Knobs{At: func(_ context.Context, s string) error {
		if s == step {
			return ErrKilled
		}
		return nil
	}}
}

// Paused is a pause of the mover at one step: reached is closed when a
// move gets there, and the move (and any later one there) goes on once
// Release is called.
type Paused struct {
	reached, released chan struct{}
	once, free        sync.Once
}

// PauseAt is knobs that pause the mover when a move reaches step.
func PauseAt(step string) (move.Knobs, *Paused) {
	p := &Paused{reached: make(chan struct{}), released: make(chan struct{})}
	return move.Knobs{At: func(ctx context.Context, s string) error {
		if s != step {
			return nil
		}
		p.once.Do(func() { close(p.reached) })
		select {
		case <-p.released:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}, p
}

func (p *Paused) Release() { p.free.Do(func() { close(p.released) }) }

// Wait waits until the mover reached the pause, or done delivered the
// mover's end first (then it fails the test).
func (p *Paused) Wait(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case <-p.reached:
	case err := <-done:
		t.Fatalf("%s ended before its pause: %v", what, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never reached its pause", what)
	}
}

// Operator opens what hbctl opens for a rebalance of c: the meta database,
// its journal and the SETs' pools; the caller closes them.
func Operator(c *clustertest.Cluster) (*move.Operator, error) {
	cfg, err := configs.Load(c.Config, clustertest.Environ())
	if err != nil {
		return nil, err
	}
	return move.OpenOperator(context.Background(), cfg.MetaDSN, cfg.CoreMembers(), cfg.Location(), time.Now)
}

// MoveIn is `hbctl topology move --bucket bucket --to to` with knobs, run
// in the test's process; its pools are closed when it returns.
func MoveIn(c *clustertest.Cluster, bucket hongbao.Bucket, to string, knobs move.Knobs) error {
	op, err := Operator(c)
	if err != nil {
		return err
	}
	defer op.Close() // a killed mover's sockets close
	ctx := context.Background()
	top, err := topology.Load(ctx, op.Meta)
	if err != nil {
		return err
	}
	mv := op.Mover(1, 2500*time.Millisecond) // hbctl topology move's grace: two topology polls
	mv.Knobs = knobs
	return op.MoveBucket(ctx, mv, bucket, top.Owner(bucket).Name, to)
}

// ApplyIn is `hbctl rebalance apply` continuing the unfinished rebalance,
// with knobs, run in the test's process; its pools are closed when it
// returns. Like MoveIn it fails no test itself: it runs in a goroutine.
func ApplyIn(c *clustertest.Cluster, knobs move.Knobs) error {
	op, err := Operator(c)
	if err != nil {
		return err
	}
	defer op.Close() // a killed mover's sockets close
	ctx := context.Background()
	release, err := op.Journal.Lock(ctx)
	if err != nil {
		return err
	}
	defer release()
	r, err := op.Journal.Unfinished(ctx)
	if err != nil || r == nil {
		return errors.Join(err, errors.New("no unfinished rebalance to apply"))
	}
	mv := op.Mover(1, 3*time.Second) // hbctl rebalance apply's default grace
	mv.Knobs = knobs
	return mv.Apply(ctx, r)
}
