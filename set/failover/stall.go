package failover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Stall bounds a write that may wait for a semi-sync acknowledgement
// forever (the default for money), so that an operator is not left looking
// at a command that says nothing: after SayAfter, Say is told what the
// write waits for and what to run; after GiveUp the write fails with the
// same words.
type Stall struct {
	SayAfter time.Duration
	GiveUp   time.Duration
	// Say receives why the write waits, each time that changes.
	Say func(why string)
}

// NewStall is a Stall saying why after 5 s, giving up after 2 minutes.
func NewStall(say func(why string)) Stall {
	return Stall{SayAfter: 5 * time.Second, GiveUp: 2 * time.Minute, Say: say}
}

// Run runs write against the MySQL at one of dsns (every member write
// may go to; what names it, fix what to run when no replica acknowledges
// its commits). While write waits, it probes the servers on connections
// of their own and, when one's commits wait for an acknowledgement, says
// so; after GiveUp write is abandoned with that reason.
func (s Stall) Run(ctx context.Context, what string, dsns []string, fix string, write func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, s.GiveUp)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- write(wctx) }()
	said := ""
	tick := time.NewTicker(s.SayAfter)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && said != "" && errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: gave up after %v: %s: %w", what, s.GiveUp, said, err)
			}
			return err
		case <-tick.C:
			if why := stallReasons(ctx, dsns, fix); why != "" && why != said {
				if s.Say != nil {
					s.Say(why)
				}
				said = why
			}
		}
	}
}

// stallReasons is stallReason of the first of dsns that says something.
func stallReasons(ctx context.Context, dsns []string, fix string) string {
	for _, dsn := range dsns {
		if why := stallReason(ctx, dsn, fix); why != "" {
			return why
		}
	}
	return ""
}

// stallReason says why commits on dsn's server do not return: waiting for
// a semi-sync acknowledgement ("" otherwise, or when the server cannot
// tell).
func stallReason(ctx context.Context, dsn, fix string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	c.Timeout, c.ReadTimeout, c.DBName = 2*time.Second, 2*time.Second, ""
	db, err := sqldb.Open(c.FormatDSN(), 1)
	if err != nil {
		return ""
	}
	defer db.Close()
	var waiting, clients int
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_WAIT_SESSIONS'),
		(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS')`).Scan(&waiting, &clients)
	if err != nil || waiting == 0 {
		return ""
	}
	connected := "no replica is connected"
	if clients > 0 {
		// A replica killed a moment ago still counts until the primary
		// notices its connection is gone.
		connected = fmt.Sprintf("%d replica(s) connected, none acknowledging", clients)
	}
	return fmt.Sprintf("%s holds %d commit(s) waiting for a replica's acknowledgement, %s "+
		"(semi-sync waits forever: nothing is acknowledged on one machine); %s", c.Addr, waiting, connected, fix)
}
