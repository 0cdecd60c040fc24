package hongbao

import "time"

// State is the part of a packet that decides how an open ends without a
// transaction: what a cache may keep of it. Remaining counts only go down
// and a packet only ever closes, so a stale State can only call a packet
// live that is over (the transaction then says so), never the reverse.
type State struct {
	RemainingCount int
	ExpiresAt      time.Time
	Closed         bool
	Audience       Audience // never changes: a cached copy is exact
}

// State returns the packet's State.
func (p *Packet) State() State {
	return State{RemainingCount: p.RemainingCount, ExpiresAt: p.ExpiresAt, Closed: p.Closed, Audience: p.Audience}
}

// Status is the packet's status at now as far as the State tells.
func (s State) Status(now time.Time) Status {
	p := Packet{RemainingCount: s.RemainingCount, ExpiresAt: s.ExpiresAt, Closed: s.Closed}
	return p.StatusAt(now)
}
