package configs

import "go.uber.org/zap/zapcore"

// MoneyLogger is the name of the logger of money lines (a share opened, a
// sender debited, credits delivered): Logger writes them at info whatever
// log_level says, unsampled, so that raising the level to quiet a busy
// process never drops the trail of who was paid what. Name a logger with
// log.Named(configs.MoneyLogger).
const MoneyLogger = "money"

// MoneyCore wraps core (enabled from info) so that it writes the money
// lines at info and above and every other entry at level and above, as
// Logger's does: for a logger built elsewhere (a benchmark's, to a file).
func MoneyCore(core zapcore.Core, level zapcore.Level) zapcore.Core {
	return moneyCore{Core: core, level: level}
}

// moneyCore lets the money lines through at info and above; every other
// entry needs the configured level.
type moneyCore struct {
	zapcore.Core
	level zapcore.Level
}

func (c moneyCore) Enabled(l zapcore.Level) bool {
	return l >= c.level || l >= zapcore.InfoLevel
}

func (c moneyCore) With(fields []zapcore.Field) zapcore.Core {
	return moneyCore{Core: c.Core.With(fields), level: c.level}
}

func (c moneyCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level >= c.level || (e.LoggerName == MoneyLogger && e.Level >= zapcore.InfoLevel) {
		return c.Core.Check(e, ce)
	}
	return ce
}
