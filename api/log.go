package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type ctxKey struct{}

// reqInfo travels in a request's context: its ID and the fields handlers
// learn on the way (user, packet), logged once when the request ends.
type reqInfo struct {
	id     string
	mu     sync.Mutex
	fields []zap.Field
}

// RequestID returns the request ID of ctx, or "".
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(ctxKey{}).(*reqInfo); ok {
		return ri.id
	}
	return ""
}

// AddField attaches a log field to the request of ctx.
func AddField(ctx context.Context, f zap.Field) {
	if ri, ok := ctx.Value(ctxKey{}).(*reqInfo); ok {
		ri.mu.Lock()
		ri.fields = append(ri.fields, f)
		ri.mu.Unlock()
	}
}

// RequestIDHeader carries the request ID across router and servers.
const RequestIDHeader = "X-Request-Id"

// Logged gives every request an ID (the caller's X-Request-Id when it is
// sane, so one ID follows a request through router and server), echoes it,
// and logs one line per request.
func Logged(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if id == "" || len(id) > 64 {
			id = newID()
		}
		ri := &reqInfo{id: id}
		w.Header().Set(RequestIDHeader, id)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri)))
		lvl := zapcore.InfoLevel
		if sw.status >= 500 && sw.status != http.StatusServiceUnavailable {
			lvl = zapcore.ErrorLevel
		}
		ce := log.Check(lvl, "request")
		if ce == nil {
			return // the level is off: build no line
		}
		ri.mu.Lock()
		fields := append(ri.fields, zap.String("request_id", id), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.Int("status", sw.status), zap.Duration("took", time.Since(start)))
		ri.mu.Unlock()
		ce.Write(fields...)
	})
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath (to flush a
// streamed answer).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LogFailure logs a request's error answer: a fault of the server (5xx) at
// error level, each one a bug to look at; a 503 (busy, unavailable: load
// or a dependency's outage, which clients retry and the metrics count) at
// debug level, so an overload does not flood the log with non-faults. A
// 4xx is the client's and not logged here.
func LogFailure(log *zap.Logger, requestID string, err error) {
	switch st := Status(err); {
	case st == http.StatusServiceUnavailable:
		log.Debug("request answered unavailable", zap.String("request_id", requestID), zap.Error(err))
	case st >= 500:
		log.Error("request failed", zap.String("request_id", requestID), zap.Error(err))
	}
}
