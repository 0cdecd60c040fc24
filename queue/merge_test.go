package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// These tests exercise the committers: how the works that packets' workers
// hand over are merged into one Apply call, and how a failed merged call is
// retried. They use an Apply that records every call as a whole (the works
// it received together), unlike recorder, which sees one packet at a time.

// mergeRec is an Apply recording each call's works.
type mergeRec struct {
	hold    chan struct{}      // when non-nil, every call waits for a value or for it to close
	started chan []Work        // every call is announced here (buffered)
	fail    func([]Work) error // when non-nil and non-nil for a call, the call fails with it

	mu    sync.Mutex
	calls [][]Work
}

func newMergeRec() *mergeRec {
	return &mergeRec{hold: make(chan struct{}), started: make(chan []Work, 1000)}
}

func (r *mergeRec) apply(ctx context.Context, works []Work) ([][]hongbao.Outcome, error) {
	ws := make([]Work, len(works))
	for i, w := range works {
		ws[i] = Work{ID: w.ID, Users: slices.Clone(w.Users)}
	}
	r.mu.Lock()
	r.calls = append(r.calls, ws)
	r.mu.Unlock()
	r.started <- ws
	if r.hold != nil {
		<-r.hold
	}
	if r.fail != nil {
		if err := r.fail(ws); err != nil {
			return nil, err
		}
	}
	out := make([][]hongbao.Outcome, len(ws))
	for i, w := range ws {
		out[i] = make([]hongbao.Outcome, len(w.Users))
		for j, u := range w.Users {
			out[i][j] = hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: share(w.ID, u), Status: hongbao.Opened}}
		}
	}
	return out, nil
}

func (r *mergeRec) snapshot() [][]Work {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// formatted renders every call as "p<id>[users] p<id>[users]...".
func (r *mergeRec) formatted() []string {
	var s []string
	for _, c := range r.snapshot() {
		s = append(s, formatCall(c))
	}
	return s
}

func formatCall(c []Work) string {
	parts := make([]string, len(c))
	for i, w := range c {
		parts[i] = fmt.Sprintf("p%d%v", w.ID, w.Users)
	}
	return strings.Join(parts, " ")
}

func (r *mergeRec) waitStarted(t *testing.T) []Work {
	t.Helper()
	return receive(t, r.started, "apply started")
}

// goroutines counts the goroutines whose state starts with state (e.g.
// "chan send"; "" for any) and whose stack holds frame.
func goroutines(state, frame string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+state) && strings.Contains(g, frame) {
			count++
		}
	}
	return count
}

// waitingWorks is the number of works handed over and not yet taken by a
// committer. The queue tests do not run in parallel, so these are the
// current test's.
func waitingWorks(m *Manager) int {
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	return len(m.jobs.jobs)
}

// committers is the number of live committer goroutines.
func committers() int { return goroutines("", "queue.(*Manager).commit(") }

func waitWaiting(t *testing.T, m *Manager, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d works waiting for a committer", n), func() bool { return waitingWorks(m) == n })
}

// pres is the answer to one open, with its packet.
type pres struct {
	id   hongbao.PacketID
	user hongbao.UserID
	res  hongbao.OpenResult
	err  error
}

func submitTo(m *Manager, id hongbao.PacketID, u hongbao.UserID, out chan<- pres) {
	go func() {
		res, err := m.Submit(context.Background(), id, u)
		out <- pres{id, u, res, err}
	}()
}

// collectByPacket gathers n answers by packet (users may repeat across
// packets, never within one).
func collectByPacket(t *testing.T, out <-chan pres, n int) map[hongbao.PacketID]map[hongbao.UserID]pres {
	t.Helper()
	got := map[hongbao.PacketID]map[hongbao.UserID]pres{}
	for i := range n {
		select {
		case r := <-out:
			if got[r.id] == nil {
				got[r.id] = map[hongbao.UserID]pres{}
			}
			if _, dup := got[r.id][r.user]; dup {
				t.Fatalf("packet %d user %d answered twice", r.id, r.user)
			}
			got[r.id][r.user] = r
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d opens answered", i, n)
		}
	}
	return got
}

// queueSingles blocks the committers' single Apply on packet first, then
// has each packet of ids hand over a work of one open by user u, one after
// the other, so they wait for the committer in the order of ids.
func queueSingles(t *testing.T, m *Manager, rec *mergeRec, first hongbao.PacketID, ids []hongbao.PacketID, u hongbao.UserID, out chan<- pres) {
	t.Helper()
	submitTo(m, first, u, out)
	if c := rec.waitStarted(t); formatCall(c) != fmt.Sprintf("p%d[%d]", first, u) {
		t.Fatalf("first apply = %s", formatCall(c))
	}
	for i, id := range ids {
		submitTo(m, id, u, out)
		waitWaiting(t, m, i+1)
	}
}

// TestMergeWaitingWorks: while the only committer is busy, the works of
// five packets queue up for it; the next Apply gets all five, in arrival
// order, and each client gets its own packet's outcome.
func TestMergeWaitingWorks(t *testing.T) {
	rec := newMergeRec()
	m := newManager(t, Config{Size: 8, Batch: 32, Parallel: 1, Merge: 8}, rec.apply, nil)
	const u = 7 // the same user opens every packet: only the packet tells the outcomes apart
	out := make(chan pres, 6)
	ids := []hongbao.PacketID{2, 5, 3, 6, 4}
	queueSingles(t, m, rec, 1, ids, u, out)
	if n := len(rec.snapshot()); n != 1 {
		t.Fatalf("%d applies while the committer is busy, want 1", n)
	}
	close(rec.hold)
	got := collectByPacket(t, out, 6)
	for _, id := range append([]hongbao.PacketID{1}, ids...) {
		r := got[id][u]
		want := hongbao.OpenResult{User: u, Amount: share(id, u), Status: hongbao.Opened}
		if r.err != nil || r.res != want {
			t.Errorf("packet %d: %+v, %v; want %+v", id, r.res, r.err, want)
		}
	}
	want := []string{"p1[7]", "p2[7] p5[7] p3[7] p6[7] p4[7]"}
	if calls := rec.formatted(); !slices.Equal(calls, want) {
		t.Errorf("applies %q, want %q", calls, want)
	}
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

// TestMergeCaps: a merged Apply carries at most Merge packets' works, and
// the committer stops taking more once the opens reach Batch.
func TestMergeCaps(t *testing.T) {
	ids := []hongbao.PacketID{2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		merge, batch int
		want         []string
	}{
		{1, 32, []string{"p1[9]", "p2[9]", "p3[9]", "p4[9]", "p5[9]", "p6[9]", "p7[9]"}},
		{2, 32, []string{"p1[9]", "p2[9] p3[9]", "p4[9] p5[9]", "p6[9] p7[9]"}},
		{4, 32, []string{"p1[9]", "p2[9] p3[9] p4[9] p5[9]", "p6[9] p7[9]"}},
		{8, 3, []string{"p1[9]", "p2[9] p3[9] p4[9]", "p5[9] p6[9] p7[9]"}},
		{8, 1, []string{"p1[9]", "p2[9]", "p3[9]", "p4[9]", "p5[9]", "p6[9]", "p7[9]"}},
	} {
		t.Run(fmt.Sprintf("merge=%d,batch=%d", tc.merge, tc.batch), func(t *testing.T) {
			rec := newMergeRec()
			m := newManager(t, Config{Size: 8, Batch: tc.batch, Parallel: 1, Merge: tc.merge}, rec.apply, nil)
			out := make(chan pres, len(ids)+1)
			queueSingles(t, m, rec, 1, ids, 9, out)
			close(rec.hold)
			for id, rs := range collectByPacket(t, out, len(ids)+1) {
				if r := rs[9]; r.err != nil || r.res.Amount != share(id, 9) {
					t.Errorf("packet %d: %+v, %v", id, r.res, r.err)
				}
			}
			if calls := rec.formatted(); !slices.Equal(calls, tc.want) {
				t.Errorf("applies %q, want %q", calls, tc.want)
			}
		})
	}
}

// gateSlots grants every slot, but the first AcquireSlot of each gated
// packet waits for the test and answers what it is told. Refusing that
// first one (busy) makes the packet's worker take everything queued
// behind it as its next work: a way to build works of several opens.
type gateSlots struct {
	gated   map[hongbao.PacketID]bool
	entered chan hongbao.PacketID
	release chan bool

	mu   sync.Mutex
	seen map[hongbao.PacketID]bool
}

func newGateSlots(ids ...hongbao.PacketID) *gateSlots {
	s := &gateSlots{gated: map[hongbao.PacketID]bool{}, entered: make(chan hongbao.PacketID), release: make(chan bool), seen: map[hongbao.PacketID]bool{}}
	for _, id := range ids {
		s.gated[id] = true
	}
	return s
}

func (s *gateSlots) AcquireSlot(id hongbao.PacketID, limit int, hold time.Duration) (string, bool, error) {
	s.mu.Lock()
	first := s.gated[id] && !s.seen[id]
	s.seen[id] = true
	s.mu.Unlock()
	if first {
		s.entered <- id
		if !<-s.release {
			return "", false, nil
		}
	}
	return fmt.Sprintf("tok-%d", id), true, nil
}

func (s *gateSlots) ReleaseSlot(hongbao.PacketID, string, time.Duration) {}

// queueMulti has packet id hand over one work of users (all of them, at
// most Batch) while the committers are busy: a first open by sacrifice is
// held in AcquireSlot, users queue behind it, the sacrifice is refused
// (busy), and the worker takes users as one batch. queued is the number of
// opens queued or in flight before, waiting the number of works that then
// wait for a committer.
func queueMulti(t *testing.T, m *Manager, slots *gateSlots, id hongbao.PacketID, sacrifice hongbao.UserID, users []hongbao.UserID, queued int64, waiting int, out chan<- result) {
	t.Helper()
	busy := make(chan result, 1)
	submitAsync(context.Background(), m, id, sacrifice, busy)
	select {
	case got := <-slots.entered:
		if got != id {
			t.Fatalf("AcquireSlot of packet %d, want %d", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("packet %d never asked for a slot", id)
	}
	// Stats counts an open in just after its worker may have taken it:
	// wait for the sacrifice to be counted before queueing in order.
	waitFor(t, "the first open to be counted", func() bool { return m.Stats().Queued == queued+1 })
	submitInOrder(t, m, id, users, queued+1, out)
	slots.release <- false
	if r := collect(t, busy, 1)[sacrifice]; !errors.Is(r.err, hongbao.ErrBusy) {
		t.Fatalf("open refused a slot = %+v, %v; want ErrBusy", r.res, r.err)
	}
	waitWaiting(t, m, waiting)
}

// TestMergeBatchCap: works of three opens each, Batch 4: the committer
// takes a second work because 3 < 4 and then stops, as 6 >= 4. A merged
// call may therefore carry more than Batch opens (up to Batch-1 + Batch),
// but never takes another work once Batch is reached.
func TestMergeBatchCap(t *testing.T) {
	rec := newMergeRec()
	slots := newGateSlots(2, 3, 4, 5)
	m := newManager(t, Config{Size: 16, Batch: 4, Parallel: 1, Merge: 8}, rec.apply, slots)
	out := make(chan result, 16)
	submitAsync(context.Background(), m, 1, 11, out)
	rec.waitStarted(t)
	for i, id := range []hongbao.PacketID{2, 3, 4, 5} {
		base := int(id) * 10
		queueMulti(t, m, slots, id, hongbao.UserID(base), userRange(base+1, base+3), int64(1+3*i), i+1, out)
	}
	close(rec.hold)
	got := collect(t, out, 13)
	for u, r := range got {
		id := hongbao.PacketID(u / 10)
		if r.err != nil || r.res.User != u || r.res.Amount != share(id, u) {
			t.Errorf("user %d of packet %d: %+v, %v", u, id, r.res, r.err)
		}
	}
	want := []string{"p1[11]", "p2[21 22 23] p3[31 32 33]", "p4[41 42 43] p5[51 52 53]"}
	if calls := rec.formatted(); !slices.Equal(calls, want) {
		t.Errorf("applies %q, want %q", calls, want)
	}
	for _, c := range rec.snapshot() {
		opens := 0
		for _, w := range c[:len(c)-1] {
			opens += len(w.Users)
		}
		if len(c) > 8 || opens >= 4 {
			t.Errorf("apply %s took a work after reaching Merge 8 or Batch 4", formatCall(c))
		}
	}
}

// TestMergedFailureRetriedPerPacket: a merged Apply fails; each packet's
// work is then applied alone, so the packets that can commit do, and only
// the failing packet's clients see its error. A failing packet whose work
// holds several opens gets its worker's own fallback: each open alone.
func TestMergedFailureRetriedPerPacket(t *testing.T) {
	rec := newMergeRec()
	errMerged := errors.New("deadlock in merged transaction")
	errFour := errors.New("packet 4 is broken")
	errSix := errors.New("packet 6 batch fails")
	errUser := errors.New("user 62 is broken")
	rec.fail = func(c []Work) error {
		switch {
		case len(c) > 1:
			return errMerged
		case c[0].ID == 4:
			return errFour
		case c[0].ID == 6 && len(c[0].Users) > 1:
			return errSix
		case c[0].ID == 6 && c[0].Users[0] == 62:
			return errUser
		}
		return nil
	}
	slots := newGateSlots(6)
	m := newManager(t, Config{Size: 16, Batch: 32, Parallel: 1, Merge: 8}, rec.apply, slots)
	out := make(chan result, 16)
	submitAsync(context.Background(), m, 1, 11, out)
	rec.waitStarted(t)
	queueMulti(t, m, slots, 6, 60, []hongbao.UserID{61, 62}, 1, 1, out)
	for i, id := range []hongbao.PacketID{2, 3, 4, 5} {
		submitAsync(context.Background(), m, id, hongbao.UserID(id*10+1), out)
		waitWaiting(t, m, i+2)
	}
	close(rec.hold)
	got := collect(t, out, 7)
	for u, r := range got {
		id := hongbao.PacketID(u / 10)
		switch u {
		case 41:
			if !errors.Is(r.err, errFour) {
				t.Errorf("user 41 of the failing packet 4: %+v, %v; want %v", r.res, r.err, errFour)
			}
		case 62:
			if !errors.Is(r.err, errUser) {
				t.Errorf("user 62 of packet 6: %+v, %v; want its own open's error %v", r.res, r.err, errUser)
			}
		default:
			if r.err != nil || r.res.User != u || r.res.Amount != share(id, u) {
				t.Errorf("user %d of packet %d: %+v, %v; want its share", u, id, r.res, r.err)
			}
		}
	}
	want := []string{
		"p1[11]",
		"p6[61 62] p2[21] p3[31] p4[41] p5[51]",             // merged: fails
		"p6[61 62]", "p2[21]", "p3[31]", "p4[41]", "p5[51]", // packet by packet
		"p6[61]", "p6[62]", // packet 6's worker, one open at a time
	}
	if calls := rec.formatted(); !slices.Equal(calls, want) {
		t.Errorf("applies\n\t%q\nwant\n\t%q", calls, want)
	}
}

// TestMergeCloseDrains: opens queued behind busy committers when Close is
// called are all applied and answered, and the committers stop.
func TestMergeCloseDrains(t *testing.T) {
	before := committers()
	rec := newMergeRec()
	m := New(Config{Size: 100, Batch: 8, Parallel: 2, Merge: 4}, rec.apply, nil, zap.NewNop())
	waitFor(t, "2 committers", func() bool { return committers() == before+2 })
	const packets, per = 6, 5
	out := make(chan result, packets*per)
	for p := 1; p <= packets; p++ {
		for _, u := range userRange(p*100+1, p*100+per) {
			submitAsync(context.Background(), m, hongbao.PacketID(p), u, out)
		}
	}
	waitFor(t, "every open to be queued", func() bool { return m.Stats().Queued == packets*per })
	rec.waitStarted(t)
	rec.waitStarted(t) // both committers are held

	drainOnClose(t, m, func() { close(rec.hold) })
	got := collect(t, out, packets*per)
	for u, r := range got {
		id := hongbao.PacketID(u / 100)
		if r.err != nil || r.res.User != u || r.res.Amount != share(id, u) {
			t.Errorf("user %d of packet %d lost in Close: %+v, %v", u, id, r.res, r.err)
		}
	}
	seen := map[hongbao.PacketID][]hongbao.UserID{}
	merged := 0
	for _, c := range rec.snapshot() {
		if len(c) > 1 {
			merged++
		}
		if len(c) > 4 {
			t.Errorf("apply %s carries more than Merge 4 packets", formatCall(c))
		}
		ids := map[hongbao.PacketID]bool{}
		for _, w := range c {
			if ids[w.ID] {
				t.Errorf("apply %s carries packet %d twice", formatCall(c), w.ID)
			}
			ids[w.ID] = true
			seen[w.ID] = append(seen[w.ID], w.Users...)
		}
	}
	for p := 1; p <= packets; p++ {
		us := seen[hongbao.PacketID(p)]
		slices.Sort(us)
		if !slices.Equal(us, userRange(p*100+1, p*100+per)) {
			t.Errorf("packet %d applied %v, want each of its users once", p, us)
		}
	}
	t.Logf("%d applies, %d merged", len(rec.snapshot()), merged)
	// A committer is done once it has counted itself out; give its
	// goroutine a moment to end.
	waitFor(t, "the committers to end", func() bool { return committers() == before })
	if s := m.Stats(); s != (Stats{}) {
		t.Errorf("Stats() after Close = %+v, want zero", s)
	}
	if _, err := m.Submit(context.Background(), 1, 1000); !errors.Is(err, hongbao.ErrUnavailable) {
		t.Errorf("Submit after Close = %v, want ErrUnavailable", err)
	}
}
