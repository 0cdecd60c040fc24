package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hongbao-dev/hongbao/api"
)

// BenchmarkLogged is the request logging every request of the router and
// the servers passes, with a handler that adds a field as theirs do, at
// the level the benchmarks run (warn: no line) and the default (info).
func BenchmarkLogged(b *testing.B) {
	for _, lvl := range []zapcore.Level{zapcore.WarnLevel, zapcore.InfoLevel} {
		b.Run(lvl.String(), func(b *testing.B) {
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), lvl)
			h := api.Logged(zap.New(core), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.AddField(r.Context(), zap.Int64("user", 42))
			}))
			r := httptest.NewRequest(http.MethodPost, "/v1/ping", nil)
			r.Header.Set(api.RequestIDHeader, "0123456789abcdef")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
