package configs

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestMoneyLinesIgnoreTheLevel: at log_level warn a plain info line is
// dropped and the money lines are written, at info and above, with their
// fields; debug money lines are not.
func TestMoneyLinesIgnoreTheLevel(t *testing.T) {
	obs, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(moneyCore{Core: obs, level: zapcore.WarnLevel}).With(zap.String("process", "hbserver"))
	money := log.Named(MoneyLogger)
	log.Info("plain info")
	money.Info("share opened", zap.Int64("amount", 123))
	money.Debug("money debug")
	log.Warn("plain warn")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	want := []string{"share opened", "plain warn"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("written %q, want %q", got, want)
	}
	if f := logs.All()[0].ContextMap(); f["amount"] != int64(123) || f["process"] != "hbserver" {
		t.Errorf("the money line's fields: %v", f)
	}
}
