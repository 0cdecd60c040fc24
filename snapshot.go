package hongbao

import "time"

// Snapshot is a packet as a transaction left it, with every share it had
// then. An open transaction given it is applied without the row lock and the
// share read: its update is conditional on the packet still being as known
// and a share already taken fails on the details' key, so knowledge gone
// stale (another server opened the packet, a settler closed it, an
// archiver moved it) fails the transaction instead of corrupting it; the
// works are then applied again, reading everything.
type Snapshot struct {
	Packet  Packet
	Openers map[UserID]int64
	// Unlisted says Openers is not kept (nil): the packet has too many
	// shares to hold them. A transaction then draws a share for every
	// user of its work, and a user who had one fails it on the details'
	// key; the works are applied again, reading. Nothing is answered from
	// an unlisted snapshot's openers.
	Unlisted bool
}

// Usable reports whether k may stand in for reading its packet at now:
// only while the packet takes opens (an answer that writes nothing, as
// sold_out or expired, would check nothing, and a share opened elsewhere
// would read as one of them), only for a funded packet, and only with as
// many openers as the packet has shares, or none kept (Unlisted): the
// openers a transaction returns from a list that misses one would be
// believed (a repeated open answered from them, a sold-out packet's
// openers remembered), where an unlisted snapshot returns none.
func (k *Snapshot) Usable(now time.Time) bool {
	return k != nil && k.Packet.Funding == Funded && k.Packet.StatusAt(now) == Active &&
		(k.Unlisted && k.Openers == nil || len(k.Openers) == k.Packet.Count-k.Packet.RemainingCount)
}

// DrawOpens decides the opens of users in order against p, which it
// updates: not_in_audience for a user p's audience does not admit,
// already_opened for a user with a share (have, which it also
// updates), sold_out or expired when the packet takes no more opens, else
// a fresh Draw. It returns the outcomes and the new shares. The outcomes
// are exactly those of opening one at a time in the order of users: the
// open transaction applies it to what it read (or knew) under the lock.
func DrawOpens(p *Packet, have map[UserID]int64, users []UserID, now time.Time,
	intn func(int64) int64) ([]Outcome, []Record) {
	out := make([]Outcome, len(users))
	var fresh []Record
	for i, u := range users {
		if !p.Audience.Admits(u) {
			out[i].Err = ErrNotInAudience // before anything else: a stranger learns nothing of the packet
			continue
		}
		if amount, ok := have[u]; ok {
			out[i].Result = OpenResult{User: u, Amount: amount, Status: AlreadyOpened}
			continue
		}
		switch p.StatusAt(now) {
		case SoldOut:
			out[i].Err = ErrSoldOut
			continue
		case Expired:
			out[i].Err = ErrExpired
			continue
		}
		amount := Draw(p.Type, p.RemainingAmount, p.RemainingCount, intn)
		p.RemainingAmount -= amount
		p.RemainingCount--
		have[u] = amount
		fresh = append(fresh, Record{User: u, Amount: amount, At: now, Seq: p.Count - p.RemainingCount})
		out[i].Result = OpenResult{User: u, Amount: amount, Status: Opened}
	}
	return out, fresh
}
