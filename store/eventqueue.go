package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const eventCols = "id, event_key, type, packet_id, data, created_at, attempts, next_at, delivered_to, last_error, state"

func scanEvents(rows *sql.Rows) ([]Event, error) {
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Row, &e.ID, &e.Type, &e.Packet, &e.Data, &e.CreatedAt, &e.Attempts, &e.NextAt,
			&e.DeliveredTo, &e.LastError, &e.Failed); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ClaimEvents takes up to limit events of the SET for a lease: their next
// attempt is moved to now+lease, so another deliverer of the SET skips
// them (SKIP LOCKED while this one claims) and a deliverer killed
// meanwhile leaves them due again when the lease ends. It takes the first
// pending (not failed) event of each packet that is due at now, then, with
// the room left, the pending events that follow them in their packets, a
// prefix of each packet's in ID order. A packet's events are therefore
// sent in order: one waits while an earlier one is pending.
func (s *Store) ClaimEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Event, error) {
	var out []Event
	err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		at := now.UTC().Truncate(time.Millisecond)
		rows, err := tx.QueryContext(ctx, "SELECT "+eventCols+" FROM hb_set.events e WHERE set_name = ? AND state = 0 AND next_at <= ?"+
			" AND NOT EXISTS (SELECT 1 FROM hb_set.events b WHERE b.packet_id = e.packet_id AND b.id < e.id AND b.state = 0 AND b.set_name = e.set_name)"+
			" ORDER BY next_at, id LIMIT ? FOR UPDATE SKIP LOCKED", s.set, at, limit)
		if err != nil {
			return err
		}
		if out, err = scanEvents(rows); err != nil || len(out) == 0 {
			return err
		}
		if out, err = s.followers(ctx, tx, out, limit); err != nil {
			return err
		}
		args := []any{at.Add(lease)}
		for _, e := range out {
			args = append(args, e.Row)
		}
		_, err = tx.ExecContext(ctx, "UPDATE hb_set.events SET next_at = ? WHERE id IN ("+sqldb.Placeholders(len(out), "?")+")", args...)
		return err
	})
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("store: claim events: %w", err)
	}
	return out, nil
}

// followers appends to firsts (each the first pending event of its packet)
// up to limit-len(firsts) of the pending events after them in their
// packets, smallest IDs first: so what it takes of a packet is a prefix of
// its events in order.
func (s *Store) followers(ctx context.Context, tx *sql.Tx, firsts []Event, limit int) ([]Event, error) {
	room := limit - len(firsts)
	if room <= 0 {
		return firsts, nil
	}
	args := []any{s.set}
	for _, e := range firsts {
		args = append(args, e.Packet)
	}
	for _, e := range firsts {
		args = append(args, e.Row)
	}
	args = append(args, room)
	rows, err := tx.QueryContext(ctx, "SELECT "+eventCols+" FROM hb_set.events WHERE set_name = ? AND state = 0 AND packet_id IN ("+
		sqldb.Placeholders(len(firsts), "?")+") AND id NOT IN ("+sqldb.Placeholders(len(firsts), "?")+") ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED", args...)
	if err != nil {
		return nil, err
	}
	more, err := scanEvents(rows)
	return append(firsts, more...), err
}

// EventsDelivered deletes events every endpoint accepted.
func (s *Store) EventsDelivered(ctx context.Context, rows []int64) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, len(rows)+1)
	for _, r := range rows {
		args = append(args, r)
	}
	args = append(args, s.set)
	if _, err := s.db.ExecContext(ctx, "DELETE FROM hb_set.events WHERE id IN ("+sqldb.Placeholders(len(rows), "?")+") AND set_name = ?", args...); err != nil {
		return fmt.Errorf("store: events delivered: %w", err)
	}
	return nil
}

// EventRetry records a failed attempt of e: e's Attempts, NextAt,
// DeliveredTo, LastError and Failed as the deliverer set them.
func (s *Store) EventRetry(ctx context.Context, e Event) error {
	if len(e.LastError) > 255 {
		e.LastError = e.LastError[:255]
	}
	_, err := s.db.ExecContext(ctx, "UPDATE hb_set.events SET attempts = ?, next_at = ?, delivered_to = ?, last_error = ?, state = ? WHERE id = ? AND set_name = ?",
		e.Attempts, e.NextAt.UTC(), e.DeliveredTo, e.LastError, e.Failed, e.Row, s.set)
	if err != nil {
		return fmt.Errorf("store: event %s retry: %w", e.ID, err)
	}
	return nil
}

// ReleaseEvents makes claimed events due at now again, untried: those a
// round did not reach because an earlier event of their packet failed.
func (s *Store) ReleaseEvents(ctx context.Context, rows []int64, now time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	args := []any{now.UTC()}
	for _, r := range rows {
		args = append(args, r)
	}
	args = append(args, s.set)
	if _, err := s.db.ExecContext(ctx, "UPDATE hb_set.events SET next_at = ? WHERE id IN ("+sqldb.Placeholders(len(rows), "?")+") AND set_name = ?", args...); err != nil {
		return fmt.Errorf("store: release events: %w", err)
	}
	return nil
}

// EventFilter selects events for hbctl webhook list and replay; zero
// fields select all.
type EventFilter struct {
	Failed  *bool // pending (false) or failed (true) only
	Type    string
	Packet  hongbao.PacketID
	ID      string // an event ID
	Limit   int    // list only; 0: 100
	FromRow int64  // list only: rows after this one
}

func (f EventFilter) where(set string) (string, []any) {
	w, args := []string{"set_name = ?"}, []any{set}
	if f.Failed != nil {
		w, args = append(w, "state = ?"), append(args, *f.Failed)
	}
	if f.Type != "" {
		w, args = append(w, "type = ?"), append(args, f.Type)
	}
	if f.Packet != 0 {
		w, args = append(w, "packet_id = ?"), append(args, f.Packet)
	}
	if f.ID != "" {
		w, args = append(w, "event_key = ?"), append(args, f.ID)
	}
	if f.FromRow != 0 {
		w, args = append(w, "id > ?"), append(args, f.FromRow)
	}
	return strings.Join(w, " AND "), args
}

// Events lists the SET's undelivered events that f selects, oldest first.
func (s *Store) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	where, args := f.where(s.set)
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+eventCols+" FROM hb_set.events WHERE "+where+" ORDER BY id LIMIT ?", append(args, f.Limit)...)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("store: events: %w", err)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	return out, nil
}

// ReplayEvents makes the failed events f selects pending again, due at
// now with their attempts reset (a day of retries anew), and returns how
// many it changed.
func (s *Store) ReplayEvents(ctx context.Context, f EventFilter, now time.Time) (int64, error) {
	failed := true
	f.Failed = &failed
	where, args := f.where(s.set)
	res, err := s.db.ExecContext(ctx, "UPDATE hb_set.events SET state = 0, attempts = 0, next_at = ?, last_error = '' WHERE "+where,
		append([]any{now.UTC()}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("store: replay events: %w", err)
	}
	return res.RowsAffected()
}

// EventBacklog counts the SET's pending and failed events and returns when
// the oldest pending one was written (zero when none): the webhook
// metrics.
func (s *Store) EventBacklog(ctx context.Context) (pending, failed int, oldest time.Time, err error) {
	var old sql.NullTime
	err = s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(state = 0), 0), COALESCE(SUM(state = 1), 0), MIN(IF(state = 0, created_at, NULL)) FROM hb_set.events WHERE set_name = ?",
		s.set).Scan(&pending, &failed, &old)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return 0, 0, time.Time{}, nil
		}
		return 0, 0, time.Time{}, fmt.Errorf("store: event backlog: %w", err)
	}
	return pending, failed, old.Time, nil
}
