// Package cron is the archival cron as an operator runs it: its command
// line (ensure, run, status), shared by hbarchive and hbctl archive so
// that both parse and report alike. It reads the configuration and the
// SETs, opens each SET's archiver and prints what it did; what archiving
// does (copy, verify, empty, create days ahead, what a run records) is
// package archive's.
//
// It lives under set/archive, beside the archiver it drives, rather than
// under cmd/: two binaries share it, and it is the archive's own surface
// (its flags, output and exit conditions are tested with archivetest's
// fixture, like the archiver's behaviour).
package cron
