// Package archivecmd is the archival cron's command line (ensure, run,
// status), shared by hbarchive and hbctl archive so that both parse and
// report alike.
package archivecmd
