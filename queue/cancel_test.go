package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestCancelledBeforeSubmit(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 4}, each(rec.apply), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Submit(ctx, 4, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a cancelled ctx = %v, want context.Canceled", err)
	}
	// FIFO: once user 2 is answered, the worker has passed user 1.
	if _, err := m.Submit(context.Background(), 4, 2); err != nil {
		t.Fatal(err)
	}
	if got := rec.applied(4); !slices.Equal(got, []hongbao.UserID{2}) {
		t.Errorf("applied %v, want [2]: a cancelled open must not reach the DB", got)
	}
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

func TestCancelledWhileQueued(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 4}, each(rec.apply), nil)
	out := make(chan result, 3)
	submitAsync(context.Background(), m, 4, 1, out)
	rec.waitStarted(t)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := m.Submit(ctx, 4, 2); gone <- err }()
	waitFor(t, "user 2 to be queued", func() bool { return m.Stats().Queued == 2 })
	submitInOrder(t, m, 4, []hongbao.UserID{3}, 2, out)
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Submit whose client left = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Submit did not return when its ctx was cancelled")
	}
	close(rec.gate)
	collect(t, out, 2)
	if got := rec.snapshot(); len(got) != 2 || !slices.Equal(got[1].users, []hongbao.UserID{3}) {
		t.Errorf("calls %+v, want [1] then [3] without the cancelled user 2", got)
	}
}

// TestApplyCtxOutlivesClient: a batch is shared by clients, so one client
// leaving must not cancel the transaction; TxTimeout bounds it instead.
func TestApplyCtxOutlivesClient(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 4, TxTimeout: 3 * time.Second}, each(rec.apply), nil)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	submitAsync(ctx, m, 8, 1, out)
	rec.waitStarted(t)
	cancel()
	if r := collect(t, out, 1)[1]; !errors.Is(r.err, context.Canceled) {
		t.Errorf("Submit = %v, want context.Canceled", r.err)
	}
	rec.mu.Lock()
	applyCtx := rec.ctxs[0]
	rec.mu.Unlock()
	if err := applyCtx.Err(); err != nil {
		t.Errorf("apply ctx = %v after the client left, want still live", err)
	}
	dl, ok := applyCtx.Deadline()
	if !ok || time.Until(dl) > 3*time.Second || time.Until(dl) < time.Second {
		t.Errorf("apply ctx deadline in %s (set: %v), want about TxTimeout=3s", time.Until(dl), ok)
	}
	close(rec.gate)
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}
