package set

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
)

// grab tells whether user may still open id, from the cache when it can.
// It never writes to MySQL; on a cache miss it reads the packet row once
// and caches it.
func (s *Server) grab(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (bool, string, error) {
	if s.audiences.refuses(id, user) {
		return false, hongbao.ErrNotInAudience.Code, nil
	}
	if o, ok := s.memo.answer(id, user); ok {
		return false, grabStatus(o), nil
	}
	if o, answered, _ := s.known.answer(id, user, s.now()); answered {
		return false, grabStatus(o), nil
	}
	_, opened, st, ok := s.cache.Lookup(id, user)
	if opened {
		return false, hongbao.AlreadyOpened, nil
	}
	if !ok {
		p, err := s.store.Head(ctx, id)
		if err != nil {
			return false, "", err
		}
		if p.Funding != hongbao.Funded {
			return false, "", hongbao.ErrNotFound // never openable: not a packet to anyone
		}
		st = p.State()
		s.cache.SetState(id, st)
	}
	if s.audiences.learn(id, st.Audience); !st.Audience.Admits(user) {
		return false, hongbao.ErrNotInAudience.Code, nil
	}
	// The cache may have lost (or not yet have) this user's share: one
	// primary-key read settles it, so a lost entry never changes the answer.
	if _, had, err := s.store.Opened(ctx, id, user); err != nil {
		return false, "", err
	} else if had {
		return false, hongbao.AlreadyOpened, nil
	}
	if status := st.Status(s.now()); status != hongbao.Active {
		return false, string(status), nil
	}
	return true, "", nil
}

// grabStatus is the grab answer of an open answered from memory.
func grabStatus(o hongbao.Outcome) string {
	switch {
	case errors.Is(o.Err, hongbao.ErrSoldOut):
		return string(hongbao.SoldOut)
	case errors.Is(o.Err, hongbao.ErrNotInAudience):
		return hongbao.ErrNotInAudience.Code
	}
	return hongbao.AlreadyOpened
}

// Open opens packet id for user in process, exactly as the HTTP API does:
// for embedding and benchmarks.
func (s *Server) Open(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	return s.open(ctx, id, user)
}

// open answers an open. A user a packet's audience does not admit is
// refused from memory when the server has seen the packet (audiences),
// else by the cached state's copy of the audience or by the transaction. A
// packet that sold out here is answered from the memo (a stranger to its
// audience not_in_audience: the memo keeps the audience, so the answer does
// not depend on the audiences' memory); a user the cache
// knows as an opener, or a packet the cache knows to be over, is answered
// without a transaction (a point read settles whether a user of an over
// packet had a share); everything else goes through the packet's queue to
// its one transaction at a time.
func (s *Server) open(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	if s.audiences.refuses(id, user) {
		return hongbao.OpenResult{}, hongbao.ErrNotInAudience // a map read: no cache, no transaction
	}
	if o, ok := s.memo.answer(id, user); ok {
		return o.Result, o.Err // sold out here: no transaction, no cache
	}
	if o, answered, live := s.known.answer(id, user, s.now()); answered {
		return o.Result, o.Err // a share taken here
	} else if live {
		return s.submit(ctx, id, user) // the cache could only say it is live
	}
	if s.queue.Live(id) {
		// A hot packet: its worker answers a repeated or sold-out open
		// inside a batch (one read-only transaction for many) at less
		// cost than a memcached round trip per open.
		return s.submit(ctx, id, user)
	}
	amount, opened, st, ok := s.cache.Lookup(id, user)
	if opened {
		return hongbao.OpenResult{User: user, Amount: amount, Status: hongbao.AlreadyOpened}, nil
	}
	if ok {
		if s.audiences.learn(id, st.Audience); !st.Audience.Admits(user) {
			return hongbao.OpenResult{}, hongbao.ErrNotInAudience
		}
		switch st.Status(s.now()) {
		case hongbao.SoldOut:
			return s.over(ctx, id, user, hongbao.ErrSoldOut)
		case hongbao.Expired:
			return s.over(ctx, id, user, hongbao.ErrExpired)
		}
	}
	return s.submit(ctx, id, user)
}

// submit sends an open through the packet's queue, holding the most it
// can be given against the user's daily receive limit while it runs (when
// one is configured).
func (s *Server) submit(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	r, err := s.reserve(ctx, id, user)
	if err != nil {
		return hongbao.OpenResult{}, fmt.Errorf("open %s by %s: %w", id, user, err)
	}
	res, err := s.queue.Submit(ctx, id, user)
	s.settle(ctx, r, res, err)
	if errors.Is(err, hongbao.ErrNotFound) {
		return s.archived(ctx, id, user)
	}
	if err != nil {
		return res, fmt.Errorf("open %s by %s: %w", id, user, err)
	}
	return res, nil
}

// archived answers an open of a packet no longer in the day tables: an
// archived packet is over, so the user's share if any, else expired.
func (s *Server) archived(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	p, recs, err := s.store.Packet(ctx, id)
	if err != nil {
		return hongbao.OpenResult{}, err
	}
	if s.audiences.learn(id, p.Audience); !p.Audience.Admits(user) {
		return hongbao.OpenResult{}, hongbao.ErrNotInAudience
	}
	for _, r := range recs {
		if r.User == user {
			return hongbao.OpenResult{User: user, Amount: r.Amount, Status: hongbao.AlreadyOpened}, nil
		}
	}
	if p.RemainingCount == 0 {
		return hongbao.OpenResult{}, hongbao.ErrSoldOut
	}
	if p.Funding != hongbao.Funded {
		return hongbao.OpenResult{}, hongbao.ErrNotFound
	}
	return hongbao.OpenResult{}, hongbao.ErrExpired
}

// over answers an open of a packet that takes no more opens: the user's
// earlier share if there is one, else outcome.
func (s *Server) over(ctx context.Context, id hongbao.PacketID, user hongbao.UserID, outcome error) (hongbao.OpenResult, error) {
	amount, ok, err := s.store.Opened(ctx, id, user)
	switch {
	case err != nil:
		return hongbao.OpenResult{}, err
	case ok:
		s.cache.SetOpened(id, user, amount, s.now().Add(s.limits.Expiry))
		return hongbao.OpenResult{User: user, Amount: amount, Status: hongbao.AlreadyOpened}, nil
	}
	return hongbao.OpenResult{}, outcome
}

// apply is the queue's transaction: the batches of one or more packets
// through the store in one transaction, then the server learns what
// committed.
func (s *Server) apply(ctx context.Context, works []queue.Work) ([][]hongbao.Outcome, error) {
	now := s.now()
	sw := make([]store.Work, len(works))
	for i, w := range works {
		sw[i] = store.Work{ID: w.ID, Users: w.Users, Known: s.known.get(w.ID, now), OpenersUpTo: s.known.upTo()}
		if !s.memo.knows(w.ID) {
			sw[i].SoldOutOpenersUpTo = s.memo.worth()
		}
	}
	bs, err := s.store.OpenMany(ctx, sw)
	if err != nil {
		for _, w := range works {
			s.known.forget(w.ID) // the retries read the packets afresh
		}
		return nil, err
	}
	out := make([][]hongbao.Outcome, len(bs))
	for i, b := range bs {
		s.learn(works[i].ID, b)
		out[i] = b.Outcomes
	}
	return out, nil
}

// learn records what one packet's committed batch changed, before anyone
// hears the outcome: every share is logged (unsampled); a packet whose
// every share the batch carries is known (or, sold out, remembered) in
// process, which answers its repeated opens; the shares of other packets,
// and a sold-out packet's state, go to memcached off the committer's path.
// Until they land, a repeated open goes to the queue and a grab reads the
// share from MySQL.
func (s *Server) learn(id hongbao.PacketID, b store.Batch) {
	if b.Packet == nil {
		return
	}
	s.audiences.learn(id, b.Packet.Audience) // the next stranger is refused from memory
	var opened []cache.Share
	for _, o := range b.Outcomes {
		if o.Err == nil && o.Result.Status == hongbao.Opened {
			opened = append(opened, cache.Share{User: o.Result.User, Amount: o.Result.Amount})
		}
	}
	if len(opened) > 0 {
		// One line for the batch's shares, every share in it: a line
		// per share was a write to the log per open, a tenth of a hot
		// server's CPU (BENCHMARKS.md).
		s.money.Info("shares opened", zap.Stringer("packet_id", id), zap.Int("count", len(opened)),
			zap.Int64("amount", sumShares(opened)), zap.Array("shares", sharesLog(opened)))
	}
	if len(opened) > 0 && b.Openers == nil {
		s.openers.add(openerEntry{id: id, shares: opened, expires: b.Packet.ExpiresAt}) // one memcached round for the batch
	}
	s.known.learn(id, b, s.now())
	if b.Packet.RemainingCount == 0 && b.Openers != nil {
		s.memo.remember(id, b.Openers, b.Packet.Audience)
	}
	if b.Packet.RemainingCount == 0 && soldHere(b) {
		s.openers.soldOut(id, b.Packet.State())
	}
}

// soldHere reports whether the batch took the packet's last share (a batch
// of a packet sold out before changes nothing).
func soldHere(b store.Batch) bool {
	return slices.ContainsFunc(b.Outcomes, func(o hongbao.Outcome) bool { return o.Err == nil && o.Result.Status == hongbao.Opened })
}

// sumShares is the money of shares.
func sumShares(shares []cache.Share) int64 {
	var sum int64
	for _, sh := range shares {
		sum += sh.Amount
	}
	return sum
}

// sharesLog logs shares as an array of {"user", "amount"}.
type sharesLog []cache.Share

func (l sharesLog) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, sh := range l {
		if err := enc.AppendObject(shareLog(sh)); err != nil {
			return err
		}
	}
	return nil
}

// shareLog logs one share: the user as a string, as every user ID in the
// logs and the API (IDs pass 2^53).
type shareLog cache.Share

func (sh shareLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("user", sh.User.String())
	enc.AddInt64("amount", sh.Amount)
	return nil
}
