package archivecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/set/archive"
)

// pendingDays counts the days past the retention still in the live tables
// after a run: what the next runs have left to do.
func pendingDays(ctx context.Context, a *archive.Archiver, asOf time.Time) (int, error) {
	days, err := a.Status(ctx, asOf)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range days {
		if d.Action == "due" || d.Action == "pending" {
			n++
		}
	}
	return n, nil
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
