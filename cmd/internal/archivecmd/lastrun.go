package archivecmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// afterRun is what the textfile records of a SET after a run: the days
// past the retention still live (what the next runs have left to do), and
// per date and state the number of day tables, from the days the run acted
// on (archived, skipped) and every day still live.
func afterRun(ctx context.Context, a *archive.Archiver, asOf time.Time, sum archive.Summary) (int, []metrics.ArchiveDay, error) {
	live, err := a.Status(ctx, asOf)
	if err != nil {
		return 0, nil, err
	}
	pending := 0
	for _, d := range live {
		if d.Action == "due" || d.Action == "pending" {
			pending++
		}
	}
	var acted []archive.DayReport
	for _, d := range sum.Days {
		if d.Action == "archived" || d.Action == "skipped" {
			acted = append(acted, d)
		}
	}
	return pending, dayTables(append(acted, live...)), nil
}

// dayTables counts the reports per date and state, ordered by date then
// state.
func dayTables(reports []archive.DayReport) []metrics.ArchiveDay {
	n := map[metrics.ArchiveDay]int{}
	for _, r := range reports {
		n[metrics.ArchiveDay{Date: r.Date, State: r.Action}]++
	}
	out := make([]metrics.ArchiveDay, 0, len(n))
	for k, c := range n {
		k.Tables = c
		out = append(out, k)
	}
	slices.SortFunc(out, func(x, y metrics.ArchiveDay) int {
		return cmp.Or(strings.Compare(x.Date, y.Date), strings.Compare(x.State, y.State))
	})
	return out
}

// lastRun prints what the last run wrote to the textfile about SET set
// (nothing when archive.textfile is not set).
func lastRun(out io.Writer, textfile, set string) {
	if textfile == "" {
		return
	}
	lines, err := metrics.ReadTextfile(textfile)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "  last run: none recorded in %s\n", textfile)
		return
	}
	if err != nil {
		fmt.Fprintf(out, "  last run: %v\n", err)
		return
	}
	fmt.Fprintf(out, "  last run (%s):\n", textfile)
	for _, l := range lines {
		if strings.Contains(l, `set="`+set+`"`) {
			fmt.Fprintln(out, "    "+l)
		}
	}
}
