package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/audit"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// openWallet opens a wallet in a database of its own on test SET a's
// MariaDB, dropped when the test ends.
func openWallet(t *testing.T) *wallet.Wallet {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_audit_test_")
	w, err := wallet.Open(context.Background(), cfg.FormatDSN(), nil, 4, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = w.DB().ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`")
		w.Close()
	})
	return w
}

// TestRunWalletAlone: the audit in process, on a wallet and no SET. A
// top-up moves no packet's money, so every invariant holds; a credit for
// a share no SET records breaks the sums, and the report names its packet
// and entry, in the order hbctl verify prints them.
func TestRunWalletAlone(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	u := dbtest.FreshUser()
	if _, _, err := w.TopUp(ctx, u, 1000, ""); err != nil {
		t.Fatal(err)
	}
	src := audit.Sources{Wallet: w, Location: dbtest.Shanghai(t)}
	rep, err := audit.Run(ctx, src, audit.Options{OrphansBefore: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Violations(); len(v) > 0 || rep.Wallet == nil || rep.Wallet.TopUps != 1000 || rep.Flight == nil {
		t.Fatalf("a top-up alone: violations %q, wallet %+v, flight %+v", v, rep.Wallet, rep.Flight)
	}

	p, err := hongbao.NewPacketID(time.Now(), 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	ghost := hongbao.Entry{Key: hongbao.OpenKey(p, u), User: u, Amount: 50, Kind: hongbao.KindOpen, Packet: p}
	if _, _, err := w.Apply(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	rep, err = audit.Run(ctx, src, audit.Options{OrphansBefore: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"money not conserved: debits 0 != credits + refunds + held + pending + outbox 50 (diff -50)",
		"0 shares but 1 credits delivered + 0 in outbox",
	}
	if !slices.Equal(rep.Money, want) {
		t.Errorf("the sums' violations %q, want %q", rep.Money, want)
	}
	if len(rep.Explained) != 1 || !strings.HasPrefix(rep.Explained[0], fmt.Sprintf("packet %s: in no SET's records", p)) ||
		!strings.Contains(rep.Explained[0], ghost.Key) {
		t.Errorf("explained %q, want packet %s and entry %s named", rep.Explained, p, ghost.Key)
	}
	if got := rep.Violations(); !slices.Equal(got, append(want, rep.Explained...)) {
		t.Errorf("violations %q, want the sums' then the packets named", got)
	}
}
