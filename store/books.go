package store

import (
	"context"
	"fmt"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Book is what a SET's records say one packet moved through the wallet:
// its debit, its shares (each a credit) and, once closed with shares left,
// its refund. hbctl verify sets it against the ledger's entries of the
// packet to name the packets whose money is wrong.
type Book struct {
	Packet  hongbao.PacketID
	Table   string // where it is: a day table or an archive table
	Funding hongbao.Funding
	Total   int64
	Shares  int64 // sum of its shares
	SharesN int   // number of its shares
	Refund  int64 // the remaining amount of a closed packet: owed back to its sender
}

// Books returns the book of every packet the snapshot counts (the buckets
// of Count; the archive read beside the snapshot, as Count reads it).
func (s *Snapshot) Books(ctx context.Context) (map[hongbao.PacketID]Book, error) {
	out := map[hongbao.PacketID]Book{}
	err := walkTables(ctx, s.conn, s.cold, s.owned, func(q querier, t string, skip map[int64]bool) error {
		return eachPacket(ctx, q, t, func(r packetRow) error {
			if skip[r.id] {
				return nil
			}
			b := Book{Packet: hongbao.PacketID(r.id), Table: t, Funding: hongbao.Funding(r.funding), Total: r.total,
				Shares: r.sum, SharesN: r.n}
			if r.closed != 0 {
				b.Refund = r.remAmount
			}
			out[b.Packet] = b
			return nil
		})
	})
	return out, err
}

// Set is the name of the SET the snapshot reads ("" for every table).
func (s *Snapshot) Set() string { return s.set }

// SharesOf returns the shares of b's packet, by opener, as the snapshot
// sees them (an archived packet's from the archive).
func (s *Snapshot) SharesOf(ctx context.Context, b Book) (map[hongbao.UserID]int64, error) {
	var q querier = s.conn
	if strings.Contains(b.Table, "_archive.") {
		q = s.cold
	}
	rows, err := q.QueryContext(ctx, "SELECT user_id, amount FROM "+b.Table+"_detail WHERE packet_id = ?", b.Packet)
	if err != nil {
		return nil, fmt.Errorf("store: shares of %s: %w", b.Packet, err)
	}
	defer rows.Close()
	out := map[hongbao.UserID]int64{}
	for rows.Next() {
		var u hongbao.UserID
		var a int64
		if err := rows.Scan(&u, &a); err != nil {
			return nil, fmt.Errorf("store: shares of %s: %w", b.Packet, err)
		}
		out[u] = a
	}
	return out, rows.Err()
}

// PacketOf returns the packet an outbox or ledger key names.
func PacketOf(key string) (hongbao.PacketID, bool) {
	k, ok := parseKey(key)
	return k.packet, ok
}
