package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// ExplainLimit bounds the packets an audit names behind a violation of
// the sums.
const ExplainLimit = 20

// side is one packet's money as one side counts it: the SET's records
// (its shares, the refund a closed packet owes) or the ledger with the
// outbox rows not delivered yet.
type side struct {
	debit, credits, refund int64
	creditsN               int
}

// owedRow is an outbox row with the SET holding it.
type owedRow struct {
	set string
	store.Owed
}

// explain names the packets behind a violation of the sums: for every
// packet a SET's snapshot counts or the ledger has, what its records say
// (debit = total when funded, credits = its shares, refund = what a closed
// packet had left) against the ledger's entries of it, plus the outbox
// rows not delivered yet; both sides leave out exactly what the sums leave
// out (ledger entries written after the SETs were read, outbox rows whose
// entry the ledger has). It returns at most limit lines, each naming the
// packet, its SET, the keys that differ and the outbox rows of the packet.
func explain(ctx context.Context, snaps []*store.Snapshot, ws *wallet.Snapshot, fl *Flight, limit int) ([]string, error) {
	rs, err := readRecords(ctx, snaps)
	if err != nil {
		return nil, err
	}
	ledger, err := ledgerOf(ctx, ws, fl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range rs.packets(ledger) {
		b, counted := rs.books[p]
		rec, led := records(b, counted), ledgerSide(ledger[p], rs.owed[p], fl)
		if counted && b.Funding == hongbao.Pending {
			led.debit = 0 // a pending packet's debit is counted apart (pending paid)
		}
		if rec == led {
			continue
		}
		if len(out) == limit {
			out = append(out, fmt.Sprintf("... more packets differ from the ledger (the first %d are named)", limit))
			break
		}
		line, err := describe(ctx, p, b, rs.where[p], rec, led, rs.owed[p], ws, fl)
		if err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	return out, nil
}

// setRecords are the SETs' snapshots' books of every packet they count,
// the snapshot counting each, and the outbox rows of each.
type setRecords struct {
	books map[hongbao.PacketID]store.Book
	where map[hongbao.PacketID]*store.Snapshot
	owed  map[hongbao.PacketID][]owedRow
}

// readRecords reads the books and outbox rows of every snapshot.
func readRecords(ctx context.Context, snaps []*store.Snapshot) (setRecords, error) {
	rs := setRecords{books: map[hongbao.PacketID]store.Book{}, where: map[hongbao.PacketID]*store.Snapshot{},
		owed: map[hongbao.PacketID][]owedRow{}}
	for _, s := range snaps {
		bs, err := s.Books(ctx)
		if err != nil {
			return rs, err
		}
		for p, b := range bs {
			rs.books[p], rs.where[p] = b, s
		}
		for _, o := range s.Outbox {
			if p, ok := store.PacketOf(o.Key); ok {
				rs.owed[p] = append(rs.owed[p], owedRow{s.Set(), o})
			}
		}
	}
	return rs, nil
}

// packets are the packets of the records and of the ledger, in order.
func (rs setRecords) packets(ledger map[hongbao.PacketID]wallet.PacketLedger) []hongbao.PacketID {
	var ids []hongbao.PacketID
	for p := range rs.books {
		ids = append(ids, p)
	}
	for p := range ledger {
		if _, ok := rs.books[p]; !ok && p != 0 {
			ids = append(ids, p)
		}
	}
	slices.Sort(ids)
	return ids
}

// ledgerOf is the wallet snapshot's entries by packet as the sums count
// them: up to the last seq read before the SETs, plus the later entries
// that are not late.
func ledgerOf(ctx context.Context, ws *wallet.Snapshot, fl *Flight) (map[hongbao.PacketID]wallet.PacketLedger, error) {
	ledger, err := ws.ByPacket(ctx, fl.last)
	if err != nil {
		return nil, err
	}
	for _, en := range fl.recent { // after last: counted unless late
		if fl.lateKeys[en.Key] {
			continue
		}
		l := ledger[en.Packet]
		switch en.Kind {
		case hongbao.KindSend:
			l.Debit -= en.Amount
		case hongbao.KindOpen:
			l.Credits += en.Amount
			l.CreditsN++
		case hongbao.KindRefund:
			l.Refund += en.Amount
		}
		ledger[en.Packet] = l
	}
	return ledger, nil
}

// records is what a packet's records say it moved through the wallet.
func records(b store.Book, counted bool) side {
	if !counted || b.Funding != hongbao.Funded {
		return side{} // pending packets are counted apart (pending paid); cancelled ones move nothing
	}
	return side{debit: b.Total, credits: b.Shares, creditsN: b.SharesN, refund: b.Refund}
}

// ledgerSide is a packet's ledger entries (less the late ones) plus its
// outbox rows that the ledger lacks. A pending packet's debit is left out,
// as records leaves it out.
func ledgerSide(l wallet.PacketLedger, owed []owedRow, fl *Flight) side {
	s := side{debit: l.Debit, credits: l.Credits, creditsN: l.CreditsN, refund: l.Refund}
	for _, o := range owed {
		if fl.deliveredKeys[o.Key] {
			continue
		}
		switch o.Kind {
		case hongbao.KindOpen:
			s.credits += o.Amount
			s.creditsN++
		case hongbao.KindRefund:
			s.refund += o.Amount
		}
	}
	return s
}

// describe says how packet p's records and the ledger differ, naming the
// entries and outbox rows.
func describe(ctx context.Context, p hongbao.PacketID, b store.Book, snap *store.Snapshot, rec, led side,
	owed []owedRow, ws *wallet.Snapshot, fl *Flight) (string, error) {
	entries, err := ws.OfPacket(ctx, p, 1<<62)
	if err != nil {
		return "", err
	}
	var parts []string
	if snap == nil {
		parts = append(parts, fmt.Sprintf("packet %s: in no SET's records, but the ledger has", p))
	} else {
		parts = append(parts, fmt.Sprintf("packet %s (SET %s, %s): records debit %d, %d shares of %d fen, refund %d; ledger + outbox: debit %d, %d credits of %d fen, refund %d",
			p, snap.Set(), b.Table, rec.debit, rec.creditsN, rec.credits, rec.refund, led.debit, led.creditsN, led.credits, led.refund))
	}
	shares := map[hongbao.UserID]int64{}
	if snap != nil {
		if shares, err = snap.SharesOf(ctx, b); err != nil {
			return "", err
		}
	}
	named, credited := entryParts(entries, shares, rec, snap == nil, fl)
	parts = append(parts, named...)
	for u, a := range shares {
		if !credited[u] && !slices.ContainsFunc(owed, func(o owedRow) bool { return o.Key == hongbao.OpenKey(p, u) }) {
			parts = append(parts, fmt.Sprintf("user %s's share of %d fen is neither in the ledger nor in an outbox", u, a))
		}
	}
	for _, o := range owed {
		state := "not delivered"
		if fl.deliveredKeys[o.Key] {
			state = "in the ledger too"
		}
		parts = append(parts, fmt.Sprintf("outbox row %d of SET %s: %s %s %d fen (%s)", o.ID, o.set, o.Key, o.Kind, o.Amount, state))
	}
	return strings.Join(parts, "; "), nil
}

// entryParts names the packet's ledger entries (less the late ones) that
// differ from its records: a credit that is not the share, a refund that
// is not what the records owe, a debit of a packet no SET records. It
// returns the users credited too.
func entryParts(entries []hongbao.Entry, shares map[hongbao.UserID]int64, rec side, unrecorded bool, fl *Flight) ([]string, map[hongbao.UserID]bool) {
	var parts []string
	credited := map[hongbao.UserID]bool{}
	for _, en := range entries {
		if fl.lateKeys[en.Key] {
			continue
		}
		switch en.Kind {
		case hongbao.KindOpen:
			credited[en.User] = true
			if a, ok := shares[en.User]; !ok || a != en.Amount {
				parts = append(parts, fmt.Sprintf("ledger %s (seq %d) credits %d fen, the share is %s", en.Key, en.Seq, en.Amount, shareOf(a, ok)))
			}
		case hongbao.KindRefund:
			if rec.refund != en.Amount {
				parts = append(parts, fmt.Sprintf("ledger %s (seq %d) refunds %d fen, the records owe %d", en.Key, en.Seq, en.Amount, rec.refund))
			}
		case hongbao.KindSend:
			if unrecorded {
				parts = append(parts, fmt.Sprintf("ledger %s (seq %d) debits %d fen", en.Key, en.Seq, -en.Amount))
			}
		}
	}
	return parts, credited
}

// shareOf describes a share's amount, ok false when no SET records it.
func shareOf(amount int64, ok bool) string {
	if !ok {
		return "in no SET's records"
	}
	return fmt.Sprintf("%d fen", amount)
}
