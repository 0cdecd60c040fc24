package cron

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"go.uber.org/zap"
)

// Usage is the synopsis of the archive command.
const Usage = `usage: hbarchive ensure|run|status [flags]   (also: hbctl archive ...)
  ensure   create the day tables for today and the next archive.ahead_days days
  run      archive every day older than archive.retention_days: copy, verify, empty
  status   per SET and day: live, pending, due, archived
flags: --config FILE  --set NAME  --as-of YYYY-MM-DD  --dry-run  --retention-days N`

// ErrUsage marks a bad command line.
var ErrUsage = errors.New("usage")

// Knobs are a test's hooks into a run, set in process (the zero Knobs:
// none, as the binaries run it).
type Knobs struct {
	// AfterCopy, when set, runs after each day's verified copy and before
	// its purge (archive.Archiver.AfterCopy): an error stops the run there,
	// as a crash between the two would.
	AfterCopy func(store.Day) error
}

// Run is the archival cron's command line, shared by hbarchive
// and hbctl archive.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) error {
	return RunWith(ctx, args, stdout, stderr, environ, Knobs{})
}

// RunWith is Run with a test's knobs.
func RunWith(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string, k Knobs) error {
	o, err := parseArgs(args, stderr, environ)
	if err != nil {
		return err
	}
	o.knobs = k
	sets, err := settings.Sets(ctx, o.cfg) // the meta database's, when there is one
	if err != nil {
		return err
	}
	if o.only != "" {
		i := slices.IndexFunc(sets, func(s configs.Set) bool { return s.Name == o.only })
		if i < 0 {
			return fmt.Errorf("%w: flag --set: no SET %q", ErrUsage, o.only)
		}
		sets = sets[i : i+1]
	}
	log, err := o.cfg.Logger("hbarchive")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck

	var runs []metrics.ArchiveRun // what the textfile says of this run
	if o.cmd == "run" && !o.dryRun && o.cfg.Archive.Textfile != "" {
		defer func() {
			if err := metrics.WriteArchive(o.cfg.Archive.Textfile, runs); err != nil {
				fmt.Fprintln(stderr, "hbarchive:", err)
			}
		}()
	}
	var meta *sql.DB // archive only the buckets the topology gives a SET
	if o.cfg.MetaDSN != "" {
		if meta, err = topology.OpenMeta(ctx, o.cfg.MetaDSN, o.cfg.CoreMembers(), false); err != nil {
			return err
		}
		defer meta.Close()
	}
	var errs []error
	for _, sc := range sets {
		err := o.archiveOne(ctx, sc, meta, log, stdout, stderr, &runs)
		switch {
		case errors.Is(err, archive.ErrLocked):
			errs = append(errs, err) // it names the SET already
		case err != nil:
			// One SET's trouble must not keep the others' days from
			// being archived before their tables are reused.
			errs = append(errs, fmt.Errorf("SET %s: %w", sc.Name, err))
		}
	}
	if o.cmd == "run" && !o.dryRun && o.only == "" && o.stmtDir != "" {
		errs = append(errs, writeStatement(ctx, o.cfg, o.stmtDir, o.asOf, stdout))
	}
	return errors.Join(errs...)
}

// writeStatement writes the wallet statement of the day before asOf to dir.
func writeStatement(ctx context.Context, cfg *configs.Config, dir string, asOf time.Time, out io.Writer) error {
	day := asOf.AddDate(0, 0, -1).Format(time.DateOnly)
	path := filepath.Join(dir, "statement-"+day+".csv")
	st, err := WriteStatement(ctx, cfg, day, "csv", path, out)
	if st != nil {
		fmt.Fprintf(out, "statement of %s: %d entries, %d users, written to %s\n", day, len(st.Entries), len(st.Balances), path)
	}
	if err != nil {
		return fmt.Errorf("statement of %s: %w", day, err)
	}
	return nil
}

// options are a command line's: the command, the configuration, the SET
// (""; every one), the date acted as of, a dry run, the retention in days.
type options struct {
	cmd    string
	cfg    *configs.Config
	only   string
	asOf   time.Time
	dryRun bool
	days   int
	// stmtDir is where a run writes the previous day's wallet statement
	// ("": none).
	stmtDir string
	knobs   Knobs
}

// parseArgs parses a command line and loads its configuration.
func parseArgs(args []string, stderr io.Writer, environ []string) (options, error) {
	if len(args) == 0 || (args[0] != "ensure" && args[0] != "run" && args[0] != "status") {
		return options{}, fmt.Errorf("%w: %s", ErrUsage, Usage)
	}
	o := options{cmd: args[0]}
	fs := flag.NewFlagSet("hbarchive "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	fs.StringVar(&o.only, "set", "", "only this SET (default: every SET)")
	asOfStr := fs.String("as-of", "", "act as if on this date, YYYY-MM-DD (default: today)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "run: print what would be archived, change nothing")
	retention := fs.Int("retention-days", 0, "override archive.retention_days (1..26)")
	fs.StringVar(&o.stmtDir, "statement-dir", "", "run: write the previous day's wallet statement here (default: archive.statement_dir; only when every SET is archived)")
	if err := fs.Parse(args[1:]); err != nil {
		return o, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	var err error
	if o.cfg, err = configs.Load(*cfgPath, environ); err != nil {
		return o, err
	}
	loc := o.cfg.Location()
	o.asOf = time.Now().In(loc)
	if *asOfStr != "" {
		if o.asOf, err = time.ParseInLocation(time.DateOnly, *asOfStr, loc); err != nil {
			return o, fmt.Errorf("%w: flag --as-of: %q is not YYYY-MM-DD", ErrUsage, *asOfStr)
		}
	}
	o.days = o.cfg.Archive.RetentionDays
	if o.stmtDir == "" {
		o.stmtDir = o.cfg.Archive.StatementDir
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "retention-days" {
			o.days = *retention
		}
	})
	if o.days < 1 || o.days > archive.MaxRetentionDays {
		return o, fmt.Errorf("%w: retention %d days refused: must be 1..%d so each day table is empty at least a day before it is reused",
			ErrUsage, o.days, archive.MaxRetentionDays)
	}
	return o, nil
}

// archiveOne runs the command on SET sc, with its archiver's pools open
// for the time it takes.
func (o options) archiveOne(ctx context.Context, sc configs.Set, meta *sql.DB, log *zap.Logger, stdout, stderr io.Writer,
	runs *[]metrics.ArchiveRun) error {
	a, closeAll, err := newArchiver(sc, o.cfg, o.days, meta)
	if err != nil {
		return err
	}
	defer closeAll()
	a.Log = log
	if f, ok := os.Stderr.Stat(); ok == nil && f.Mode()&os.ModeCharDevice != 0 && stderr == os.Stderr {
		a.Progress = stderr
	}
	a.AfterCopy = o.knobs.AfterCopy
	return archiveSet(ctx, o.cmd, a, o.cfg, sc, o.asOf, o.dryRun, stdout, runs)
}

// newArchiver opens SET sc's pools; with a meta database it archives only
// the buckets the topology gives the SET, never by a fence row alone (a
// dead mover's claim).
func newArchiver(sc configs.Set, cfg *configs.Config, days int, meta *sql.DB) (*archive.Archiver, func(), error) {
	live, err := sqldb.Open(sc.MySQLDSN, 4)
	if err != nil {
		return nil, nil, err
	}
	cold, err := sqldb.Open(sc.Cold(), 4)
	if err != nil {
		live.Close()
		return nil, nil, err
	}
	st := store.New(live, sc.Name, cfg.Location(), time.Now, rand.Int64N)
	if meta != nil {
		st.WithOwnership(topology.TrustedIn(meta, sc.Name))
	}
	a := &archive.Archiver{Set: sc.Name, Store: st, Live: live, Cold: cold, Loc: cfg.Location(), Retention: days}
	return a, func() { live.Close(); cold.Close() }, nil
}

func archiveSet(ctx context.Context, cmd string, a *archive.Archiver, cfg *configs.Config, sc configs.Set, asOf time.Time, dryRun bool, out io.Writer, runs *[]metrics.ArchiveRun) error {
	switch cmd {
	case "ensure":
		buckets, err := ownedBuckets(ctx, cfg, sc.Name)
		if err != nil {
			return err
		}
		n, err := archive.Ensure(ctx, a.Live, buckets, asOf, a.Loc, cfg.Archive.AheadDays)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "SET %s: %d day tables ensured (%s + %d days)\n", sc.Name, n, asOf.Format(time.DateOnly), cfg.Archive.AheadDays)
	case "run":
		sum, err := a.Run(ctx, asOf, dryRun)
		if err != nil {
			*runs = append(*runs, metrics.ArchiveRun{Set: sc.Name, At: time.Now(), Skipped: sum.Skipped, Archived: sum.Archived})
			return err
		}
		pending, days, err := a.AfterRun(ctx, asOf, sum)
		*runs = append(*runs, metrics.ArchiveRun{Set: sc.Name, At: time.Now(), Pending: pending, Archived: sum.Archived,
			Skipped: sum.Skipped, OK: err == nil, Days: days})
		if err != nil {
			return err
		}
		for _, d := range sum.Days {
			if d.Action != "keep" {
				fmt.Fprintf(out, "SET %s %s %s: %s %d packets %s\n", sc.Name, d.Date, d.Table, d.Action, d.Rows, d.Reason)
			}
		}
		verb := "archived"
		if dryRun {
			verb = "would archive"
		}
		fmt.Fprintf(out, "SET %s: %s %d days (%d packets), skipped %d, kept %d\n", sc.Name, verb, sum.Archived, sum.Packets, sum.Skipped, sum.Kept)
	case "status":
		days, err := a.Status(ctx, asOf)
		if err != nil {
			return err
		}
		archived, err := store.ArchivedDays(ctx, a.Cold)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "SET %s as of %s (retention %d days)\n", sc.Name, asOf.Format(time.DateOnly), a.Retention)
		for _, d := range days {
			fmt.Fprintf(out, "  %s %-22s %-8s %6d packets  %s\n", d.Date, d.Table, d.Action, d.Rows, d.Reason)
		}
		for _, d := range archived {
			fmt.Fprintf(out, "  %s %-22s %-8s %6d packets  readable through the API\n", d.Date, d.Table, "archived", d.Packets)
		}
		lastRun(out, cfg.Archive.Textfile, sc.Name)
	}
	return nil
}

// ownedBuckets are the buckets of SET name in the topology, or every bucket
// when there is no meta database to ask.
func ownedBuckets(ctx context.Context, cfg *configs.Config, name string) ([]hongbao.Bucket, error) {
	if cfg.MetaDSN == "" {
		return fence.AllBuckets(), nil
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		return nil, err
	}
	defer meta.Close()
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, err
	}
	return t.Buckets(name), nil
}
