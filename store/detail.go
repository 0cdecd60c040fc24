package store

import (
	"context"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Detail is Packet for a client's GET by reader: served by the replica
// while it is fresh (WithReplica) when its copy holds everything reader
// did to the packet, else by the primary. A replica is behind by up to
// the lag it was measured at, so its copy may lack the funding of a packet
// just sent (a pending packet, answered as not found) or the share reader
// was just told: a client reads back its own writes at once (the sender
// its packet, an opener their share), and only other users' most recent
// opens may show a moment late.
func (s *Store) Detail(ctx context.Context, id hongbao.PacketID, reader hongbao.UserID) (*hongbao.Packet, []hongbao.Record, error) {
	if s.replica != nil && s.fresh() {
		t := s.Table(id)
		// Any failure falls back to the primary: a packet sent a moment
		// ago may not be applied on the replica yet (not found there), or
		// the replica went away since fresh was last measured.
		err := s.audienced(ctx, s.tables, t.DB()) // on the primary: the replica follows
		var p *hongbao.Packet
		var recs []hongbao.Record
		if err == nil {
			p, recs, err = readPacket(ctx, s.replica, t.DB(), t.Packets(), t.Details(), id)
		}
		if err == nil {
			ok, err := s.holdsReaders(ctx, p, recs, reader)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				return p, recs, nil
			}
		}
	}
	return s.Packet(ctx, id)
}

// holdsReaders reports whether a replica's copy of a packet (p, recs)
// holds every write of reader to it: the packet funded (a send's last
// write), and reader's share if they have one. A sold-out copy holds
// every share; otherwise one point read on the primary tells whether
// reader has a share the copy lacks.
func (s *Store) holdsReaders(ctx context.Context, p *hongbao.Packet, recs []hongbao.Record, reader hongbao.UserID) (bool, error) {
	if p.Funding != hongbao.Funded {
		return false, nil // pending or cancelled here: the primary decides
	}
	for _, r := range recs {
		if r.User == reader {
			return true, nil
		}
	}
	if p.RemainingCount == 0 {
		return true, nil
	}
	_, opened, err := s.Opened(ctx, p.ID, reader)
	return !opened, err
}
