package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// MoneyBetween returns the moves of money the SET's records (its day
// tables and, with WithArchive, its archive) date in [from, to), each as
// the ledger entry it calls for (At: the record's time): the debit of every
// funded packet created in it, the credit of every share opened in it,
// and the refund of every closed packet with a rest whose expiry is in it.
// Packets created before since are not read: since is from less the
// longest expiry, so none of them has a share or an expiry in the period.
// inFlight are the keys of the outbox rows read after the records: a move
// recorded but neither in the outbox then nor in a ledger read afterwards
// was lost (the daily statement's check from the SETs' side). unreadable
// names the outbox rows whose credits do not read (a packed row not as
// written, which the settlers set aside): their keys are unknown, so they
// are the statement's to report, not a reason to make none.
func (s *Store) MoneyBetween(ctx context.Context, from, to, since time.Time) (moves []hongbao.Entry, inFlight map[string]bool, unreadable []error, err error) {
	days := map[string]bool{} // the live tables' days of the month and the archive's dates
	for d := since.In(s.loc); d.Before(to); d = d.AddDate(0, 0, 1) {
		days[fmt.Sprintf("_%02d", d.Day())], days["_"+d.Format("20060102")] = true, true
	}
	cold := s.cold
	if cold == nil {
		cold = s.db // no archive: its pattern finds no table there
	}
	err = walkTables(ctx, s.db, cold, nil, func(q querier, t string, _ map[int64]bool) error {
		if !days[t[strings.LastIndex(t, "_"):]] {
			return nil
		}
		got, err := moneyIn(ctx, q, t, from, to, since)
		moves = append(moves, got...)
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: money of %s: %w", s.set, err)
	}
	inFlight = map[string]bool{}
	rows, err := s.db.QueryContext(ctx, "SELECT "+outboxCols+" FROM hb_set.outbox")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: money of %s: outbox: %w", s.set, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r outboxRow
		if err := r.scan(rows); err != nil {
			return nil, nil, nil, fmt.Errorf("store: money of %s: outbox: %w", s.set, err)
		}
		es, err := r.entries()
		if err != nil {
			// Named by the row alone: SETs sharing a MySQL all read it,
			// and the statement counts it once.
			unreadable = append(unreadable, fmt.Errorf("%w; the row says %d fen under key %s", err, r.entry.Amount, r.entry.Key))
			continue
		}
		for _, e := range es {
			inFlight[e.Key] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("store: money of %s: outbox: %w", s.set, err)
	}
	return moves, inFlight, unreadable, nil
}

// moneyIn reads table t's moves of [from, to) (see MoneyBetween): one
// query over the packets created from since (a primary-key range), their
// shares joined.
func moneyIn(ctx context.Context, q querier, t string, from, to, since time.Time) ([]hongbao.Entry, error) {
	lo, hi := idAt(since), idAt(to)
	f, e := from.UTC(), to.UTC()
	rows, err := q.QueryContext(ctx, `SELECT ?, id, sender, -total, created_at FROM `+t+` WHERE id >= ? AND id < ? AND funding = ? AND created_at >= ? AND created_at < ?
		UNION ALL SELECT ?, packet_id, user_id, amount, opened_at FROM `+t+`_detail WHERE packet_id >= ? AND packet_id < ? AND opened_at >= ? AND opened_at < ?
		UNION ALL SELECT ?, id, sender, remaining_amount, expires_at FROM `+t+` WHERE id >= ? AND id < ? AND closed = 1 AND remaining_amount > 0 AND expires_at >= ? AND expires_at < ?`,
		hongbao.KindSend, lo, hi, hongbao.Funded, f, e,
		hongbao.KindOpen, lo, hi, f, e,
		hongbao.KindRefund, lo, hi, f, e)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hongbao.Entry
	for rows.Next() {
		var m hongbao.Entry
		if err := rows.Scan(&m.Kind, &m.Packet, &m.User, &m.Amount, &m.At); err != nil {
			return nil, err
		}
		switch m.Kind {
		case hongbao.KindSend:
			m.Key = hongbao.SendKey(m.Packet)
		case hongbao.KindOpen:
			m.Key = hongbao.OpenKey(m.Packet, m.User)
		default:
			m.Key = hongbao.RefundKey(m.Packet)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
