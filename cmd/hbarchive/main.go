// Command hbarchive is the archival cron of the day tables: it creates
// tomorrow's tables, moves old days to the cold store after verifying the
// copy, and empties their tables before the same day of the next month.
//
//	hbarchive ensure
//	hbarchive run [--as-of YYYY-MM-DD] [--dry-run]
//	hbarchive status
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ(), cron.Knobs{})
	stop()
	os.Exit(code)
}

// run runs the command line with knobs (a test's; none in the binary) and
// returns the exit code: 0, 2 usage, 3 locked, 1 any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string, k cron.Knobs) int {
	err := cron.RunWith(ctx, args, stdout, stderr, environ, k)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "hbarchive:", err)
	switch {
	case errors.Is(err, cron.ErrUsage):
		return 2
	case errors.Is(err, archive.ErrLocked):
		return 3
	default:
		return 1
	}
}
