// Command hbctl is the operator's tool: tokens, schema, topology, wallet,
// verification and archival.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/failover"
	"go.uber.org/zap"
)

// command is one hbctl subcommand.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, env *env, args []string) error
}

// env is what every command gets: output streams and the process environment.
type env struct {
	stdout, stderr io.Writer
	environ        []string
}

func commands() []command {
	return []command{
		{"token", "token --user ID [--ttl 24h]: print a user token", cmdToken},
		{"schema", "schema ensure [--set NAME] [--days N]: create day tables", cmdSchema},
		{"wallet", "wallet credit --user U --amount FEN [--key K] | show --user U: operator top-up, balance", cmdWallet},
		{"limits", "limits set --user U [--daily-send-count N] [--daily-send-total FEN] [--daily-receive-total FEN] | show --user U | clear --user U: one user's daily limits", cmdLimits},
		{"verify", "verify [--sweep-after D] [--restore-marks]: check invariants 1, 2 and 4 across every SET and the wallet, and find orphan packets", cmdVerify},
		{"archive", "archive ensure|run|status [--as-of YYYY-MM-DD] [--dry-run]: the day-table archival cron (hbarchive)", cmdArchive},
		{"topology", "topology init | show [--json] | move --bucket B --to SET: the bucket -> SET map", cmdTopology},
		{"set", "set add NAME --servers A,B --mysql DSN --memcached A | list [--json] | drain NAME | remove NAME | failover NAME | rejoin NAME | watch [NAME...]: the SETs", cmdSet},
		{"core", "core failover [--to HOST:PORT] [--accept-single-copy] | rejoin | status | watch: the meta and wallet databases' replicated MariaDB", cmdCore},
		{"replica", "replica start HOST:PORT...: after a replica's mysqld started, apply what its relay log holds, then replicate", cmdReplica},
		{"statement", "statement --day YYYY-MM-DD [--format csv|json] [--out FILE]: the day's wallet ledger, totals and balances, checked against the SETs", cmdStatement},
		{"webhook", "webhook list [--state pending|failed] [--type T] [--packet ID] | replay [--id EVENT] [--packet ID]: webhook events not delivered yet", cmdWebhook},
		{"rebalance", "rebalance plan [--json] | apply [--parallel N] [--dry-run] | status [--json] | reverse: move buckets live", cmdRebalance},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ()}, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hbctl:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(e.stdout, "usage: hbctl COMMAND [flags]\n\ncommands:")
		for _, c := range commands() {
			fmt.Fprintln(e.stdout, "  hbctl "+c.usage)
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return usage(c.run(ctx, e, args[1:]))
		}
	}
	return usageError{fmt.Sprintf("unknown command %q (try hbctl help)", args[0])}
}

// usage makes err a usage error (exit status 2) when the failover package
// says it is one, keeping its words.
func usage(err error) error {
	var u usageError
	var fu failover.UsageError
	if err != nil && !errors.As(err, &u) && errors.As(err, &fu) {
		return usageError{err.Error()}
	}
	return err
}

// flags returns a flag set whose errors name the bad flag and do not exit.
func flags(name string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("hbctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// clock is the wall clock of a -clock-offset of offset (fault injection
// for tests and chaos), said on stderr when it is skewed.
func clock(e *env, offset time.Duration) func() time.Time {
	if offset != 0 {
		fmt.Fprintf(e.stderr, "hbctl: warning: clock skewed on purpose by %v (-clock-offset)\n", offset)
	}
	return configs.Clock(offset, zap.NewNop())
}

// parse parses args and turns flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{"help requested"}
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", strings.Join(fs.Args(), " "))}
	}
	return nil
}
