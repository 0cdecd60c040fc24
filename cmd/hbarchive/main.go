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
	"os"
	"os/signal"
	"syscall"

	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cron.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	switch {
	case err == nil:
	case errors.Is(err, cron.ErrUsage):
		fmt.Fprintln(os.Stderr, "hbarchive:", err)
		os.Exit(2)
	case errors.Is(err, archive.ErrLocked):
		fmt.Fprintln(os.Stderr, "hbarchive:", err)
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "hbarchive:", err)
		os.Exit(1)
	}
}
