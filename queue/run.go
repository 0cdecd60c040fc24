package queue

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// run applies one batch: drop opens whose client already left (they have
// not executed, so dropping them is safe), take a slot under the SET-wide
// cap, apply, and answer every request.
func (m *Manager) run(id hongbao.PacketID, batch []*request) {
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
	release, err := m.slot(id)
	if err != nil {
		m.answer(live, err)
		return
	}
	defer release()
	out, err := m.applyOnce(id, users(live))
	if err != nil && len(live) > 1 {
		// Nothing is known to have committed; apply each open alone so
		// one bad open cannot fail the others. Opens are idempotent, so
		// a batch that did commit after all answers already_opened.
		m.log.Warn("batch open failed, retrying one by one", zap.Stringer("packet_id", id),
			zap.Int("batch", len(live)), zap.Error(err))
		for _, r := range live {
			if err := r.ctx.Err(); err != nil {
				m.reply(r, hongbao.Outcome{Err: err})
				continue
			}
			one, err := m.applyOnce(id, []hongbao.UserID{r.user})
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

// applyOnce runs one transaction. It is shared by several clients, so no
// single client's cancellation may abort it; TxTimeout bounds it instead.
func (m *Manager) applyOnce(id hongbao.PacketID, us []hongbao.UserID) ([]hongbao.Outcome, error) {
	if m.turns != nil {
		m.turns <- struct{}{} // blocked senders are served first come, first served
		defer func() { <-m.turns }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.TxTimeout)
	defer cancel()
	out, err := m.apply(ctx, id, us)
	if err == nil && len(out) != len(us) {
		return nil, fmt.Errorf("queue: apply answered %d of %d opens of %s", len(out), len(us), id)
	}
	return out, err
}

// slot takes a slot of the SET-wide cap and returns its release.
func (m *Manager) slot(id hongbao.PacketID) (release func(), err error) {
	if m.slots == nil {
		return func() {}, nil
	}
	token, ok, err := m.slots.AcquireSlot(id, m.cfg.SlotCap, m.cfg.TxTimeout)
	switch {
	case err != nil:
		// The cap cannot be consulted: this worker's own serialisation
		// (one transaction per packet per server) is the local cap.
		return func() {}, nil
	case !ok:
		return nil, hongbao.ErrBusy
	}
	return func() { m.slots.ReleaseSlot(id, token, m.cfg.TxTimeout) }, nil
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
