package main

import (
	"context"
	"fmt"

	"github.com/hongbao-dev/hongbao/set/failover"
)

// unstalled runs write with failover.Stall, saying on stderr what it waits
// for (what names the write; fix says what to run): hbctl topology init
// writes on semi-sync primaries that may have no replica left.
func unstalled(ctx context.Context, e *env, what string, dsns []string, fix string, write func(context.Context) error) error {
	s := failover.NewStall(func(why string) { fmt.Fprintf(e.stderr, "hbctl: %s waits: %s\n", what, why) })
	return s.Run(ctx, what, dsns, fix, write)
}
