package statement

import (
	"context"
	"errors"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
)

// check counts the day's sends, credits and refunds from the SETs' side:
// each entry against the record of its packet (read once per packet).
// Top-ups and voids have no SET side.
func (st *Statement) check(ctx context.Context, recs Records) error {
	st.SETs = map[string]Total{}
	type read struct {
		p    *hongbao.Packet
		recs map[hongbao.UserID]int64
	}
	packets := map[hongbao.PacketID]*read{}
	for _, e := range st.Entries {
		if e.Kind != hongbao.KindSend && e.Kind != hongbao.KindOpen && e.Kind != hongbao.KindRefund {
			continue
		}
		r, ok := packets[e.Packet]
		if !ok {
			p, rs, err := recs.Packet(ctx, e.Packet)
			switch {
			case errors.Is(err, hongbao.ErrNotFound):
			case err != nil:
				return fmt.Errorf("statement: packet %s: %w", e.Packet, err)
			}
			r = &read{p: p, recs: map[hongbao.UserID]int64{}}
			for _, rec := range rs {
				r.recs[rec.User] = rec.Amount
			}
			packets[e.Packet] = r
		}
		if r.p == nil {
			st.Problems = append(st.Problems, Problem{e.Key, e.Amount, "no SET has packet " + e.Packet.String()})
			continue
		}
		got, problem := sideOf(e, r.p, r.recs)
		if problem != "" {
			st.Problems = append(st.Problems, Problem{e.Key, e.Amount, problem})
		}
		t := st.SETs[e.Kind]
		t.N++
		t.Sum += got
		st.SETs[e.Kind] = t
	}
	return nil
}

// sideOf is entry e as its packet's record counts it (in the ledger's
// sign), and what disagrees, if anything.
func sideOf(e hongbao.Entry, p *hongbao.Packet, recs map[hongbao.UserID]int64) (int64, string) {
	switch e.Kind {
	case hongbao.KindSend:
		if p.Funding != hongbao.Funded || p.Sender != e.User || -e.Amount != p.Total {
			return -p.Total, fmt.Sprintf("the SET holds a packet of %d fen from %s, funding %d", p.Total, p.Sender, p.Funding)
		}
		return -p.Total, ""
	case hongbao.KindOpen:
		a, ok := recs[e.User]
		if !ok || a != e.Amount {
			return a, fmt.Sprintf("the SET's share of %s is %d fen (recorded: %v)", e.User, a, ok)
		}
		return a, ""
	default: // refund
		if !p.Closed || p.Sender != e.User || p.RemainingAmount != e.Amount {
			return p.RemainingAmount, fmt.Sprintf("the SET's packet has %d fen left, closed %v", p.RemainingAmount, p.Closed)
		}
		return p.RemainingAmount, ""
	}
}

// checkSETs is the other direction: each of the SETs' moves of the day
// (m) must have its ledger entry, wherever its day. A move whose outbox
// row was still undelivered when the SETs were read is in flight, not a
// problem: it reaches the ledger later (a later day's entry, checked
// then against its record); since m was read before l's snapshot, a move
// delivered meanwhile is in l. The forward check already compares the
// entries of the day found; this one names what the ledger lacks.
func (st *Statement) checkSETs(ctx context.Context, l Ledger, m *SETMoney) error {
	st.InFlight = map[string]Total{}
	seen := map[string]bool{} // a SET sharing a MySQL, or a bucket's copy kept after a move, reads a move twice
	var keys []string
	for _, mv := range m.Moves {
		if !seen[mv.Key] {
			seen[mv.Key] = true
			keys = append(keys, mv.Key)
		}
	}
	have, err := l.Entries(ctx, keys)
	if err != nil {
		return fmt.Errorf("statement: the ledger's entries of the SETs' moves: %w", err)
	}
	clear(seen)
	unreadable := map[string]bool{} // SETs sharing a MySQL each read its rows
	for _, err := range m.Unreadable {
		if d := err.Error(); !unreadable[d] {
			unreadable[d] = true
			st.Problems = append(st.Problems, Problem{"", 0, "an outbox row whose credits cannot be read, so neither delivered nor counted: " + d})
		}
	}
	lost := "the ledger has no entry and no outbox holds it"
	if len(unreadable) > 0 {
		lost = fmt.Sprintf("the ledger has no entry and no readable outbox row holds it (%d do not read)", len(unreadable))
	}
	for _, mv := range m.Moves {
		if _, ok := have[mv.Key]; ok || seen[mv.Key] {
			continue
		}
		seen[mv.Key] = true
		if m.InFlight[mv.Key] {
			t := st.InFlight[mv.Kind]
			t.N++
			t.Sum += mv.Amount
			st.InFlight[mv.Kind] = t
			continue
		}
		st.Problems = append(st.Problems, Problem{mv.Key, mv.Amount, fmt.Sprintf("the SET records %s's %s at %s, %s",
			mv.User, mv.Kind, mv.At.UTC().Format(timeFormat), lost)})
	}
	return nil
}
