package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/metrics"
)

// Audit is the last money audit the board ran in process (Deps.Audit:
// store/audit, what hbctl verify prints), on an operator's request or
// every dashboard.audit_every.
type Audit struct {
	At         time.Time `json:"at,omitzero"` // when it started; absent while the first runs
	TookS      float64   `json:"took_s"`
	OK         bool      `json:"ok"`
	Count      int       `json:"violation_count"`
	Violations []string  `json:"violations,omitempty"` // the first auditShown
	Error      string    `json:"error,omitempty"`      // it could not complete
	LastOK     time.Time `json:"last_ok,omitzero"`     // the last that passed
	Running    bool      `json:"running"`              // one runs now
}

// auditShown is how many violations the board keeps of one audit: the
// first name the trouble, hbctl verify prints them all.
const auditShown = 20

// auditTimeout bounds one audit: it reads every SET in a snapshot.
const auditTimeout = 5 * time.Minute

// RunAudit runs the money audit now, unless one runs already, and returns
// the board's last result; ran is false when another was running (its
// result is the one before). Without Deps.Audit it returns nil.
func (b *Board) RunAudit(ctx context.Context) (a *Audit, ran bool) {
	if b.d.Audit == nil {
		return nil, false
	}
	if !b.auditing.TryLock() {
		return b.LastAudit(), false
	}
	defer b.auditing.Unlock()
	b.setAudit(func(a *Audit) { a.Running = true })
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	start := b.d.Now()
	bad, err := b.d.Audit(ctx)
	b.setAudit(func(a *Audit) {
		*a = Audit{At: start, TookS: b.d.Now().Sub(start).Seconds(), Count: len(bad),
			Violations: bad[:min(len(bad), auditShown)], LastOK: a.LastOK}
		if err != nil {
			a.Error = err.Error()
		}
		if a.OK = err == nil && len(bad) == 0; a.OK {
			a.LastOK = start
		}
	})
	return b.LastAudit(), true
}

// LastAudit is a copy of the last result (Running while one runs), nil
// before the first.
func (b *Board) LastAudit() *Audit {
	b.amu.Lock()
	defer b.amu.Unlock()
	if b.audit == nil {
		return nil
	}
	a := *b.audit
	return &a
}

func (b *Board) setAudit(f func(*Audit)) {
	b.amu.Lock()
	defer b.amu.Unlock()
	if b.audit == nil {
		b.audit = &Audit{}
	}
	f(b.audit)
}

// AuditEvery runs the audit every d until ctx ends (the first right
// away); d <= 0 runs none.
func (b *Board) AuditEvery(ctx context.Context, d time.Duration) {
	if d <= 0 || b.d.Audit == nil {
		return
	}
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		b.RunAudit(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serveAudit is POST /dashboard/audit: one audit now, answered with its
// result; 409 audit_running while another runs, 404 audit_off without
// one configured.
func (b *Board) serveAudit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	a, ran := b.RunAudit(r.Context())
	switch {
	case b.d.Audit == nil:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": "audit_off", "message": "this router runs no audit in process"})
	case !ran:
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": "audit_running", "message": "an audit runs already", "audit": a})
	default:
		_ = json.NewEncoder(w).Encode(a) // the client went away
	}
}

// Register registers the in-process audit's gauges, read at scrape time:
// whether the last passed (-1 before the first), its violations, when it
// ran and when one last passed (0: never). Alert on hongbao_audit_ok == 0,
// or on the last success growing old.
func (b *Board) Register(reg prometheus.Registerer) {
	read := func(f func(a *Audit) float64, none float64) func() float64 {
		return func() float64 {
			if a := b.LastAudit(); a != nil && !a.At.IsZero() {
				return f(a)
			}
			return none
		}
	}
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	for _, g := range []struct {
		name, help string
		read       func() float64
	}{
		{"hongbao_audit_ok", "1 when the last money audit run in this process passed, 0 when it found violations or failed, -1 before the first.",
			read(func(a *Audit) float64 {
				if a.OK {
					return 1
				}
				return 0
			}, -1)},
		{"hongbao_audit_violations", "Violations the last money audit run in this process found.",
			read(func(a *Audit) float64 { return float64(a.Count) }, 0)},
		{"hongbao_audit_last_run_timestamp_seconds", "Unix time the last money audit run in this process started (0: none yet).",
			read(func(a *Audit) float64 { return unix(a.At) }, 0)},
		{"hongbao_audit_last_success_timestamp_seconds", "Unix time the last money audit that passed started (0: none yet).",
			read(func(a *Audit) float64 { return unix(a.LastOK) }, 0)},
	} {
		metrics.Gauge(reg, g.name, g.help, g.read)
	}
}
