package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// window is the stretch of the load one fault owns: from its injection
// to the next fault's (faults come one at a time, each healed before the
// next), or to the load's end.
type window struct {
	f          fault
	from, to   time.Time
	acked      int64
	lost, dbl  int
	verifies   map[string]int
	nRecovered int
}

// windows are the windows of the faults injected one after the other
// (not the archiver's, which runs beside them, nor the skipped), with
// the answers acknowledged, the lost and doubled answers and the verify
// runs that fell into each.
func windows(r *result) []window {
	var ws []window
	for _, f := range r.faults {
		if f.kind != killArchiver && f.skipped == "" {
			ws = append(ws, window{f: f, from: f.at, verifies: map[string]int{}})
		}
	}
	slices.SortFunc(ws, func(a, b window) int { return a.from.Compare(b.from) })
	for i := range ws {
		ws[i].to, ws[i].acked = r.loadEnd, r.ackedEnd-ws[i].f.acked0
		if i+1 < len(ws) {
			ws[i].to, ws[i].acked = ws[i+1].from, ws[i+1].f.acked0-ws[i].f.acked0
		}
	}
	at := func(t time.Time) *window {
		for i := len(ws) - 1; i >= 0; i-- {
			if !t.Before(ws[i].from) && t.Before(ws[i].to) {
				return &ws[i]
			}
		}
		return nil
	}
	for _, t := range r.f.lostAt {
		if w := at(t); w != nil {
			w.lost++
		}
	}
	for _, t := range r.f.doubledAt {
		if w := at(t); w != nil {
			w.dbl++
		}
	}
	for _, v := range r.verifies {
		if w := at(v.at); w != nil {
			w.verifies[v.result]++
		}
	}
	return ws
}

// kindTables is one table per kind of fault: how often it was injected
// and on what, the answers acknowledged while it ran (its windows), how
// many of those were lost or doubled, how long until what it hit served
// again, and the verify runs in its windows.
func kindTables(r *result) string {
	ws := windows(r)
	var b strings.Builder
	for _, k := range kinds {
		st := statOf(r.faults, k)
		n, bad, ds, skipped := st.n, st.bad, st.ds, st.skipped
		var acked int64
		var lost, dbl int
		verifies := map[string]int{}
		for _, w := range ws {
			if w.f.kind == k {
				acked += w.acked
				lost += w.lost
				dbl += w.dbl
				for v, c := range w.verifies {
					verifies[v] += c
				}
			}
		}
		fmt.Fprintf(&b, "\n#### %s\n\n| | |\n|---|---|\n", k)
		row := func(k, v string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(v, args...)) }
		if n == 0 {
			if skipped == "" {
				skipped = "not drawn in this run"
			}
			row("injected", "0: %s", skipped)
			continue
		}
		row("load", "the run's (above), %d clients throughout", r.o.clients)
		row("faults injected", "%d (%s)", n, strings.Join(st.targets, "; "))
		if k == killArchiver {
			row("acknowledged answers", "(it runs beside the other faults: its answers are theirs)")
		} else {
			row("acknowledged answers", "%d (from each injection to the next fault)", acked)
			row("lost", "**%d**", lost)
			row("doubled", "**%d**", dbl)
		}
		row("recovered", "%d of %d", n-bad, n)
		if len(ds) > 0 {
			row(recoveryLabel(k), "%.2f / %.2f / %.2f s (min / median / max)", ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
		}
		if o := st.outage(); o != "" {
			row(outageLabel(k), "%s (the longest of its injections)", o)
		}
		row("verify during it", "%d passed, %d violations, %d could not run", verifies["ok"], verifies["violation"], verifies["error"])
	}
	return b.String()
}

// recoveryLabel says what a kind's recovery time measures.
func recoveryLabel(kind string) string {
	switch {
	case slices.Contains(netKinds, kind) || kind == halfDeadReplica:
		return "writes acknowledged again after the heal"
	case kind == clockSkew:
		return "writes acknowledged again after the restart on the host's clock"
	case kind == replicaThenPrimary:
		return "serving again after the replica's kill (failover and rejoin included)"
	}
	return "serving again after"
}

// outageLabel says whose writes a kind's outage follows.
func outageLabel(kind string) string {
	if kind == killRouter || kind == moverKilled {
		return "writes to every SET unacknowledged for at most"
	}
	return "its SET's writes unacknowledged for at most"
}
