package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// The printing of an apply's progress (move.Event): a bar on a terminal,
// JSON lines otherwise.

// newReporter returns a bar when w is a terminal and JSON lines otherwise.
func newReporter(w io.Writer, now func() time.Time) move.Reporter {
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
func (l *Lines) Event(e move.Event) {
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
			if e.Freeze != (move.FreezeParts{}) {
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
func (b *Bar) Event(e move.Event) {
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
