package set

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/store"
)

// maxIdemKey bounds the Idempotency-Key header.
const maxIdemKey = 200

func (s *Server) handleSend(r *http.Request, sender hongbao.UserID) (int, any, error) {
	if err := api.CheckJSONType(r.Header); err != nil {
		return 0, nil, err
	}
	req, err := api.DecodeSend(http.MaxBytesReader(nil, r.Body, api.MaxBody))
	if err != nil {
		return 0, nil, err
	}
	key := r.Header.Get("Idempotency-Key")
	var id hongbao.PacketID
	if h := r.Header.Get(api.HeaderPacketID); h != "" {
		if id, err = hongbao.ParsePacketID(h); err != nil {
			return 0, nil, err
		}
	}
	p, err := s.send(r.Context(), id, sender, req, key)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, api.Packet(p, nil, s.now(), s.loc).ForViewer(p, sender), nil
}

// Send creates packet id (0: the server mints one) for sender in process,
// exactly as the HTTP API does: for embedding and benchmarks.
func (s *Server) Send(ctx context.Context, id hongbao.PacketID, sender hongbao.UserID, req hongbao.SendRequest, idemKey string) (*hongbao.Packet, error) {
	return s.send(ctx, id, sender, req, idemKey)
}

// send validates, funds and creates a packet; a repeated idempotency key
// answers the packet its first attempt created.
func (s *Server) send(ctx context.Context, id hongbao.PacketID, sender hongbao.UserID, req hongbao.SendRequest, key string) (*hongbao.Packet, error) {
	if len(key) > maxIdemKey {
		return nil, &hongbao.InvalidError{Code: "invalid_idempotency_key", Field: "Idempotency-Key", Message: "must be at most 200 bytes"}
	}
	if err := s.limits.Validate(req); err != nil {
		return nil, err
	}
	n := store.NewPacket{Sender: sender, Req: req, Expiry: s.limits.Expiry, IdempotencyKey: key, Funding: hongbao.Funded}
	if s.wallet != nil {
		n.Funding = hongbao.Pending
		if err := s.devGrant(ctx, sender); err != nil {
			return nil, err
		}
		if err := s.covers(ctx, sender, req.Total, key); err != nil {
			return nil, err
		}
		if key == "" && s.wallet.LimitsSends() {
			// Spares a send that cannot pass its pending row; the debit
			// decides (a keyed retry of a send that passed must not be
			// counted twice, so it skips this), and alone decides for a
			// user limited by an override only.
			if err := s.wallet.CheckSend(ctx, sender, req.Total); err != nil {
				return nil, err
			}
		}
	}
	p, created, err := s.create(ctx, id, n)
	if err != nil {
		return nil, err
	}
	if p.Funding == hongbao.Pending {
		if p, err = s.fund(ctx, p); err != nil {
			return nil, err
		}
	}
	if p.Funding == hongbao.Cancelled {
		return nil, s.cancelled(ctx, p)
	}
	s.cache.SetState(p.ID, p.State())
	s.audiences.learn(p.ID, p.Audience)
	s.known.learnSent(p, created, s.now()) // the first open's transaction need not read the packet either
	if created {
		s.log.Info("packet sent", zap.String("request_id", requestID(ctx)), zap.Stringer("packet_id", p.ID),
			zap.Stringer("sender", sender), zap.Int64("total", p.Total), zap.Int("count", p.Count), zap.String("type", string(p.Type)))
	}
	return p, nil
}

// cancelled says why packet p was cancelled: the balance did not cover it
// (no debit under its key), or the sweeper voided its debit first (the
// debit could not be made in time; a retry under the same key must not
// say the balance is short when it is not).
func (s *Server) cancelled(ctx context.Context, p *hongbao.Packet) error {
	e, ok, err := s.wallet.Entry(ctx, hongbao.SendKey(p.ID))
	switch {
	case err != nil:
		return fmt.Errorf("why %s was cancelled: %w", p.ID, err)
	case ok && e.Kind == hongbao.KindVoid:
		return fmt.Errorf("packet %s: %w", p.ID, hongbao.ErrSendCancelled)
	}
	// No debit: the balance or a daily limit refused it. Asked again,
	// the limit says which while it still holds.
	var le *hongbao.LimitError
	if err := s.wallet.CheckSend(ctx, p.Sender, p.Total); errors.As(err, &le) {
		return fmt.Errorf("packet %s: %w", p.ID, err)
	}
	return fmt.Errorf("packet %s: %w", p.ID, hongbao.ErrInsufficientFunds)
}

// devGrant credits a sender once (the ledger key makes it once) when the
// dev grant is configured.
func (s *Server) devGrant(ctx context.Context, sender hongbao.UserID) error {
	if s.grant <= 0 {
		return nil
	}
	_, _, err := s.wallet.Apply(ctx, hongbao.Entry{Key: "topup:dev-grant:" + sender.String(), User: sender,
		Amount: s.grant, Kind: hongbao.KindTopUp})
	return err
}

// covers refuses a send the balance cannot pay, before anything is
// written. A retry under an Idempotency-Key skips it: its first attempt may
// have spent the balance on this very packet. The debit itself is the real
// check; this only spares the common refusal a pending row.
func (s *Server) covers(ctx context.Context, sender hongbao.UserID, total int64, key string) error {
	if key != "" {
		return nil
	}
	bal, err := s.wallet.Balance(ctx, sender)
	if err != nil {
		return err
	}
	if bal < total {
		return fmt.Errorf("balance %d < total %d: %w", bal, total, hongbao.ErrInsufficientFunds)
	}
	return nil
}

// fund debits the sender under the ledger key of the packet, then makes the
// packet openable, or cancels it when the balance does not cover it or a
// daily limit refuses it (that refusal is the answer). If the
// debit cannot be made now the packet stays pending, the client gets an
// error, and a retry or the settler's sweeper decides it.
func (s *Server) fund(ctx context.Context, p *hongbao.Packet) (*hongbao.Packet, error) {
	e, _, err := s.wallet.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(p.ID), User: p.Sender, Amount: -p.Total,
		Kind: hongbao.KindSend, Packet: p.ID})
	to := hongbao.Funded
	var refused *hongbao.LimitError
	switch {
	case errors.Is(err, hongbao.ErrInsufficientFunds), errors.As(err, &refused):
		to = hongbao.Cancelled
	case err != nil:
		return nil, fmt.Errorf("debit for %s: %w", p.ID, err)
	case e.Kind == hongbao.KindVoid:
		to = hongbao.Cancelled // the sweeper gave up on it first
	}
	p, err = s.store.Fund(ctx, p.ID, to)
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, fmt.Errorf("debit for %s: %w", p.ID, refused)
	}
	if to == hongbao.Funded {
		s.money.Info("sender debited", zap.Stringer("packet_id", p.ID), zap.Stringer("sender", p.Sender), zap.Int64("amount", p.Total))
	}
	return p, nil
}

// create inserts the packet under the ID the router minted. Without one
// (a server used on its own) it mints one as a router would.
func (s *Server) create(ctx context.Context, id hongbao.PacketID, n store.NewPacket) (*hongbao.Packet, bool, error) {
	if id != 0 {
		if err := s.own(id.Bucket()); err != nil {
			return nil, false, err
		}
		n.ID = id
		return s.store.Create(ctx, n)
	}
	var p *hongbao.Packet
	var created bool
	err := s.minter.Mint(n.Sender, n.IdempotencyKey, func(id hongbao.PacketID) error {
		if err := s.own(id.Bucket()); err != nil {
			return err
		}
		n.ID = id
		var err error
		p, created, err = s.store.Create(ctx, n)
		return err
	})
	return p, created, err
}

func (s *Server) handleGrab(r *http.Request, user hongbao.UserID, id hongbao.PacketID) (int, any, error) {
	ok, reason, err := s.grab(r.Context(), id, user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.GrabJSON{CanOpen: ok, Reason: reason}, nil
}

func (s *Server) handleOpen(r *http.Request, user hongbao.UserID, id hongbao.PacketID) (int, any, error) {
	res, err := s.open(r.Context(), id, user)
	s.opens.Count(outcome(res, err))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.OpenJSON{Status: res.Status, Amount: res.Amount}, nil
}

func (s *Server) handleDetail(r *http.Request, user hongbao.UserID, id hongbao.PacketID) (int, any, error) {
	p, recs, err := s.store.Detail(r.Context(), id, user)
	if err != nil {
		return 0, nil, err
	}
	if p.Funding != hongbao.Funded {
		return 0, nil, hongbao.ErrNotFound // pending or refused: nothing to show
	}
	return http.StatusOK, api.Packet(p, recs, s.now(), s.loc).ForViewer(p, user), nil
}
