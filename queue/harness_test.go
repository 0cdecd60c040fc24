package queue

// What the queue's tests share besides the recorder: a Manager closed at
// the end of the test, submitting opens in a known order, collecting their
// answers, and waiting with a deadline.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// newManager returns a Manager that is closed, and must close cleanly, when
// the test ends.
func newManager(t *testing.T, cfg Config, apply Apply, slots Slots) *Manager {
	t.Helper()
	m := New(cfg, apply, slots, zap.NewNop())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// result is the answer one Submit got.
type result struct {
	user hongbao.UserID
	res  hongbao.OpenResult
	err  error
}

// submitAsync submits an open in a goroutine and reports on the channel.
func submitAsync(ctx context.Context, m *Manager, id hongbao.PacketID, u hongbao.UserID, out chan<- result) {
	go func() {
		res, err := m.Submit(ctx, id, u)
		out <- result{u, res, err}
	}()
}

// submitInOrder submits users one after the other, each only once the
// previous one is queued, so arrival order is the order of users. base is
// the queue depth before the first.
func submitInOrder(t *testing.T, m *Manager, id hongbao.PacketID, users []hongbao.UserID, base int64, out chan<- result) {
	t.Helper()
	for i, u := range users {
		submitAsync(context.Background(), m, id, u, out)
		want := base + int64(i) + 1
		waitFor(t, fmt.Sprintf("user %d to be queued", u), func() bool { return m.Stats().Queued >= want })
	}
}

// collect waits for n answers, one per user, and returns them by user.
func collect(t *testing.T, out <-chan result, n int) map[hongbao.UserID]result {
	t.Helper()
	got := make(map[hongbao.UserID]result, n)
	for range n {
		select {
		case r := <-out:
			if _, dup := got[r.user]; dup {
				t.Fatalf("user %d answered twice", r.user)
			}
			got[r.user] = r
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d opens answered", len(got), n)
		}
	}
	return got
}

// userRange returns the users from..to, in order.
func userRange(from, to int) []hongbao.UserID {
	var us []hongbao.UserID
	for u := from; u <= to; u++ {
		us = append(us, hongbao.UserID(u))
	}
	return us
}

// drainOnClose starts Close and checks that it refuses new opens (of a
// queued packet and of a new one) and waits for the queued ones while they
// are held; then it calls release and checks that Close returns nil.
func drainOnClose(t *testing.T, m *Manager, release func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	waitFor(t, "Close to stop taking opens", m.closed.Load)
	for _, id := range []hongbao.PacketID{1, 77} {
		if _, err := m.Submit(context.Background(), id, 999); !errors.Is(err, hongbao.ErrUnavailable) {
			t.Errorf("Submit to packet %d during Close = %v, want ErrUnavailable", id, err)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v before the queued opens were applied", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// receive waits up to 5 s for the next value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
		var zero T
		return zero
	}
}
