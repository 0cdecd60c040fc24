package set

import (
	"context"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// reserve holds, when a daily receive limit is configured, the most the
// open of id by user can be given against the user's limit, before the
// open is answered: an opener is never told "opened" for a share a limit
// would then refuse (the credit itself never checks). It answers
// ErrDailyLimit (a *hongbao.LimitError) when the hold would pass the
// limit. Without a receive limit it does nothing at all.
func (s *Server) reserve(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (wallet.Reservation, error) {
	if s.wallet == nil || !s.wallet.LimitsReceipts() {
		return wallet.Reservation{}, nil
	}
	most, err := s.mostShare(ctx, id)
	if err != nil || most <= 0 {
		return wallet.Reservation{}, err // nothing left to give (or no packet): nothing to hold
	}
	return s.wallet.ReserveReceive(ctx, user, most)
}

// mostShare is the most an open of id can be given now: from what the
// server knows of the packet, else from its row (a point read).
func (s *Server) mostShare(ctx context.Context, id hongbao.PacketID) (int64, error) {
	if kn := s.known.get(id, s.now()); kn != nil {
		return kn.Packet.MaxNextShare(), nil
	}
	p, err := s.store.Head(ctx, id)
	if err != nil {
		if hongbao.Code(err) == hongbao.ErrNotFound.Code {
			return 0, nil // the open answers it
		}
		return 0, err
	}
	return p.MaxNextShare(), nil
}

// settle gives back what an open did not take of its reservation: all of
// it when the open took no share (already opened, sold out, any refusal),
// the rest of the hold past the share when it opened one. An open whose
// outcome is unknown (a commit lost on the way) keeps the whole hold: the
// share may be paid.
func (s *Server) settle(ctx context.Context, r wallet.Reservation, res hongbao.OpenResult, err error) {
	if r.Amount == 0 {
		return
	}
	took := int64(0)
	switch {
	case err == nil && res.Status == hongbao.Opened:
		took = res.Amount
	case err != nil && hongbao.Code(err) == "internal":
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.wallet.Settle(ctx, r, took); err != nil {
		// The hold stays: the user may receive that much less today.
		s.log.Warn("daily receive reservation not given back", zap.Stringer("user", r.User), zap.Int64("amount", r.Amount-took), zap.Error(err))
	}
}
