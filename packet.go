package hongbao

import "time"

// Status is the life stage of a packet.
type Status string

// Packet statuses.
const (
	Active  Status = "active"   // shares left, not expired
	SoldOut Status = "sold_out" // every share taken
	Expired Status = "expired"  // past expiry with shares left; the rest is refunded
)

// Packet is a red packet as stored.
type Packet struct {
	ID              PacketID
	Sender          UserID
	Type            Type
	Total           int64
	Count           int
	Greeting        string
	RemainingAmount int64
	RemainingCount  int
	CreatedAt       time.Time
	ExpiresAt       time.Time
	Closed          bool // closed at expiry; no open may take a share after
	Funding         Funding
	Audience        Audience // who may open it; nil: anyone
}

// Funding says whether a packet's total has been debited from its sender.
// Only a funded packet can be opened.
type Funding int

// Funding states, as stored.
const (
	Pending   Funding = 0 // created, debit not yet settled
	Funded    Funding = 1 // the sender paid: openable
	Cancelled Funding = 2 // the debit failed or was voided: never openable
)

// StatusAt is the packet's status seen at now.
func (p *Packet) StatusAt(now time.Time) Status {
	switch {
	case p.RemainingCount == 0:
		return SoldOut
	case p.Closed || !now.Before(p.ExpiresAt):
		return Expired
	}
	return Active
}

// Record is one opener's share.
type Record struct {
	User   UserID
	Amount int64
	At     time.Time
	Seq    int // 1-based opening order
}

// Best is the record with the largest share, earliest on ties. It is only
// meaningful once every share is taken.
func Best(records []Record) (Record, bool) {
	var best Record
	for i, r := range records {
		if i == 0 || r.Amount > best.Amount || (r.Amount == best.Amount && r.Seq < best.Seq) {
			best = r
		}
	}
	return best, len(records) > 0
}

// OpenResult is the answer to one open: the user's share, and whether this
// open took it (Status "opened") or found it taken before ("already_opened").
type OpenResult struct {
	User   UserID
	Amount int64
	Status string
}

// Open outcomes carried in OpenResult.Status.
const (
	Opened        = "opened"
	AlreadyOpened = "already_opened"
)

// Outcome is the answer to one open of a batch: a result, or a domain error
// (ErrSoldOut, ErrExpired, ErrNotFound).
type Outcome struct {
	Result OpenResult
	Err    error
}

// MaxNextShare is the most any later open of p can be given: the whole
// remainder but a fen for each other share of a random packet (the last
// share takes what is left), one even share of a fixed one. It only goes
// down as shares are taken, so a stale packet overstates it.
func (p *Packet) MaxNextShare() int64 {
	if p.RemainingCount <= 0 {
		return 0
	}
	if p.Type == Fixed {
		return p.Total / int64(p.Count)
	}
	return p.RemainingAmount - int64(p.RemainingCount-1)
}
