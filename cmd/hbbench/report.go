package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

func printTable(w io.Writer, rs []*result) {
	fmt.Fprintln(w, "| scenario | design | clients | answers | opens/s | opens/s until all in MySQL | p50 | p99 | p99.9 | busy retries | errors | DB tx/s | invariants |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f | %.0f | %s | %s | %s | %d | %d | %.0f | %s |\n", r.scenario, r.design, r.clients,
			r.answers, r.rate(), r.durableRate(), ms(r.pct(0.50)), ms(r.pct(0.99)), ms(r.pct(0.999)), r.busy, r.errors,
			float64(r.commits)/(r.took+r.drained).Seconds(), r.invariants)
		if r.firstErr != "" {
			fmt.Fprintf(w, "|  | first error: %s ||||||||||||\n", strings.ReplaceAll(r.firstErr, "|", "/"))
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// ratio is a's opens/s over b's in scenario s.
func ratio(rs []*result, s, a, b string) string {
	var ra, rb float64
	for _, r := range rs {
		design, _, _ := strings.Cut(r.design, " (")
		if r.scenario == s && design == a {
			ra = r.rate()
		}
		if r.scenario == s && design == b {
			rb = r.rate()
		}
	}
	if rb == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fx", ra/rb)
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s, %s/%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
