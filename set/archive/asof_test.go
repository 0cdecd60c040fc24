package archive_test

import (
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/archivetest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestArchiveFutureAsOfKeepsNewSends: an --as-of in the future makes
// today's day due. If a send lands in today's table between the copy and
// the purge (the SET keeps serving while the cron runs), it must not be
// lost: the purge may only remove what the copy verified.
func TestArchiveFutureAsOfKeepsNewSends(t *testing.T) {
	t.Parallel()
	f := archivetest.New(t)
	start := time.Now().Add(-time.Minute)
	if start.In(f.Loc).Day() != time.Now().Add(time.Second).In(f.Loc).Day() {
		start = time.Now() // right at local midnight: keep the packets on one day
	}
	sold := f.Create(archivetest.Spec{At: start, Bucket: 5, Total: 200, Count: 2, Opens: 2, Expiry: 2 * time.Minute})
	f.Settle(sold)
	var late hongbao.PacketID
	a := f.Archiver(7)
	a.AfterCopy = func(store.Day) error {
		if late == 0 {
			late = f.Create(archivetest.Spec{At: start.Add(time.Millisecond), Bucket: 5, Total: 500, Count: 5, Expiry: 24 * time.Hour})
		}
		return nil
	}
	_, err := a.Run(f.Ctx, time.Now().AddDate(0, 0, 30), false)
	if err != nil && late == 0 {
		// Refusing an --as-of in the future is a fix too.
		t.Logf("future as-of refused before any copy: %v", err)
		if _, _, err := f.Store.Packet(f.Ctx, sold); err != nil {
			t.Errorf("packet %s lost: %v", sold, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if late == 0 {
		t.Fatal("today's settled day was neither archived nor refused")
	}
	if _, _, err := f.Store.Packet(f.Ctx, late); err != nil {
		t.Errorf("packet %s, sent during the run, is in neither the day table nor the archive: %v", late, err)
	}
}
