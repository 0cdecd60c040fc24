package queue

import (
	"context"
	"errors"
	"slices"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestBatchSizes(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 100, Batch: 4}, each(rec.apply), nil)
	out := make(chan result, 20)
	submitAsync(context.Background(), m, 3, 1, out)
	rec.waitStarted(t)
	submitInOrder(t, m, 3, userRange(2, 20), 1, out)
	close(rec.gate)
	collect(t, out, 20)
	// The blocked open alone, then the 19 queued behind it four at a time.
	if got, want := rec.sizes(), []int{1, 4, 4, 4, 4, 3}; !slices.Equal(got, want) {
		t.Errorf("batch sizes %v, want %v", got, want)
	}
	if got := rec.applied(3); !slices.Equal(got, userRange(1, 20)) {
		t.Errorf("applied %v, want 1..20 in order", got)
	}
}

func TestBatchErrorRetriesOneByOne(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	errBatch := errors.New("deadlock on batch")
	errFive := errors.New("user 5 is broken")
	rec.fail = func(id hongbao.PacketID, users []hongbao.UserID) error {
		if len(users) > 1 {
			return errBatch
		}
		if users[0] == 5 {
			return errFive
		}
		return nil
	}
	m := newManager(t, Config{Size: 16, Batch: 8}, each(rec.apply), nil)
	out := make(chan result, 6)
	submitAsync(context.Background(), m, 2, 1, out)
	rec.waitStarted(t)
	submitInOrder(t, m, 2, userRange(2, 6), 1, out)
	close(rec.gate)
	got := collect(t, out, 6)
	for u, r := range got {
		switch {
		case u == 5:
			if !errors.Is(r.err, errFive) {
				t.Errorf("user 5: %v, want its own error", r.err)
			}
		case r.err != nil || r.res.User != u || r.res.Amount != share(2, u):
			t.Errorf("user %d: %+v, %v; want its share after the retry", u, r.res, r.err)
		}
	}
	want := [][]hongbao.UserID{{1}, {2, 3, 4, 5, 6}, {2}, {3}, {4}, {5}, {6}}
	calls := rec.snapshot()
	if len(calls) != len(want) {
		t.Fatalf("calls %+v, want %v", calls, want)
	}
	for i, c := range calls {
		if !slices.Equal(c.users, want[i]) {
			t.Errorf("call %d = %v, want %v", i, c.users, want[i])
		}
	}
}

func TestSingleErrorNotRetried(t *testing.T) {
	rec := newRecorder()
	errDB := errors.New("connection reset")
	rec.fail = func(hongbao.PacketID, []hongbao.UserID) error { return errDB }
	m := newManager(t, Config{Size: 4, Batch: 4}, each(rec.apply), nil)
	if _, err := m.Submit(context.Background(), 1, 1); !errors.Is(err, errDB) {
		t.Errorf("Submit = %v, want the apply error", err)
	}
	if n := len(rec.snapshot()); n != 1 {
		t.Errorf("%d applies, want 1: a single open is not retried", n)
	}
}
