package configs

import (
	"errors"
	"flag"
	"time"

	"go.uber.org/zap"
)

// clockOffsetUsage is the -clock-offset flag's help, the same in every
// command that takes it.
const clockOffsetUsage = "fault injection for tests and chaos, never for production: shift this process's wall clock " +
	"by `DURATION` (e.g. 5m, -5m) wherever its times reach another host (rows it writes, signatures, epochs); " +
	"durations measured on this host keep the real clock"

// ClockOffsetFlag defines the -clock-offset flag on fs (default 0). It
// is a flag and never an environment variable so that a skewed process
// is visible on its command line; fs reports an unparsable value as an
// error naming the flag.
func ClockOffsetFlag(fs *flag.FlagSet) *time.Duration {
	var offset time.Duration
	fs.Func("clock-offset", clockOffsetUsage+" (default 0)", func(v string) (err error) {
		if offset, err = time.ParseDuration(v); err != nil {
			return errors.New("not a duration such as 5m or -5m")
		}
		return nil
	})
	return &offset
}

// Clock returns the wall clock of a process whose -clock-offset is
// offset: time.Now itself when offset is 0, else time.Now shifted by it
// (a host whose clock is off, for the tests and the chaos run of clock
// skew). A non-zero offset is logged as a warning on log, once.
func Clock(offset time.Duration, log *zap.Logger) func() time.Time {
	if offset == 0 {
		return time.Now
	}
	log.Warn("clock skewed on purpose (-clock-offset): every time this process stamps for another host is off by the offset",
		zap.Duration("clock_offset", offset))
	return func() time.Time { return time.Now().Add(offset) }
}
