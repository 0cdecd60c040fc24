package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Open opens packet id for user in one transaction.
func (s *Store) Open(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	b, err := s.OpenBatch(ctx, id, []hongbao.UserID{user})
	if err != nil {
		return hongbao.OpenResult{}, err
	}
	return b.Outcomes[0].Result, b.Outcomes[0].Err
}

// OpenBatch applies the opens of users to packet id, in order, in one
// transaction: lock the packet row, find who already has a share, draw a
// share for each newcomer while any are left and the packet lives, insert
// the details and update the packet. The outcomes are exactly those of
// opening one at a time in the same order (a user twice in the batch gets
// one share and then already_opened). A non-nil error means nothing was
// committed, or, for an error from COMMIT, that the outcome is unknown; the
// opens are idempotent, so the caller may retry them.
func (s *Store) OpenBatch(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) (Batch, error) {
	t := s.Table(id)
	var b Batch
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		now := s.now() // fixed for the whole transaction
		if err := fence(ctx, tx, s.set, id.Bucket()); err != nil {
			return err
		}
		var err error
		b, err = openTx(ctx, tx, t, id, users, now, s.intn)
		return err
	})
	if err != nil {
		return Batch{}, fmt.Errorf("store: open %s: %w", id, err)
	}
	return b, nil
}

// Batch is the result of OpenBatch: one outcome per user, and the packet as
// the transaction left it (nil when it does not exist).
type Batch struct {
	Outcomes []hongbao.Outcome
	Packet   *hongbao.Packet
}

func openTx(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, users []hongbao.UserID,
	now time.Time, intn func(int64) int64) (Batch, error) {
	p, err := scanPacket(tx.QueryRowContext(ctx, selectPacket+t.Packets()+" WHERE id = ? FOR UPDATE", id))
	if errors.Is(err, hongbao.ErrNotFound) || (err == nil && p.Funding != hongbao.Funded) {
		return Batch{Outcomes: fill(len(users), hongbao.ErrNotFound)}, nil
	}
	if err != nil {
		return Batch{}, err
	}
	have, err := sharesOf(ctx, tx, t, id, users)
	if err != nil {
		return Batch{}, err
	}
	out := make([]hongbao.Outcome, len(users))
	var fresh []hongbao.Record
	for i, u := range users {
		if amount, ok := have[u]; ok {
			out[i].Result = hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.AlreadyOpened}
			continue
		}
		switch p.StatusAt(now) {
		case hongbao.SoldOut:
			out[i].Err = hongbao.ErrSoldOut
			continue
		case hongbao.Expired:
			out[i].Err = hongbao.ErrExpired
			continue
		}
		amount := hongbao.Draw(p.Type, p.RemainingAmount, p.RemainingCount, intn)
		p.RemainingAmount -= amount
		p.RemainingCount--
		have[u] = amount
		fresh = append(fresh, hongbao.Record{User: u, Amount: amount, At: now, Seq: p.Count - p.RemainingCount})
		out[i].Result = hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.Opened}
	}
	b := Batch{Outcomes: out, Packet: p}
	if len(fresh) == 0 {
		return b, nil
	}
	return b, writeShares(ctx, tx, t, p, fresh, now)
}

// writeShares inserts the new shares and their credits and updates the
// packet: three statements sent as one, so the transaction pays one round
// trip for them (MySQL stops at the first that fails, and the error
// aborts the transaction).
func writeShares(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, p *hongbao.Packet, recs []hongbao.Record, now time.Time) error {
	args := make([]any, 0, 11*len(recs)+3)
	for _, r := range recs {
		args = append(args, p.ID, r.User, r.Amount, r.Seq, r.At.UTC())
	}
	for _, r := range recs {
		args = append(args, OpenKey(p.ID, r.User), r.User, r.Amount, KindOpen, p.ID, now.UTC())
	}
	args = append(args, p.RemainingAmount, p.RemainingCount, p.ID)
	q := "INSERT INTO " + t.Details() + " (packet_id, user_id, amount, seq, opened_at) VALUES (?,?,?,?,?)" +
		strings.Repeat(",(?,?,?,?,?)", len(recs)-1) + ";" +
		// The outbox: each share's wallet credit, in the same transaction,
		// so a committed share always has its credit.
		"INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)" +
		strings.Repeat(",(?,?,?,?,?,?)", len(recs)-1) + ";" +
		"UPDATE " + t.Packets() + " SET remaining_amount = ?, remaining_count = ? WHERE id = ?"
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// sharesOf returns the shares users already hold in packet id.
func sharesOf(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, users []hongbao.UserID) (map[hongbao.UserID]int64, error) {
	args := make([]any, 0, len(users)+1)
	args = append(args, id)
	for _, u := range users {
		args = append(args, u)
	}
	q := "SELECT user_id, amount FROM " + t.Details() + " WHERE packet_id = ? AND user_id IN (?" + strings.Repeat(",?", len(users)-1) + ")"
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := make(map[hongbao.UserID]int64, len(users))
	for rows.Next() {
		var u hongbao.UserID
		var amount int64
		if err := rows.Scan(&u, &amount); err != nil {
			return nil, err
		}
		have[u] = amount
	}
	return have, rows.Err()
}

func fill(n int, err error) []hongbao.Outcome {
	out := make([]hongbao.Outcome, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}
