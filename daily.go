package hongbao

import (
	"fmt"
	"time"
)

// DailyLimits bound what one user may send and receive in a day of the
// cluster's time zone; 0 means no limit. Amounts are in fen.
type DailyLimits struct {
	SendCount    int64 // packets sent
	SendTotal    int64 // fen sent
	ReceiveTotal int64 // fen received
}

// LimitOverride is what an operator set for one user: each field set
// replaces the configured limit (0 in it: no limit), each nil keeps it.
type LimitOverride struct {
	SendCount, SendTotal, ReceiveTotal *int64
}

// With returns l with o's fields in place of its own.
func (l DailyLimits) With(o LimitOverride) DailyLimits {
	pick := func(v int64, o *int64) int64 {
		if o != nil {
			return *o
		}
		return v
	}
	return DailyLimits{SendCount: pick(l.SendCount, o.SendCount), SendTotal: pick(l.SendTotal, o.SendTotal),
		ReceiveTotal: pick(l.ReceiveTotal, o.ReceiveTotal)}
}

// DailyUsage is what a user sent and received in one day.
type DailyUsage struct {
	SendCount, SendTotal, ReceiveTotal int64
}

// The names of the daily limits, as configured and as a LimitError says.
const (
	LimitSendCount    = "daily_send_count"
	LimitSendTotal    = "daily_send_total"
	LimitReceiveTotal = "daily_receive_total"
)

// ErrDailyLimit is the code of every LimitError.
var ErrDailyLimit = &Error{"daily_limit", "a daily limit of the user would be passed"}

// LimitError refuses a send or an open that would pass one of the user's
// daily limits: which one, its value, and when the day's usage resets.
type LimitError struct {
	Name     string // LimitSendCount, LimitSendTotal or LimitReceiveTotal
	Value    int64
	ResetsAt time.Time
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("daily_limit: %s of %d reached until %s", e.Name, e.Value, e.ResetsAt.Format(time.RFC3339))
}

// Unwrap makes a LimitError an ErrDailyLimit (its code, its status).
func (e *LimitError) Unwrap() error { return ErrDailyLimit }

// Day is one day of the cluster's time zone: the date its usage is kept
// under and the instant it ends, when the usage resets.
type Day struct {
	Date time.Time // midnight, as a DATE column holds it
	Ends time.Time // the next midnight
}

// DayOf returns the day of loc that t falls in. A day is a calendar day
// (23 or 25 hours across a daylight saving change), so Ends is computed
// by date, not by adding 24 hours.
func DayOf(t time.Time, loc *time.Location) Day {
	y, m, d := t.In(loc).Date()
	return Day{Date: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), Ends: time.Date(y, m, d+1, 0, 0, 0, 0, loc)}
}

// CheckSend refuses a send when u, the day's usage counting the send
// itself, passes a send limit of l.
func (l DailyLimits) CheckSend(u DailyUsage, day Day) error {
	switch {
	case l.SendCount > 0 && u.SendCount > l.SendCount:
		return &LimitError{LimitSendCount, l.SendCount, day.Ends}
	case l.SendTotal > 0 && u.SendTotal > l.SendTotal:
		return &LimitError{LimitSendTotal, l.SendTotal, day.Ends}
	}
	return nil
}

// CheckReceive refuses an open when u, the day's receipts counting the
// open's reservation, passes l's receive limit.
func (l DailyLimits) CheckReceive(u DailyUsage, day Day) error {
	if l.ReceiveTotal > 0 && u.ReceiveTotal > l.ReceiveTotal {
		return &LimitError{LimitReceiveTotal, l.ReceiveTotal, day.Ends}
	}
	return nil
}
