package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The commands that run and exit (hbarchive, hbctl verify) push nothing:
// they write their last run as a Prometheus textfile (the format of
// node_exporter's textfile collector), replaced atomically, which the
// node_exporter on their machine exposes and their status commands read.

// ArchiveRun is the summary of one archiver run of one SET.
type ArchiveRun struct {
	Set                        string
	At                         time.Time
	Pending, Archived, Skipped int // days past retention still live after the run, archived, skipped (a check failed)
	OK                         bool
	Days                       []ArchiveDay // per day: live or acted on in this run
}

// ArchiveDay is one date of a SET after a run, in one state, with the
// number of its day tables (a bucket's table of that day) in that state.
// Dates and states, never tables, label the gauge: the series stay bounded
// by the days the SET keeps live, not multiplied by its buckets.
type ArchiveDay struct {
	Date   string // YYYY-MM-DD
	State  string // live, pending, due, archived, skipped
	Tables int
}

// WriteArchive writes the runs (one per SET) to path as a textfile.
func WriteArchive(path string, runs []ArchiveRun) error {
	reg := prometheus.NewRegistry()
	days := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_archive_days",
		Help: "Days of the archiver's last run per SET, by state: pending (past the retention, still live), archived, skipped (a check failed; left live)."},
		[]string{"set", "state"})
	last := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_archive_last_run_timestamp_seconds",
		Help: "Unix time the archiver last ran, per SET."}, []string{"set"})
	ok := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_archive_last_run_success",
		Help: "1 when the archiver's last run of the SET finished without error."}, []string{"set"})
	perDay := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_archive_day_tables",
		Help: "Day tables per date and state after the archiver's last run of the SET: live (within retention), pending (unsettled packets), due, archived, skipped."},
		[]string{"set", "date", "state"})
	for _, r := range runs {
		for _, d := range r.Days {
			perDay.WithLabelValues(r.Set, d.Date, d.State).Add(float64(d.Tables))
		}
		days.WithLabelValues(r.Set, "pending").Set(float64(r.Pending))
		days.WithLabelValues(r.Set, "archived").Set(float64(r.Archived))
		days.WithLabelValues(r.Set, "skipped").Set(float64(r.Skipped))
		last.WithLabelValues(r.Set).Set(float64(r.At.Unix()))
		ok.WithLabelValues(r.Set).Set(b2f(r.OK))
	}
	reg.MustRegister(days, last, ok, perDay)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("metrics: archive textfile: %w", err)
	}
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("metrics: archive textfile: %w", err)
	}
	return nil
}

// WriteVerify writes the result of one hbctl verify to path: whether every
// invariant held, when it ran, and when it last succeeded (lastOK, carried
// over from the previous file when this run failed).
func WriteVerify(path string, ok bool, at, lastOK time.Time) error {
	reg := prometheus.NewRegistry()
	g := func(name, help string, v float64) {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		m.Set(v)
		reg.MustRegister(m)
	}
	g("hongbao_verify_ok", "1 when the last hbctl verify found every invariant holding, else 0.", b2f(ok))
	g("hongbao_verify_last_run_timestamp_seconds", "Unix time of the last hbctl verify.", float64(at.Unix()))
	if !lastOK.IsZero() {
		g("hongbao_verify_last_success_timestamp_seconds", "Unix time of the last hbctl verify that passed.", float64(lastOK.Unix()))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("metrics: verify textfile: %w", err)
	}
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("metrics: verify textfile: %w", err)
	}
	return nil
}

// RecordVerify writes the result of one hbctl verify, run at now, to path
// (WriteVerify), carrying the time of the last success over from the
// previous file when this run failed (none when it cannot be read).
func RecordVerify(path string, ok bool, now time.Time) error {
	lastOK := now
	if !ok {
		lastOK = time.Time{}
		if lines, err := ReadTextfile(path); err == nil {
			if v, found := Sample(lines, "hongbao_verify_last_success_timestamp_seconds"); found {
				lastOK = time.Unix(int64(v), 0)
			}
		}
	}
	return WriteVerify(path, ok, now, lastOK)
}

// ReadTextfile returns the samples of a textfile written by this package,
// one "name{labels} value" line each, comments left out; a missing file
// is an error the caller can test with errors.Is(err, fs.ErrNotExist).
func ReadTextfile(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Sample returns the value of the unlabelled sample name in lines (from
// ReadTextfile).
func Sample(lines []string, name string) (float64, bool) {
	for _, l := range lines {
		n, v, ok := strings.Cut(l, " ")
		if ok && n == name {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
