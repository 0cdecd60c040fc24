package archive

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/metrics"
)

// AfterRun is what the textfile records of the SET after run sum: the
// days past the retention still live (what the next runs have left to
// do), and per date and state the number of day tables, from the days the
// run acted on (archived, skipped) and every day still live.
func (a *Archiver) AfterRun(ctx context.Context, asOf time.Time, sum Summary) (int, []metrics.ArchiveDay, error) {
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
	var acted []DayReport
	for _, d := range sum.Days {
		if d.Action == "archived" || d.Action == "skipped" {
			acted = append(acted, d)
		}
	}
	return pending, dayTables(append(acted, live...)), nil
}

// dayTables counts the reports per date and state, ordered by date then
// state.
func dayTables(reports []DayReport) []metrics.ArchiveDay {
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
