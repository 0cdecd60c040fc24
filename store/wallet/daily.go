package wallet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// WithDaily makes the wallet enforce the daily limits l (per user, each
// replaced by the user's override in user_limits) over days of loc: every
// send's debit counts in daily_usage in its own transaction, and refuses
// (nothing recorded) when the day's sends would pass a limit.
func (w *Wallet) WithDaily(l hongbao.DailyLimits, loc *time.Location) *Wallet {
	w.daily, w.loc = l, loc
	return w
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dateOf is a Day as the DATE column takes it, whatever the session's zone.
func dateOf(d hongbao.Day) string { return d.Date.Format(time.DateOnly) }

// countSend counts e, a send's debit, in its sender's day and refuses it
// when the day's sends would then pass a limit. The upsert takes the
// usage row's lock before the check reads it, so two sends of one user at
// once are counted one after the other: exactly one of two that would
// each fit alone passes.
func (w *Wallet) countSend(ctx context.Context, tx *sql.Tx, e hongbao.Entry) error {
	day := hongbao.DayOf(e.At, w.loc)
	if _, err := tx.ExecContext(ctx, "INSERT INTO daily_usage (user_id, day, send_count, send_total) VALUES (?,?,1,?) "+
		"ON DUPLICATE KEY UPDATE send_count = send_count + 1, send_total = send_total + VALUES(send_total)",
		e.User, dateOf(day), -e.Amount); err != nil {
		return err
	}
	u, l, err := w.usage(ctx, tx, e.User, day)
	if err != nil {
		return err
	}
	return l.CheckSend(u, day)
}

// usage reads user's usage of day (zero when none) and limits, the
// configured ones with the user's override.
func (w *Wallet) usage(ctx context.Context, q rowQuerier, user hongbao.UserID, day hongbao.Day) (hongbao.DailyUsage, hongbao.DailyLimits, error) {
	var u hongbao.DailyUsage
	var o hongbao.LimitOverride
	var sc, st, rt sql.NullInt64
	err := q.QueryRowContext(ctx, "SELECT COALESCE(d.send_count,0), COALESCE(d.send_total,0), COALESCE(d.receive_total,0), "+
		"l.daily_send_count, l.daily_send_total, l.daily_receive_total FROM (SELECT ? AS user_id) k "+
		"LEFT JOIN daily_usage d ON d.user_id = k.user_id AND d.day = ? LEFT JOIN user_limits l ON l.user_id = k.user_id",
		user, dateOf(day)).Scan(&u.SendCount, &u.SendTotal, &u.ReceiveTotal, &sc, &st, &rt)
	if err != nil {
		return u, hongbao.DailyLimits{}, err
	}
	o.SendCount, o.SendTotal, o.ReceiveTotal = ptr(sc), ptr(st), ptr(rt)
	return u, w.daily.With(o), nil
}

func ptr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

// CheckSend tells, without writing, whether a send of total by user would
// pass a daily limit now: the send's debit decides (countSend), this only
// spares a send that cannot pass its pending row.
func (w *Wallet) CheckSend(ctx context.Context, user hongbao.UserID, total int64) error {
	day := hongbao.DayOf(w.now(), w.loc)
	u, l, err := w.usage(ctx, w.db, user, day)
	if err != nil {
		return fmt.Errorf("wallet: daily usage of %s: %w", user, err)
	}
	u.SendCount++
	u.SendTotal += total
	return l.CheckSend(u, day)
}

// Reservation is an open's hold on its opener's daily receive limit.
type Reservation struct {
	User   hongbao.UserID
	Day    hongbao.Day
	Amount int64 // fen held; 0: nothing was (no limit applies)
}

// ReserveReceive holds amount fen, the most an open of user can be given,
// against user's daily_receive_total, before the open is answered: when
// the day's receipts would pass the limit it refuses with a LimitError and
// holds nothing. The open then gives back what it did not take (Settle).
// A reservation never given back (a crash between) only lowers what the
// user may still receive that day: a credit is never refused, so an
// opener told "opened" is always paid.
func (w *Wallet) ReserveReceive(ctx context.Context, user hongbao.UserID, amount int64) (Reservation, error) {
	r := Reservation{User: user, Day: hongbao.DayOf(w.now(), w.loc)}
	err := sqldb.InTx(ctx, w.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO daily_usage (user_id, day, receive_total) VALUES (?,?,?) "+
			"ON DUPLICATE KEY UPDATE receive_total = receive_total + VALUES(receive_total)", user, dateOf(r.Day), amount); err != nil {
			return err
		}
		u, l, err := w.usage(ctx, tx, user, r.Day)
		if err != nil {
			return err
		}
		return l.CheckReceive(u, r.Day)
	})
	var le *hongbao.LimitError
	switch {
	case errors.As(err, &le):
		return Reservation{}, err
	case err != nil:
		return Reservation{}, fmt.Errorf("wallet: reserve %d for %s: %w", amount, user, err)
	}
	r.Amount = amount
	return r, nil
}

// Settle gives back the part of r the open did not take (took: the share
// it opened, 0 for none).
func (w *Wallet) Settle(ctx context.Context, r Reservation, took int64) error {
	back := r.Amount - took
	if back <= 0 {
		return nil
	}
	_, err := w.db.ExecContext(ctx, "UPDATE daily_usage SET receive_total = GREATEST(receive_total - ?, 0) WHERE user_id = ? AND day = ?",
		back, r.User, dateOf(r.Day))
	if err != nil {
		return fmt.Errorf("wallet: settle the reservation of %s: %w", r.User, err)
	}
	return nil
}

// Limits returns user's override (all nil: none), the limits in force
// for them and their usage of today.
func (w *Wallet) Limits(ctx context.Context, user hongbao.UserID) (hongbao.LimitOverride, hongbao.DailyLimits, hongbao.DailyUsage, error) {
	var o hongbao.LimitOverride
	var sc, st, rt sql.NullInt64
	err := w.db.QueryRowContext(ctx, "SELECT daily_send_count, daily_send_total, daily_receive_total FROM user_limits WHERE user_id = ?",
		user).Scan(&sc, &st, &rt)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return o, hongbao.DailyLimits{}, hongbao.DailyUsage{}, fmt.Errorf("wallet: limits of %s: %w", user, err)
	}
	o.SendCount, o.SendTotal, o.ReceiveTotal = ptr(sc), ptr(st), ptr(rt)
	u, l, err := w.usage(ctx, w.db, user, hongbao.DayOf(w.now(), w.loc))
	if err != nil {
		return o, l, u, fmt.Errorf("wallet: limits of %s: %w", user, err)
	}
	return o, l, u, nil
}

// SetLimits records user's override: each field set replaces the
// user's current one, each nil leaves it as it is.
func (w *Wallet) SetLimits(ctx context.Context, user hongbao.UserID, o hongbao.LimitOverride) error {
	_, err := w.db.ExecContext(ctx, "INSERT INTO user_limits (user_id, daily_send_count, daily_send_total, daily_receive_total, updated_at) "+
		"VALUES (?,?,?,?,?) ON DUPLICATE KEY UPDATE daily_send_count = COALESCE(VALUES(daily_send_count), daily_send_count), "+
		"daily_send_total = COALESCE(VALUES(daily_send_total), daily_send_total), "+
		"daily_receive_total = COALESCE(VALUES(daily_receive_total), daily_receive_total), updated_at = VALUES(updated_at)",
		user, o.SendCount, o.SendTotal, o.ReceiveTotal, w.now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return fmt.Errorf("wallet: set limits of %s: %w", user, err)
	}
	return nil
}

// ClearLimits drops user's override: the configured limits apply again.
func (w *Wallet) ClearLimits(ctx context.Context, user hongbao.UserID) error {
	if _, err := w.db.ExecContext(ctx, "DELETE FROM user_limits WHERE user_id = ?", user); err != nil {
		return fmt.Errorf("wallet: clear limits of %s: %w", user, err)
	}
	return nil
}

// LimitsSends reports whether a send limit is configured: only then is a
// send checked before its pending row (CheckSend). The debit counts and
// checks every send all the same, a user's override included.
func (w *Wallet) LimitsSends() bool { return w.daily.SendCount > 0 || w.daily.SendTotal > 0 }

// LimitsReceipts reports whether a receive limit is configured: only then
// do opens reserve (ReserveReceive), so the open path costs nothing more
// without one.
func (w *Wallet) LimitsReceipts() bool { return w.daily.ReceiveTotal > 0 }
