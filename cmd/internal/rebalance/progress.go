package rebalance

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// Event is one step of an apply's progress.
type Event struct {
	Kind      string // start, pass, moved, failed, interrupted, done
	Rebalance *topology.Rebalance
	Move      topology.Move
	Stats     migrate.Stats
	Total     int // start: moves in the rebalance
	Todo      int // start: moves left to do
	Took      time.Duration
	Freeze    FreezeParts // moved: where the freeze's time went
	Err       error
}

// Reporter shows an apply's progress: a bar on a terminal, JSON lines
// otherwise.
type Reporter interface {
	Event(Event)
}

// NewReporter returns a bar when w is a terminal and JSON lines otherwise.
func NewReporter(w io.Writer, now func() time.Time) Reporter {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &Bar{W: w, Now: now}
		}
	}
	return &Lines{W: w}
}

// Lines writes one JSON object per event.
type Lines struct {
	W  io.Writer
	mu sync.Mutex
}

// Event writes e as one JSON line.
func (l *Lines) Event(e Event) {
	out := map[string]any{"event": e.Kind}
	if e.Rebalance != nil {
		out["rebalance"] = e.Rebalance.ID
	}
	switch e.Kind {
	case "start":
		out["moves"], out["todo"] = e.Total, e.Todo
	case "pass", "moved", "failed":
		m := e.Move
		out["bucket"], out["from"], out["to"], out["step"] = int(m.Bucket), m.From, m.To, m.Step
		out["rows_copied"], out["passes"] = m.RowsCopied, m.Passes
		if e.Kind == "pass" {
			out["pass_rows"], out["pass_chunks_copied"] = e.Stats.Rows, e.Stats.Differ
		} else {
			out["freeze_ms"], out["took_ms"] = m.FreezeMS, e.Took.Milliseconds()
			if e.Freeze != (FreezeParts{}) {
				out["freeze_parts_ms"] = map[string]int64{"fence": e.Freeze.Fence.Milliseconds(), "delta": e.Freeze.Delta.Milliseconds(),
					"verify": e.Freeze.Verify.Milliseconds(), "handover": e.Freeze.Handover.Milliseconds(),
					"claim": e.Freeze.Claim.Milliseconds(), "lease": e.Freeze.Lease.Milliseconds(),
					"commit": e.Freeze.Commit.Milliseconds(), "publish": e.Freeze.Publish.Milliseconds()}
			}
		}
	case "done":
		out["state"] = e.Rebalance.State
		addSummary(out, e.Rebalance)
	}
	if e.Err != nil {
		out["error"] = e.Err.Error()
	}
	b, _ := json.Marshal(out)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.W, "%s\n", b)
}

// Freezes returns the freezes of r's published moves, sorted.
func Freezes(r *topology.Rebalance) []int {
	var fs []int
	for _, m := range r.Moves {
		if m.Step == topology.Done || m.Step == topology.Published {
			fs = append(fs, m.FreezeMS)
		}
	}
	slices.Sort(fs)
	return fs
}

// Percentile returns the p-th percentile (0..100) of sorted values.
func Percentile(sorted []int, p float64) int {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p/100 + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

func addSummary(out map[string]any, r *topology.Rebalance) {
	fs := Freezes(r)
	var rows int64
	done := 0
	for _, m := range r.Moves {
		rows += m.RowsCopied
		if m.Step == topology.Done {
			done++
		}
	}
	out["moves"], out["done"], out["rows_copied"] = len(r.Moves), done, rows
	out["freeze_ms_p50"], out["freeze_ms_p99"] = Percentile(fs, 50), Percentile(fs, 99)
	if len(fs) > 0 {
		out["freeze_ms_max"] = fs[len(fs)-1]
	}
}

// Bar redraws one progress line on a terminal.
type Bar struct {
	W   io.Writer
	Now func() time.Time

	mu      sync.Mutex
	began   time.Time
	total   int
	done    int
	rows    int64
	freezes []int
}

// Event redraws the bar.
func (b *Bar) Event(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e.Kind {
	case "start":
		b.began, b.total, b.done = b.Now(), e.Total, e.Total-e.Todo
	case "pass":
		b.rows += e.Stats.Rows
	case "moved":
		b.done++
		b.freezes = append(b.freezes, e.Move.FreezeMS)
		slices.Sort(b.freezes)
	case "failed":
		fmt.Fprintf(b.W, "\nbucket %d %s -> %s failed: %v\n", e.Move.Bucket, e.Move.From, e.Move.To, e.Err)
	case "done", "interrupted":
		b.draw()
		fmt.Fprintln(b.W)
		return
	}
	b.draw()
}

func (b *Bar) draw() {
	const width = 30
	filled := 0
	if b.total > 0 {
		filled = width * b.done / b.total
	}
	el := b.Now().Sub(b.began)
	rate := float64(b.rows) / max(el.Seconds(), 0.001)
	eta := "?"
	if b.done > 0 && b.done < b.total {
		eta = (el / time.Duration(b.done) * time.Duration(b.total-b.done)).Round(time.Second).String()
	}
	fmt.Fprintf(b.W, "\r[%s%s] %d/%d buckets  %d rows  %.0f rows/s  ETA %s  freeze p99 %d ms ",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), b.done, b.total, b.rows, rate, eta, Percentile(b.freezes, 99))
}

// Fault makes a test's mover die or pause at a step, as kill -9 would:
// HBCTL_FAULT=kill@STEP exits at once when a move reaches STEP;
// pause@STEP:PATH writes PATH.ready and waits for PATH.go to exist. STEP
// is a journal step (topology.Frozen: after the source's fence is taken;
// topology.Disowning: after the source's release committed, before the
// publish; ...) or FaultClaimed.
type Fault struct {
	Kill, Pause, Path string
}

// ParseFault reads a fault from HBCTL_FAULT's value ("" for none).
func ParseFault(v string) (Fault, error) {
	if v == "" {
		return Fault{}, nil
	}
	what, rest, ok := strings.Cut(v, "@")
	switch {
	case ok && what == "kill":
		return Fault{Kill: rest}, nil
	case ok && what == "pause":
		step, path, ok := strings.Cut(rest, ":")
		if ok && path != "" {
			return Fault{Pause: step, Path: path}, nil
		}
	}
	return Fault{}, fmt.Errorf("HBCTL_FAULT=%q: want kill@STEP or pause@STEP:PATH", v)
}

// FaultClaimed is the fault point between the target's fence claim and the
// commit of the source's release, when both SETs' fences hold the bucket.
const FaultClaimed = "claimed"

func (f Fault) at(step string) {
	switch step {
	case f.Kill:
		os.Exit(137) // like kill -9: no deferred cleanup, connections dropped
	case f.Pause:
		_ = os.WriteFile(f.Path+".ready", nil, 0o644)
		for {
			if _, err := os.Stat(f.Path + ".go"); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
