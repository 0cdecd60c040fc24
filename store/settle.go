package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Fund settles a pending packet: Funded makes it openable, Cancelled never.
// It changes nothing for a packet already settled and returns the packet.
func (s *Store) Fund(ctx context.Context, id hongbao.PacketID, to hongbao.Funding) (*hongbao.Packet, error) {
	t := s.Table(id)
	var p *hongbao.Packet
	// With its audience: the sender's answer and the server's knowledge
	// of the packet are made from what Fund returns.
	err := s.audienced(ctx, s.tables, t.DB())
	if err == nil {
		err = sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
			return s.fundTx(ctx, tx, t, id, to, &p)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("store: fund %s: %w", id, err)
	}
	return p, nil
}

// fundTx is Fund's transaction; it reads nothing after the packet's lock
// but through it, so the audience's read in the locking statement fixes
// no snapshot that matters.
func (s *Store) fundTx(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, to hongbao.Funding, out **hongbao.Packet) error {
	if err := fence.Lock(ctx, tx, s.set, id.Bucket()); err != nil {
		return err
	}
	p, err := scanAudienced(tx.QueryRowContext(ctx, selectAudienced(t.DB(), t.Packets())+" WHERE id = ? FOR UPDATE", id))
	*out = p
	if err != nil || p.Funding != hongbao.Pending {
		return err
	}
	p.Funding = to
	if _, err := tx.ExecContext(ctx, "UPDATE "+t.Packets()+" SET funding = ? WHERE id = ?", to, id); err != nil {
		return err
	}
	if to == hongbao.Funded {
		// packet.sent commits with the funding, never without it.
		if err := s.insertEvents(ctx, tx, s.now(), sentEvent(p)); err != nil {
			return err
		}
	}
	if to == hongbao.Cancelled {
		if _, err := tx.ExecContext(ctx, "DELETE FROM hb_set.expiry WHERE packet_id = ?", id); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, "DELETE FROM hb_set.pending WHERE packet_id = ?", id)
	return err
}

// Close ends an expired packet: in a transaction serialised with its opens
// (it locks the same row) it marks the packet closed and writes the refund
// of what is left to the outbox. An open after it answers expired. It
// returns whether it settled the packet's expiry (false when it is not due
// yet or still pending) and the amount refunded.
func (s *Store) Close(ctx context.Context, id hongbao.PacketID) (bool, int64, error) {
	t := s.Table(id)
	var refund int64
	var done bool
	err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		refund, done = 0, false
		now := s.now() // fixed for the whole transaction
		if err := fence.Lock(ctx, tx, s.set, id.Bucket()); err != nil {
			return err
		}
		p, err := scanPacket(tx.QueryRowContext(ctx, selectPacket+t.Packets()+" WHERE id = ? FOR UPDATE", id))
		if errors.Is(err, hongbao.ErrNotFound) {
			done = true
			_, err = tx.ExecContext(ctx, "DELETE FROM hb_set.expiry WHERE packet_id = ?", id)
			return err
		}
		if err != nil {
			return err
		}
		if now.Before(p.ExpiresAt) || p.Funding == hongbao.Pending {
			return nil // not yet: the sweeper settles pending ones first
		}
		if !p.Closed && p.Funding == hongbao.Funded && p.RemainingCount > 0 {
			refund = p.RemainingAmount
			if _, err := tx.ExecContext(ctx, "UPDATE "+t.Packets()+" SET closed = 1 WHERE id = ?", id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name) VALUES (?,?,?,?,?,?,?)",
				hongbao.RefundKey(id), p.Sender, refund, hongbao.KindRefund, id, now.UTC(), s.set); err != nil {
				return err
			}
			if err := s.insertEvents(ctx, tx, now, newEvent{EventExpired, id,
				fmt.Sprintf(`{"packet":"%s","sender":"%s","refund":%d}`, id, p.Sender, refund)}); err != nil {
				return err
			}
		}
		done = true
		_, err = tx.ExecContext(ctx, "DELETE FROM hb_set.expiry WHERE packet_id = ?", id)
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("store: close %s: %w", id, err)
	}
	return done, refund, nil
}

// Due lists up to limit packets of the table ("expiry" or "pending") whose
// time column is before t, of buckets the SET's fence holds and the
// Ownership trusts (WithOwnership): a bucket moved away takes its marks
// along (the move copies them), and its new owner settles them; this SET's
// transactions would fail wrong_set. A bucket only claimed here (a mover
// died after its claim, the source kept the bucket) is not this SET's to
// settle: its copy is stale. The fence is read with a plain semi-join, no
// lock: Close and Fund check it again under their transaction's lock.
func (s *Store) Due(ctx context.Context, table string, t time.Time, limit int) ([]hongbao.PacketID, error) {
	col := map[string]string{"expiry": "expires_at", "pending": "created_at"}[table]
	if col == "" {
		return nil, fmt.Errorf("store: no due list %q", table)
	}
	owned, err := s.trusted(ctx)
	if err != nil || len(owned) == 0 {
		return nil, err
	}
	args := []any{t.UTC(), s.set}
	for b := range owned {
		args = append(args, int(b))
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, "SELECT m.packet_id FROM hb_set."+table+" m WHERE m."+col+" <= ?"+
		" AND EXISTS (SELECT 1 FROM hb_fence.owned f WHERE f.set_name = ? AND f.bucket = (m.packet_id >> 12) & 1023)"+
		" AND (m.packet_id >> 12) & 1023 IN ("+sqldb.Placeholders(len(owned), "?")+")"+
		" ORDER BY m."+col+" LIMIT ?", args...)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("store: due %s: %w", table, err)
	}
	defer rows.Close()
	var ids []hongbao.PacketID
	for rows.Next() {
		var id hongbao.PacketID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: due %s: %w", table, err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// OutboxRow is a wallet entry waiting for delivery. The credits a packed
// row holds are as many OutboxRows with its ID: the row is delivered once
// all of them are.
type OutboxRow struct {
	ID    int64
	Entry hongbao.Entry
	// Bad is why the row could not be read as entries (a packed row not as
	// written: never expected); Entry is then the row's own columns.
	Bad error
}

// Outbox returns the undelivered entries of the SET (and rows written
// before the outbox named its SETs), oldest first, of whole rows until
// there are limit entries (a row of more than limit comes whole), but for
// the rows skip names (a settler's rows set aside as undeliverable). Each
// part of the union (the SET's rows, its packed rows, the unnamed ones)
// reads the by_set index in order, so however long the backlog no more
// than 3 x (limit + len(skip)) rows are read.
func (s *Store) Outbox(ctx context.Context, limit int, skip ...int64) ([]OutboxRow, error) {
	not := ""
	if len(skip) > 0 {
		not = " AND id NOT IN (" + sqldb.Placeholders(len(skip), "?") + ")"
	}
	part := "(SELECT " + outboxCols + " FROM hb_set.outbox WHERE set_name = ?" + not + " ORDER BY id LIMIT ?)"
	names := append(ownNames(s.set), "")
	args := make([]any, 0, len(names)*(2+len(skip))+1)
	for _, name := range names {
		args = append(args, name)
		for _, id := range skip {
			args = append(args, id)
		}
		args = append(args, limit)
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, strings.Repeat(part+" UNION ALL ", len(names)-1)+part+" ORDER BY id LIMIT ?", args...)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxRow
	for len(out) < limit && rows.Next() {
		var r outboxRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("store: outbox: %w", err)
		}
		es, err := r.entries()
		if err != nil {
			out = append(out, OutboxRow{ID: r.id, Entry: r.entry, Bad: err})
			continue
		}
		for _, e := range es {
			out = append(out, OutboxRow{ID: r.id, Entry: e})
		}
	}
	return out, rows.Err()
}

// Delivered removes outbox rows the wallet has recorded, of the SET's
// own (or unnamed) rows only.
func (s *Store) Delivered(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	del := "DELETE FROM hb_set.outbox WHERE id IN (" + sqldb.Placeholders(len(ids), "?") + ") AND " + ownRows
	var err error
	if !s.events {
		_, err = s.db.ExecContext(ctx, del, append(args, ownNames(s.set)...)...)
	} else { // packet.refunded commits with the record of the refund's delivery
		err = sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
			if err := s.refundedEvents(ctx, tx, args); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, del, append(args, ownNames(s.set)...)...)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("store: outbox delivered: %w", err)
	}
	return nil
}
