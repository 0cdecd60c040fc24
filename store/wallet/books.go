package wallet

import (
	"context"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// PacketLedger is what the ledger holds of one packet: its debit (a
// positive amount here), its credits and its refund.
type PacketLedger struct {
	Debit    int64
	Credits  int64
	CreditsN int
	Refund   int64
}

// ByPacket sums the snapshot's entries up to seq by packet and kind (send,
// open, refund): what hbctl verify sets against each packet's records when
// the totals disagree, to name the packets.
func (s *Snapshot) ByPacket(ctx context.Context, seq int64) (map[hongbao.PacketID]PacketLedger, error) {
	rows, err := s.conn.QueryContext(ctx, "SELECT packet_id, kind, COUNT(*), SUM(amount) FROM ledger WHERE seq <= ? AND kind IN (?, ?, ?) GROUP BY packet_id, kind",
		seq, hongbao.KindSend, hongbao.KindOpen, hongbao.KindRefund)
	if err != nil {
		return nil, fmt.Errorf("wallet: ledger by packet: %w", err)
	}
	defer rows.Close()
	out := map[hongbao.PacketID]PacketLedger{}
	for rows.Next() {
		var p hongbao.PacketID
		var kind string
		var k sqldb.KindSum
		if err := rows.Scan(&p, &kind, &k.N, &k.Sum); err != nil {
			return nil, fmt.Errorf("wallet: ledger by packet: %w", err)
		}
		l := out[p]
		switch kind {
		case hongbao.KindSend:
			l.Debit = -k.Sum
		case hongbao.KindOpen:
			l.Credits, l.CreditsN = k.Sum, k.N
		case hongbao.KindRefund:
			l.Refund = k.Sum
		}
		out[p] = l
	}
	return out, rows.Err()
}

// OfPacket returns the snapshot's entries of packet p up to seq, in
// ledger order.
func (s *Snapshot) OfPacket(ctx context.Context, p hongbao.PacketID, seq int64) ([]hongbao.Entry, error) {
	rows, err := s.conn.QueryContext(ctx, selectEntry+"WHERE packet_id = ? AND seq <= ? ORDER BY seq", p, seq)
	if err != nil {
		return nil, fmt.Errorf("wallet: entries of packet %s: %w", p, err)
	}
	return scanEntries(rows)
}
