package hongbao

import (
	"errors"
	"testing"
	"time"
)

func TestDayOf(t *testing.T) {
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	ny, _ := time.LoadLocation("America/New_York")
	for _, tt := range []struct {
		at        time.Time
		loc       *time.Location
		date      string
		ends      string
		endsInUTC string
	}{
		{time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC), time.UTC, "2026-11-26", "2026-11-27T00:00:00Z", "2026-11-27T00:00:00Z"},
		// 16:30 UTC is half past midnight in Shanghai: the next day already.
		{time.Date(2026, 11, 26, 16, 30, 0, 0, time.UTC), shanghai, "2026-11-27", "2026-11-28T00:00:00+08:00", "2026-11-27T16:00:00Z"},
		{time.Date(2026, 11, 26, 15, 59, 59, 0, time.UTC), shanghai, "2026-11-26", "2026-11-27T00:00:00+08:00", "2026-11-26T16:00:00Z"},
		// The day clocks go back is 25 hours long: it ends at midnight all the same.
		{time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), ny, "2026-11-01", "2026-11-02T00:00:00-05:00", "2026-11-02T05:00:00Z"},
	} {
		d := DayOf(tt.at, tt.loc)
		if got := d.Date.Format(time.DateOnly); got != tt.date {
			t.Errorf("DayOf(%s, %s).Date = %s, want %s", tt.at, tt.loc, got, tt.date)
		}
		if got := d.Ends.Format(time.RFC3339); got != tt.ends || d.Ends.UTC().Format(time.RFC3339) != tt.endsInUTC {
			t.Errorf("DayOf(%s, %s).Ends = %s (%s UTC), want %s (%s)", tt.at, tt.loc, got, d.Ends.UTC(), tt.ends, tt.endsInUTC)
		}
	}
}

func TestDailyLimitsCheck(t *testing.T) {
	day := DayOf(time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC), time.UTC)
	l := DailyLimits{SendCount: 3, SendTotal: 50000, ReceiveTotal: 20000}
	for _, tt := range []struct {
		name  string
		l     DailyLimits
		u     DailyUsage
		send  string // the limit CheckSend names, "" none
		recv  string
		value int64
	}{
		{"within", l, DailyUsage{3, 50000, 20000}, "", "", 0},
		{"fourth packet", l, DailyUsage{4, 400, 0}, LimitSendCount, "", 3},
		{"one fen over the total", l, DailyUsage{2, 50001, 0}, LimitSendTotal, "", 50000},
		{"count first", l, DailyUsage{4, 50001, 0}, LimitSendCount, "", 3},
		{"one fen over receipts", l, DailyUsage{0, 0, 20001}, "", LimitReceiveTotal, 20000},
		{"none: 0", DailyLimits{}, DailyUsage{1 << 40, 1 << 60, 1 << 60}, "", "", 0},
	} {
		check := func(what, want string, err error) {
			var le *LimitError
			switch {
			case want == "" && err != nil:
				t.Errorf("%s: %s = %v, want nil", tt.name, what, err)
			case want != "" && (!errors.As(err, &le) || le.Name != want || le.Value != tt.value || !le.ResetsAt.Equal(day.Ends)):
				t.Errorf("%s: %s = %v, want %s of %d resetting at %s", tt.name, what, err, want, tt.value, day.Ends)
			case want != "" && (!errors.Is(err, ErrDailyLimit) || Code(err) != "daily_limit"):
				t.Errorf("%s: %s = %v: not a daily_limit", tt.name, what, err)
			}
		}
		check("CheckSend", tt.send, tt.l.CheckSend(tt.u, day))
		check("CheckReceive", tt.recv, tt.l.CheckReceive(tt.u, day))
	}
}

func TestDailyLimitsWith(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	l := DailyLimits{SendCount: 10, SendTotal: 100000, ReceiveTotal: 50000}
	for _, tt := range []struct {
		o    LimitOverride
		want DailyLimits
	}{
		{LimitOverride{}, l},
		{LimitOverride{SendTotal: v(500000)}, DailyLimits{10, 500000, 50000}},
		{LimitOverride{SendCount: v(0), ReceiveTotal: v(1)}, DailyLimits{0, 100000, 1}},
	} {
		if got := l.With(tt.o); got != tt.want {
			t.Errorf("With(%+v) = %+v, want %+v", tt.o, got, tt.want)
		}
	}
}
