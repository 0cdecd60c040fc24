package main

import (
	"context"
	"errors"

	"github.com/hongbao-dev/hongbao/set"
)

// cmdArchive is hbarchive under hbctl.
func cmdArchive(ctx context.Context, e *env, args []string) error {
	err := set.ArchiveCommand(ctx, args, e.stdout, e.stderr, e.environ)
	if errors.Is(err, set.ErrUsage) {
		return usageError{err.Error()}
	}
	return err
}
