package archivetest

import (
	"sync"
	"time"

	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/store"
)

// BlockedRun is an archive run of SET a stopped between the verified copy
// of its first day and the purge: it holds the SET's archive lock until
// Finish.
type BlockedRun struct {
	release chan struct{}
	done    chan runResult
	once    sync.Once
	res     runResult
}

type runResult struct {
	sum archive.Summary
	err error
}

// BlockRun starts a run of SET a keeping retention days at asOf and
// returns once it holds the lock and has copied its first day. A run not
// finished by the test is let go (and waited for) when the test ends.
func (f *Fixture) BlockRun(retention int, asOf time.Time) *BlockedRun {
	f.t.Helper()
	b := &BlockedRun{release: make(chan struct{}), done: make(chan runResult, 1)}
	entered := make(chan struct{})
	var once sync.Once
	a := f.Archiver(retention)
	a.AfterCopy = func(store.Day) error {
		once.Do(func() { close(entered) })
		<-b.release
		return nil
	}
	go func() {
		s, err := a.Run(f.Ctx, asOf, false)
		b.done <- runResult{s, err}
	}()
	f.t.Cleanup(func() { b.Finish() })
	select {
	case <-entered:
	case r := <-b.done:
		b.done <- r // for Finish
		f.t.Fatalf("first run ended before its hook: %+v", r)
	case <-time.After(30 * time.Second):
		f.t.Fatal("first run never reached its hook")
	}
	return b
}

// Finish lets the run go on and returns its result.
func (b *BlockedRun) Finish() (archive.Summary, error) {
	b.once.Do(func() {
		close(b.release)
		b.res = <-b.done
	})
	return b.res.sum, b.res.err
}

// HoldLock takes SET a's archive lock on a connection of its own, as a run
// on another host would, and returns the function that releases it. The
// connection is closed when the test ends.
func (f *Fixture) HoldLock() (release func()) {
	f.t.Helper()
	conn, err := f.DB.Conn(f.Ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	var got int
	if err := conn.QueryRowContext(f.Ctx, "SELECT GET_LOCK('hb_archive:a', 0)").Scan(&got); err != nil || got != 1 {
		f.t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	return func() {
		f.t.Helper()
		if _, err := conn.ExecContext(f.Ctx, "DO RELEASE_LOCK('hb_archive:a')"); err != nil {
			f.t.Fatal(err)
		}
	}
}
