package cron_test

// Integration tests of the archive command line (cron.Run, behind
// hbarchive and hbctl archive) against a private MariaDB per test
// (archivetest.Fixture) with a YAML configuration naming it. What the
// command does to the tables is tested on archive.Archiver in set/archive;
// these check what the command line adds: flags, configuration, output,
// usage errors and the environment's fault injection.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
	"github.com/hongbao-dev/hongbao/store"
)

// command runs the archive command line in process with environ env
// (os.Environ form) and returns what it printed to stdout and stderr.
func command(f *archivetest.Fixture, env []string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = cron.Run(f.Ctx, args, &out, &errOut, env)
	return out.String(), errOut.String(), err
}

// FaultAfterCopy is an AfterCopy knob that stops a run after a day's
// verified copy, naming the day.
func FaultAfterCopy(d store.Day) error {
	return fmt.Errorf("injected fault after copying %s %s", d.Table.Packets(), d.Date.Format(time.DateOnly))
}
