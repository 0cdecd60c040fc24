package cron

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/hongbao-dev/hongbao/metrics"
)

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
