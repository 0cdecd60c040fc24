package main

import (
	"context"
	"errors"

	"github.com/hongbao-dev/hongbao/set/archive/cron"
)

// cmdArchive is hbarchive under hbctl.
func cmdArchive(ctx context.Context, e *env, args []string) error {
	err := cron.Run(ctx, args, e.stdout, e.stderr, e.environ)
	if errors.Is(err, cron.ErrUsage) {
		return usageError{err.Error()}
	}
	return err
}
