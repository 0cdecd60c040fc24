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

	"github.com/hongbao-dev/hongbao/metrics"
)

type ctxKey struct{}

// reqInfo travels in a request's context: its ID and the fields handlers
// learn on the way (user, packet), logged once when the request ends.
type reqInfo struct {
	id     string
	mu     sync.Mutex
	fields []zap.Field
	err    error // why a 5xx was answered (LogFailure), logged on the request's line
	// first holds the fields handlers usually add (user, packet ID), so
	// they cost no allocation of their own.
	first [2]zap.Field
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
// and logs one line per request: at info, or for a 5xx at warn (503) or
// error (any other), with its cause when LogFailure was told it.
func Logged(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if id == "" || len(id) > 64 {
			id = newID()
		}
		ri := &reqInfo{id: id}
		ri.fields = ri.first[:0]
		w.Header().Set(RequestIDHeader, id)
		sw := &metrics.StatusWriter{ResponseWriter: w, Status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri)))
		ce := log.Check(statusLevel(sw.Status), "request")
		if ce == nil {
			return // the level is off: build no line
		}
		ri.mu.Lock()
		fields := append(ri.fields, zap.String("request_id", id), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.Int("status", sw.Status), zap.Duration("took", time.Since(start)))
		if ri.err != nil {
			fields = append(fields, zap.Error(ri.err))
		}
		ri.mu.Unlock()
		ce.Write(fields...)
	})
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// statusLevel is the level of a request's line: a 503 (busy,
// unavailable: load or a dependency's outage, which clients retry) at
// warn, any other 5xx (a fault of the server, a bug to look at) at error,
// everything else at info.
func statusLevel(status int) zapcore.Level {
	switch {
	case status == http.StatusServiceUnavailable:
		return zapcore.WarnLevel
	case status >= 500:
		return zapcore.ErrorLevel
	}
	return zapcore.InfoLevel
}

// LogFailure records why a request of ctx is answered with err: for a 5xx
// the cause goes on the request's one line (Logged), at warn or error with
// its request ID and what the handlers learnt (user, packet ID), so every
// 5xx says why, even with the log at warn. Outside Logged it logs a line
// of its own. A 4xx is the client's and not logged here.
func LogFailure(ctx context.Context, log *zap.Logger, err error) {
	st := Status(err)
	if st < 500 {
		return
	}
	if ri, ok := ctx.Value(ctxKey{}).(*reqInfo); ok {
		ri.mu.Lock()
		ri.err = err
		ri.mu.Unlock()
		return
	}
	if ce := log.Check(statusLevel(st), "request failed"); ce != nil {
		ce.Write(zap.Int("status", st), zap.Error(err))
	}
}
