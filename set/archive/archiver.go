package archive

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
)

// MaxRetentionDays keeps a day's table empty at least a day before the same
// day of the next month (28 days away at the shortest) reuses it, even when
// the daily cron runs late by a day.
const MaxRetentionDays = 26

// movedAway is the reason a day of a bucket the SET no longer owns is
// skipped.
const movedAway = "the bucket moved to another SET, which archives it"

// ErrLocked means another archiver holds the SET's archive lock.
var ErrLocked = errors.New("another hbarchive run is in progress for this SET")

// Archiver moves a SET's old days from the live day tables to the cold
// store: copy, verify, and only then empty. Every step is idempotent and a
// MySQL lock keeps two runs apart, so it may be killed and rerun at will.
type Archiver struct {
	Set       string
	Store     *store.Store
	Live      *sql.DB // the SET's MySQL (lock, ensure)
	Cold      *sql.DB
	Loc       *time.Location
	Log       *zap.Logger
	Retention int // days
	// AfterCopy runs between the verified copy and the purge of each day
	// (a fault-injection point for tests).
	AfterCopy func(store.Day) error
	Progress  io.Writer // nil: no progress lines
}

// DayReport is what happened, or would happen, to one day.
type DayReport struct {
	Table  string
	Date   string
	Rows   int    // packets
	Action string // archived, skipped, would-archive, keep
	Reason string
}

// Summary is one run's result, logged as one JSON line.
type Summary struct {
	Set      string
	Archived int
	Skipped  int
	Kept     int
	Packets  int
	Days     []DayReport
}

// Due reports whether a day created on date is old enough at asOf.
func (a *Archiver) due(date, asOf time.Time) bool {
	y, m, d := asOf.In(a.Loc).Date()
	cutoff := time.Date(y, m, d, 0, 0, 0, 0, a.Loc).AddDate(0, 0, -a.Retention)
	return !date.After(cutoff)
}

// Run archives every due day at asOf; dryRun only reports.
func (a *Archiver) Run(ctx context.Context, asOf time.Time, dryRun bool) (Summary, error) {
	sum := Summary{Set: a.Set}
	if a.Retention < 1 || a.Retention > MaxRetentionDays {
		return sum, fmt.Errorf("retention %d days refused: must be 1..%d so each day table is empty at least a day before the same day of the next month reuses it",
			a.Retention, MaxRetentionDays)
	}
	unlock, err := a.lock(ctx)
	if err != nil {
		return sum, err
	}
	defer unlock()
	days, err := a.Store.Days(ctx)
	if err != nil {
		return sum, err
	}
	start := time.Now()
	for i, d := range days {
		r, err := a.day(ctx, d, asOf, dryRun)
		if err != nil {
			return sum, err
		}
		sum.add(r)
		a.progress(i+1, len(days), sum.Packets, start)
	}
	if a.Progress != nil && len(days) > 0 {
		fmt.Fprintln(a.Progress)
	}
	a.Log.Info("archive run", zap.String("set", a.Set), zap.String("as_of", asOf.In(a.Loc).Format(time.DateOnly)),
		zap.Bool("dry_run", dryRun), zap.Int("archived_days", sum.Archived), zap.Int("skipped_days", sum.Skipped),
		zap.Int("kept_days", sum.Kept), zap.Int("packets", sum.Packets), zap.Duration("took", time.Since(start)))
	return sum, nil
}

func (s *Summary) add(r DayReport) {
	s.Days = append(s.Days, r)
	switch r.Action {
	case "archived", "would-archive":
		s.Archived++
		s.Packets += r.Rows
	case "skipped":
		s.Skipped++
	default:
		s.Kept++
	}
}

// day archives one day if it is due and settled.
func (a *Archiver) day(ctx context.Context, d store.Day, asOf time.Time, dryRun bool) (DayReport, error) {
	r := DayReport{Table: d.Table.Packets(), Date: d.Date.Format(time.DateOnly)}
	st, err := a.Store.Stats(ctx, d, asOf)
	if err != nil {
		return r, err
	}
	r.Rows = st.Packets
	switch {
	case !a.due(d.Date, asOf):
		r.Action, r.Reason = "keep", "within retention"
		return r, nil
	case st.Unsettled > 0:
		r.Action, r.Reason = "skipped", fmt.Sprintf("%d packets not settled (live, not refunded, or credits in the outbox)", st.Unsettled)
		a.Log.Warn("archive: day skipped", zap.String("table", r.Table), zap.String("date", r.Date), zap.String("reason", r.Reason))
		return r, nil
	case dryRun:
		r.Action = "would-archive"
		return r, nil
	}
	// The bucket may have moved away since the run listed its days: never
	// copy a bucket the SET no longer owns (the purge checks again, under
	// the fence's lock).
	if owns, err := a.Store.Owns(ctx, d.Table.Bucket); err != nil {
		return r, err
	} else if !owns {
		r.Action, r.Reason = "skipped", movedAway
		a.Log.Warn("archive: day skipped", zap.String("table", r.Table), zap.String("date", r.Date), zap.String("reason", r.Reason))
		return r, nil
	}
	sum, err := a.Store.Copy(ctx, a.Cold, d)
	if err != nil {
		return r, err
	}
	if a.AfterCopy != nil {
		if err := a.AfterCopy(d); err != nil {
			return r, err
		}
	}
	if err := a.Store.Purge(ctx, d, sum, asOf); errors.Is(err, store.ErrDayChanged) {
		// A send or an open reached the day after the copy: leave it
		// whole; the copy is kept (the next run adds nothing twice).
		r.Action, r.Reason = "skipped", err.Error()
		a.Log.Warn("archive: day changed during the run", zap.String("table", r.Table), zap.String("date", r.Date), zap.Error(err))
		return r, nil
	} else if errors.Is(err, hongbao.ErrWrongSet) {
		// The bucket moved away during the copy: the new owner has the
		// live rows and archives them; nothing is purged here.
		r.Action, r.Reason = "skipped", movedAway
		a.Log.Warn("archive: bucket moved away during the run", zap.String("table", r.Table), zap.String("date", r.Date), zap.Error(err))
		return r, nil
	} else if err != nil {
		return r, err
	}
	r.Action = "archived"
	return r, nil
}

// lock takes the SET's archive lock on a connection held for the run; if
// the process dies, MySQL drops the connection and the lock with it.
func (a *Archiver) lock(ctx context.Context) (func(), error) {
	conn, err := a.Live.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("archive lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", "hb_archive:"+a.Set).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("archive lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, fmt.Errorf("SET %s: %w", a.Set, ErrLocked)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", "hb_archive:"+a.Set) // closing frees it anyway
		conn.Close()
	}, nil
}

func (a *Archiver) progress(done, total, rows int, start time.Time) {
	if a.Progress == nil {
		return
	}
	eta := time.Duration(0)
	if done > 0 {
		eta = time.Since(start) / time.Duration(done) * time.Duration(total-done)
	}
	fmt.Fprintf(a.Progress, "\rSET %s: days %d/%d, packets %d, ETA %s   ", a.Set, done, total, rows, eta.Round(time.Second))
}

// Status reports every day of the SET at asOf without changing anything.
func (a *Archiver) Status(ctx context.Context, asOf time.Time) ([]DayReport, error) {
	days, err := a.Store.Days(ctx)
	if err != nil {
		return nil, err
	}
	var out []DayReport
	for _, d := range days {
		st, err := a.Store.Stats(ctx, d, asOf)
		if err != nil {
			return nil, err
		}
		r := DayReport{Table: d.Table.Packets(), Date: d.Date.Format(time.DateOnly), Rows: st.Packets}
		switch {
		case !a.due(d.Date, asOf):
			r.Action, r.Reason = "live", fmt.Sprintf("archive after %d days", a.Retention)
		case st.Unsettled > 0:
			r.Action, r.Reason = "pending", fmt.Sprintf("%d packets not settled yet", st.Unsettled)
		default:
			r.Action, r.Reason = "due", "next run archives it"
		}
		out = append(out, r)
	}
	return out, nil
}

// Ensure creates the day tables of buckets for asOf and the next ahead days.
func Ensure(ctx context.Context, live *sql.DB, buckets []hongbao.Bucket, asOf time.Time, loc *time.Location, ahead int) (int, error) {
	return schema.NewEnsurer(live).EnsureDays(ctx, buckets, asOf.In(loc), ahead)
}
