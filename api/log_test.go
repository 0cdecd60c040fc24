package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestLogFailure: outside a request logged by Logged (which carries the
// cause on its own line: TestEvery5xxCauseLogged), a server fault is logged
// at error level, a 503 (busy, unavailable) at warn; a client's error not
// at all.
func TestLogFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		level zapcore.Level
		n     int
	}{
		{"fault", errors.New("boom"), zap.ErrorLevel, 1},
		{"busy", fmt.Errorf("open: %w", hongbao.ErrBusy), zap.WarnLevel, 1},
		{"moving", fmt.Errorf("open: %w", hongbao.ErrMoving), zap.WarnLevel, 1},
		{"unavailable", hongbao.ErrUnavailable, zap.WarnLevel, 1},
		{"sold out", hongbao.ErrSoldOut, 0, 0},
		{"client gone", hongbao.ErrClientClosed, 0, 0},
	} {
		core, logs := observer.New(zap.DebugLevel)
		LogFailure(context.Background(), zap.New(core), tc.err)
		all := logs.All()
		if len(all) != tc.n {
			t.Errorf("%s: %d log lines, want %d", tc.name, len(all), tc.n)
			continue
		}
		if tc.n == 1 && (all[0].Level != tc.level || all[0].ContextMap()["error"] != tc.err.Error()) {
			t.Errorf("%s: logged %v %v, want level %v with the error", tc.name, all[0].Level, all[0].ContextMap(), tc.level)
		}
	}
}
