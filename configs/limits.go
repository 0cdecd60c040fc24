package configs

import (
	"errors"
	"fmt"
)

// Limits bound what a sender may create (fen, shares, time).
type Limits struct {
	MaxTotal    int64    `yaml:"max_total"`
	MaxCount    int      `yaml:"max_count"`
	MaxShare    int64    `yaml:"max_share"`
	Expiry      Duration `yaml:"expiry"`
	MaxGreeting int      `yaml:"max_greeting"`
	// MaxAudience is the most users a send's audience may name.
	MaxAudience int `yaml:"max_audience"`
	// The daily limits per user, over days of the cluster's time zone
	// (timezone); 0 is none. An operator may set other values for one
	// user (hbctl limits set), kept in the wallet database.
	DailySendCount    int64 `yaml:"daily_send_count"`    // packets sent
	DailySendTotal    int64 `yaml:"daily_send_total"`    // fen sent
	DailyReceiveTotal int64 `yaml:"daily_receive_total"` // fen received
}

// check validates the limits: each problem found, in the order written.
func (l Limits) check() []error {
	var errs []error
	if l.MaxTotal <= 0 || l.MaxCount <= 0 || l.Expiry <= 0 || l.MaxShare < 0 || l.MaxGreeting < 0 {
		errs = append(errs, errors.New("limits: max_total, max_count and expiry must be positive, max_share and max_greeting not negative"))
	}
	if l.MaxAudience < 1 || l.DailySendCount < 0 || l.DailySendTotal < 0 || l.DailyReceiveTotal < 0 {
		errs = append(errs, errors.New("limits: max_audience must be positive, daily_send_count, daily_send_total and daily_receive_total not negative (0: none)"))
	}
	if l.MaxTotal > maxTotal || l.MaxCount > 1_000_000 {
		// Keeps every draw's 2*remaining far from int64 overflow.
		errs = append(errs, fmt.Errorf("limits: max_total must be at most %d fen and max_count at most 1000000", int64(maxTotal)))
	}
	return errs
}
