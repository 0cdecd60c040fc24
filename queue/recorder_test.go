package queue

// The queue's mechanics are tested with a recording Apply function. It is
// not a stand-in for MySQL: it answers every open with a made-up share and
// records how and when it was called.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// call is one apply the recorder saw: a packet and its batch of users.
type call struct {
	id    hongbao.PacketID
	users []hongbao.UserID
}

// recorder is the recording Apply (through each), one packet per call.
type recorder struct {
	gate    chan struct{} // when non-nil, every apply waits until it is closed
	started chan call     // every apply is announced here (buffered)
	delay   time.Duration
	fail    func(id hongbao.PacketID, users []hongbao.UserID) error
	outcome func(id hongbao.PacketID, u hongbao.UserID) hongbao.Outcome

	mu       sync.Mutex
	calls    []call
	inflight map[hongbao.PacketID]*atomic.Int32
	overlaps atomic.Int32
	ctxs     []context.Context
}

func newRecorder() *recorder {
	return &recorder{started: make(chan call, 10000), inflight: map[hongbao.PacketID]*atomic.Int32{}}
}

// share is the amount the recorder gives user u of packet id.
func share(id hongbao.PacketID, u hongbao.UserID) int64 { return int64(id)*1000 + int64(u) }

func (r *recorder) apply(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error) {
	users = slices.Clone(users)
	r.mu.Lock()
	c, ok := r.inflight[id]
	if !ok {
		c = new(atomic.Int32)
		r.inflight[id] = c
	}
	r.calls = append(r.calls, call{id, users})
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
	if c.Add(1) > 1 {
		r.overlaps.Add(1)
	}
	defer c.Add(-1)
	r.started <- call{id, users}
	if r.gate != nil {
		<-r.gate
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	if r.fail != nil {
		if err := r.fail(id, users); err != nil {
			return nil, err
		}
	}
	out := make([]hongbao.Outcome, len(users))
	for i, u := range users {
		if r.outcome != nil {
			out[i] = r.outcome(id, u)
			continue
		}
		out[i] = hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: share(id, u), Status: hongbao.Opened}}
	}
	return out, nil
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// applied lists the users applied to id, in order, over all calls.
func (r *recorder) applied(id hongbao.PacketID) []hongbao.UserID {
	var us []hongbao.UserID
	for _, c := range r.snapshot() {
		if c.id == id {
			us = append(us, c.users...)
		}
	}
	return us
}

// sizes lists the batch size of every call, in order.
func (r *recorder) sizes() []int {
	var s []int
	for _, c := range r.snapshot() {
		s = append(s, len(c.users))
	}
	return s
}

// waitStarted waits for the next apply to begin.
func (r *recorder) waitStarted(t *testing.T) call {
	t.Helper()
	return receive(t, r.started, "apply started")
}

// each turns a one-packet apply into an Apply, one work after the other.
func each(f func(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error)) Apply {
	return func(ctx context.Context, works []Work) ([][]hongbao.Outcome, error) {
		out := make([][]hongbao.Outcome, len(works))
		for i, w := range works {
			o, err := f(ctx, w.ID, w.Users)
			if err != nil {
				return nil, err
			}
			out[i] = o
		}
		return out, nil
	}
}
