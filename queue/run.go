package queue

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// run applies one batch of a packet's worker: drop opens whose client
// already left (they have not executed, so dropping them is safe), hold a
// slot under the SET-wide cap, have a committer apply the rest, and answer
// every request.
func (m *Manager) run(id hongbao.PacketID, batch []*request, l *lease) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			m.reply(r, hongbao.Outcome{Err: err})
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if err := m.hold(id, l); err != nil {
		m.answer(live, err)
		return
	}
	m.cfg.Metrics.Batch(len(live))
	out, err := m.submitWork(Work{ID: id, Users: users(live)})
	if isMoving(err) {
		if live, out, err = m.waitMove(id, live, l); len(live) == 0 {
			return
		}
	}
	if err != nil && len(live) > 1 && !isMoving(err) {
		// Nothing is known to have committed; apply each open alone so
		// one bad open cannot fail the others. Opens are idempotent, so
		// a batch that did commit after all answers already_opened.
		m.cfg.Metrics.Split()
		m.log.Warn("batch open failed, retrying one by one", zap.Stringer("packet_id", id),
			zap.Int("batch", len(live)), zap.Error(err))
		for _, r := range live {
			if err := r.ctx.Err(); err != nil {
				m.reply(r, hongbao.Outcome{Err: err})
				continue
			}
			if err := m.hold(id, l); err != nil {
				m.reply(r, hongbao.Outcome{Err: err})
				continue
			}
			one, err := m.submitWork(Work{ID: id, Users: []hongbao.UserID{r.user}})
			m.reply(r, first(one, err))
		}
		return
	}
	if err != nil {
		m.answer(live, err)
		return
	}
	for i, r := range live {
		m.reply(r, out[i])
	}
}

// waitMove submits live again while the packet's bucket is moving (the
// batch was not applied: the store fails it before any write), after a
// backoff each time, for up to TxTimeout or until the manager closes.
// Requests whose client left meanwhile are answered and dropped; what is
// left is returned with the last outcome.
func (m *Manager) waitMove(id hongbao.PacketID, live []*request, l *lease) ([]*request, []hongbao.Outcome, error) {
	began := time.Now()
	var out []hongbao.Outcome
	err := error(hongbao.ErrMoving)
	for round := 0; isMoving(err); round++ {
		wait := movingBackoff[min(round, len(movingBackoff)-1)]
		if m.closed.Load() || time.Since(began)+wait > m.cfg.TxTimeout {
			return live, nil, fmt.Errorf("packet %s: %w", id, hongbao.ErrMoving)
		}
		time.Sleep(wait)
		still := live[:0:0]
		for _, r := range live {
			if err := r.ctx.Err(); err != nil {
				m.reply(r, hongbao.Outcome{Err: err})
				continue
			}
			still = append(still, r)
		}
		if live = still; len(live) == 0 {
			return nil, nil, nil
		}
		if err = m.hold(id, l); err != nil {
			return live, nil, err
		}
		out, err = m.submitWork(Work{ID: id, Users: users(live)})
	}
	return live, out, err
}

// job is a work waiting for, then done by, a committer.
type job struct {
	work Work
	out  []hongbao.Outcome
	err  error
	done chan struct{}
}

// submitWork hands w to the committers and waits for its outcomes.
func (m *Manager) submitWork(w Work) ([]hongbao.Outcome, error) {
	j := &job{work: w, done: make(chan struct{})}
	m.jobs.put(j)
	<-j.done
	return j.out, j.err
}

// commit is a committer: it applies what waiting.take hands it in one
// transaction, until the manager closes.
func (m *Manager) commit() {
	defer m.cwg.Done()
	for {
		js, ok := m.jobs.take(m.cfg.Merge, m.cfg.Batch)
		if !ok {
			return
		}
		m.commitJobs(js)
	}
}

// commitJobs applies js in one transaction and answers them. Jobs of a
// bucket found moving a moment ago are answered ErrMoving without a
// transaction. If a merged transaction fails, each bucket gets a
// transaction of its own, then (if that fails too) each packet, so one
// packet's failure, or one frozen bucket, cannot fail the others.
func (m *Manager) commitJobs(js []*job) {
	now := time.Now()
	live := js[:0:0]
	for _, j := range js {
		if m.moving.has(j.work.ID.Bucket(), now) {
			m.done(j, nil, fmt.Errorf("bucket %d: %w", j.work.ID.Bucket(), hongbao.ErrMoving))
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	out, err := m.applyTx(works(live))
	if err == nil || len(live) == 1 {
		m.noteMoving(live, err)
		for i, j := range live {
			m.done(j, pick(out, i, err), err)
		}
		return
	}
	m.cfg.Metrics.Split()
	m.log.Warn("merged open failed, retrying bucket by bucket, then packet by packet", zap.Stringer("packet_id", live[0].work.ID),
		zap.Int("packets", len(live)), zap.Error(err))
	groups := byBucket(live)
	for _, g := range groups {
		var out [][]hongbao.Outcome
		if len(groups) > 1 {
			out, err = m.applyTx(works(g))
		} // else the merged transaction was this bucket's: err is its
		if err != nil && len(g) > 1 && !isMoving(err) {
			for _, j := range g {
				one, err := m.applyTx([]Work{j.work})
				m.done(j, pick(one, 0, err), err)
			}
			continue
		}
		m.noteMoving(g, err)
		for i, j := range g {
			m.done(j, pick(out, i, err), err)
		}
	}
}

// noteMoving remembers the bucket of js (one bucket) when err says it is
// moving.
func (m *Manager) noteMoving(js []*job, err error) {
	if isMoving(err) {
		m.moving.mark(js[0].work.ID.Bucket(), time.Now())
	}
}

// done answers j.
func (m *Manager) done(j *job, out []hongbao.Outcome, err error) {
	j.out, j.err = out, err
	close(j.done)
}

func works(js []*job) []Work {
	ws := make([]Work, len(js))
	for i, j := range js {
		ws[i] = j.work
	}
	return ws
}

// pick returns the i-th outcome list of a transaction, none if it failed.
func pick(out [][]hongbao.Outcome, i int, err error) []hongbao.Outcome {
	if err != nil {
		return nil
	}
	return out[i]
}

// applyTx runs one transaction. It is shared by several clients, so no
// single client's cancellation may abort it; TxTimeout bounds it instead.
func (m *Manager) applyTx(works []Work) ([][]hongbao.Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.TxTimeout)
	defer cancel()
	start := time.Now()
	out, err := m.apply(ctx, works)
	m.cfg.Metrics.Tx(len(works), time.Since(start))
	if err != nil {
		return nil, err
	}
	if len(out) != len(works) {
		return nil, fmt.Errorf("queue: apply answered %d of %d packets", len(out), len(works))
	}
	for i, w := range works {
		if len(out[i]) != len(w.Users) {
			return nil, fmt.Errorf("queue: apply answered %d of %d opens of %s", len(out[i]), len(w.Users), w.ID)
		}
	}
	return out, nil
}

// lease is a worker's slot under the SET-wide cap. The worker keeps it
// from batch to batch and gives it back when it retires, so a packet that
// sees one open at a time (a WeChat group's) pays the slot's memcached round
// trips once instead of per transaction. A lease lasts two TxTimeouts and
// is taken again when less than one is left as the worker hands a batch to
// the committers; a worker that dies frees it when it lapses. A batch that
// waits long for a committer, or is retried packet by packet, may still
// commit after its lease lapsed: under a slow database the cap is best
// effort, and the packet's row lock keeps the data right.
type lease struct {
	token string
	until time.Time
}

// hold makes sure the worker of id holds a slot with at least one
// TxTimeout left. It answers ErrBusy when the cap is reached.
func (m *Manager) hold(id hongbao.PacketID, l *lease) error {
	if m.slots == nil || (l.token != "" && time.Until(l.until) > m.cfg.TxTimeout) {
		return nil
	}
	m.letGo(id, l)
	hold := 2 * m.cfg.TxTimeout
	until := time.Now().Add(hold)
	token, ok, err := m.slots.AcquireSlot(id, m.cfg.SlotCap, hold)
	switch {
	case err != nil:
		// The cap cannot be consulted: this worker's own serialisation
		// (one transaction per packet per server) is the local cap.
		m.cfg.Metrics.SlotFallback()
		return nil
	case !ok:
		m.cfg.Metrics.SlotRefused()
		return hongbao.ErrBusy
	}
	l.token, l.until = token, until
	return nil
}

// letGo gives the lease back, if any.
func (m *Manager) letGo(id hongbao.PacketID, l *lease) {
	if l.token != "" {
		m.slots.ReleaseSlot(id, l.token, 2*m.cfg.TxTimeout)
		l.token = ""
	}
}

func users(reqs []*request) []hongbao.UserID {
	us := make([]hongbao.UserID, len(reqs))
	for i, r := range reqs {
		us[i] = r.user
	}
	return us
}

func first(out []hongbao.Outcome, err error) hongbao.Outcome {
	if err != nil {
		return hongbao.Outcome{Err: err}
	}
	return out[0]
}

func (m *Manager) answer(reqs []*request, err error) {
	for _, r := range reqs {
		m.reply(r, hongbao.Outcome{Err: err})
	}
}

// reply answers one request. It is counted out of the queue first, so a
// client that has its answer never sees itself in Stats.
func (m *Manager) reply(r *request, o hongbao.Outcome) {
	m.depth.Add(-1)
	r.done <- o
}
