package configs

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestClockOffsetFlag: -clock-offset takes signed durations, defaults to
// 0, and an unparsable value is an error that names the flag.
func TestClockOffsetFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  string
	}{
		{nil, 0, ""},
		{[]string{"-clock-offset", "5m"}, 5 * time.Minute, ""},
		{[]string{"-clock-offset=-5m"}, -5 * time.Minute, ""},
		{[]string{"-clock-offset", "five"}, 0, `invalid value "five" for flag -clock-offset: not a duration such as 5m or -5m`},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		got := ClockOffsetFlag(fs)
		err := fs.Parse(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || *got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.args, *got, err, tc.want)
		}
	}
}

// TestClockShifts: a zero offset is the real clock, unlogged; another is
// the real clock shifted by it, with one warning.
func TestClockShifts(t *testing.T) {
	for _, offset := range []time.Duration{0, 5 * time.Minute, -7 * time.Minute} {
		obs, logs := observer.New(zapcore.InfoLevel)
		now := Clock(offset, zap.New(obs))
		before := time.Now()
		got := now()
		after := time.Now()
		if got.Before(before.Add(offset)) || got.After(after.Add(offset)) {
			t.Errorf("offset %v: %v not within [%v, %v]", offset, got, before.Add(offset), after.Add(offset))
		}
		if want := map[bool]int{true: 0, false: 1}[offset == 0]; logs.Len() != want {
			t.Errorf("offset %v: %d log lines, want %d", offset, logs.Len(), want)
		}
	}
}
