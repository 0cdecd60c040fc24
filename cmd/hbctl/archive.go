package main

import (
	"context"
	"errors"

	"github.com/hongbao-dev/hongbao/cmd/internal/archivecmd"
)

// cmdArchive is hbarchive under hbctl.
func cmdArchive(ctx context.Context, e *env, args []string) error {
	err := archivecmd.Run(ctx, args, e.stdout, e.stderr, e.environ)
	if errors.Is(err, archivecmd.ErrUsage) {
		return usageError{err.Error()}
	}
	return err
}
