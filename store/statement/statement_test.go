package statement_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/statement"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// rig is a fresh SET on test MySQL a (its own buckets) and a wallet in a
// database of its own, moving money between them as the servers and the settler do.
type rig struct {
	st     *store.Store
	w      *wallet.Wallet
	bucket hongbao.Bucket
	minter *hongbao.Minter
	clock  atomic.Int64 // the store's offset from now, in ns
}

func newRig(t *testing.T) *rig {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_wallet_stmt_")
	w, err := wallet.Open(ctx, cfg.FormatDSN(), nil, 8, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = w.DB().ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`")
		w.Close()
	})
	db := dbtest.DB(t, "a", 8)
	set := dbtest.UniqueName("stm")
	b := hongbao.Bucket(rand.IntN(hongbao.Buckets))
	dbtest.Own(t, db, set, []hongbao.Bucket{b})
	r := &rig{w: w, bucket: b, minter: hongbao.NewMinter(time.Now)}
	now := func() time.Time { return time.Now().Add(time.Duration(r.clock.Load())) }
	r.st = store.New(db, set, dbtest.Shanghai(t), now, rand.Int64N)
	return r
}

// send tops the sender up, creates a packet and debits it, as a SET
// server does.
func (r *rig) send(t *testing.T, total int64, count int) (hongbao.PacketID, hongbao.UserID) {
	t.Helper()
	ctx := context.Background()
	sender := dbtest.FreshUser()
	if _, _, err := r.w.Apply(ctx, hongbao.Entry{Key: "topup:" + sender.String(), User: sender, Amount: total + 7, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
	id, err := r.minter.Next(r.bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.st.Create(ctx, store.NewPacket{ID: id, Sender: sender, Req: hongbao.SendRequest{Total: total, Count: count, Type: hongbao.Random},
		Expiry: time.Hour, Funding: hongbao.Pending}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.w.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(id), User: sender, Amount: -total, Kind: hongbao.KindSend, Packet: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Fund(ctx, id, hongbao.Funded); err != nil {
		t.Fatal(err)
	}
	return id, sender
}

// deliver credits the outbox rows of packets ids to the wallet and
// deletes them, as the settler does; not the settler itself, which also
// delivers the unnamed rows other tests leave in the shared MySQL.
func (r *rig) deliver(t *testing.T, ids []hongbao.PacketID) {
	t.Helper()
	ctx := context.Background()
	rows, err := r.st.Outbox(ctx, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var done []int64
	for _, row := range rows {
		if !slices.Contains(ids, row.Entry.Packet) {
			continue
		}
		if _, _, err := r.w.Apply(ctx, row.Entry); err != nil {
			t.Fatal(err)
		}
		done = append(done, row.ID)
	}
	if err := r.st.Delivered(ctx, done); err != nil {
		t.Fatal(err)
	}
}

// TestDailyMatchesTheLedger: after a load of sends, opens, expiries with
// refunds and their delivery to the wallet, the day's statement lists every ledger
// entry, its totals and the SETs' agree to the fen, every user's closing
// balance is the wallet's, and the files written are whole. A share
// changed behind the ledger's back is named.
func TestDailyMatchesTheLedger(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	var ids []hongbao.PacketID
	for i := range 12 {
		id, _ := r.send(t, int64(1000+37*i), 5+i%4)
		ids = append(ids, id)
		users := make([]hongbao.UserID, 2+i%6) // some sell out, some are left for a refund
		for k := range users {
			users[k] = dbtest.FreshUser()
		}
		if _, err := r.st.OpenBatch(ctx, id, users); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.Store(int64(2 * time.Hour)) // past every expiry: the rests are refunded
	for _, id := range ids {            // these packets only: the shared test MySQL holds other tests' in the bucket
		if _, _, err := r.st.Close(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	r.deliver(t, ids)
	from, to, err := statement.ParseDay(time.Now().In(dbtest.Shanghai(t)).Format(time.DateOnly), dbtest.Shanghai(t))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := statement.Daily(ctx, snap, r.st, "today", from, to)
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	var all int64
	if err := r.w.DB().QueryRow("SELECT COUNT(*) FROM ledger").Scan(&all); err != nil || int64(len(st.Entries)) != all {
		t.Fatalf("%d entries in the statement, %d in the ledger (%v)", len(st.Entries), all, err)
	}
	for _, k := range []string{hongbao.KindSend, hongbao.KindOpen, hongbao.KindRefund} {
		if st.Totals[k] != st.SETs[k] || st.Totals[k].N == 0 {
			t.Errorf("%s: ledger %+v, SETs %+v", k, st.Totals[k], st.SETs[k])
		}
	}
	var sum int64
	for _, tot := range st.Totals {
		sum += tot.Sum
	}
	var closing int64
	for _, b := range st.Balances {
		bal, err := r.w.Balance(ctx, b.User)
		if err != nil || b.Opening != 0 || b.Closing != bal {
			t.Errorf("user %s: opening %d closing %d, wallet balance %d (%v)", b.User, b.Opening, b.Closing, bal, err)
		}
		closing += b.Closing
	}
	if closing != sum || sum != st.Totals[hongbao.KindTopUp].Sum {
		t.Errorf("closing balances %d, entries %d, top-ups %d: money moved in the day must end where it came from", closing, sum, st.Totals[hongbao.KindTopUp].Sum)
	}
	checkFiles(t, st)
	checkMonthly(t, r, st)

	// A share that is not what the ledger credited.
	id := ids[0]
	details := r.st.Table(id).Details()
	if _, err := dbtest.DB(t, "a", 1).Exec("UPDATE "+details+" SET amount = amount + 1 WHERE packet_id = ? ORDER BY seq LIMIT 1", id); err != nil {
		t.Fatal(err)
	}
	snap, err = r.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	st, err = statement.Daily(ctx, snap, r.st, "today", from, to)
	if !errors.Is(err, statement.ErrDisagree) || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "open:"+id.String()) {
		t.Fatalf("a changed share: %v %v", err, st.Problems)
	}
}

// checkFiles writes st in both formats and reads the CSV back: one row
// per entry, total and balance, and no temporary file left.
func checkFiles(t *testing.T, st *statement.Statement) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range statement.Formats {
		if err := st.WriteFile(filepath.Join(dir, "s."+f), f); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "s.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + len(st.Entries) + len(st.Totals) + len(st.SETs) + len(st.Balances); len(rows) != want {
		t.Errorf("%d CSV rows, want %d", len(rows), want)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 2 {
		t.Errorf("files left: %v", names)
	}
	if err := st.WriteFile(filepath.Join(dir, "s.xml"), "xml"); err == nil {
		t.Error("format xml accepted")
	}
}

// TestParse: bad days and months are refused with the value named.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in    string
		month bool
		ok    bool
	}{
		{"2026-11-26", false, true}, {"2026-02-30", false, false}, {"26-11-2026", false, false}, {"", false, false},
		{"2026-11", true, true}, {"2026-13", true, false}, {"2026-11-01", true, false}, {"nov", true, false},
	} {
		parse := statement.ParseDay
		if tc.month {
			parse = statement.ParseMonth
		}
		from, to, err := parse(tc.in, time.UTC)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), `"`+tc.in+`"`)) || (tc.ok && !to.After(from)) {
			t.Errorf("%q: %v %v %v", tc.in, from, to, err)
		}
	}
}

// checkMonthly reads a sender's month with room for one entry: one listed,
// more set, the totals and closing balance still the whole month's.
func checkMonthly(t *testing.T, r *rig, daily *statement.Statement) {
	t.Helper()
	ctx := context.Background()
	var sender hongbao.UserID
	for _, e := range daily.Entries {
		if e.Kind == hongbao.KindRefund {
			sender = e.User
			break
		}
	}
	month := time.Now().In(dbtest.Shanghai(t)).Format("2006-01")
	from, to, err := statement.ParseMonth(month, dbtest.Shanghai(t))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	st, more, err := statement.Monthly(ctx, snap, sender, month, from, to, 1)
	if err != nil {
		t.Fatal(err)
	}
	bal, err := r.w.Balance(ctx, sender)
	if err != nil {
		t.Fatal(err)
	}
	if !more || len(st.Entries) != 1 || st.Totals[hongbao.KindRefund].N != 1 || st.Totals[hongbao.KindSend].N != 1 ||
		st.Totals[hongbao.KindTopUp].N != 1 || len(st.Balances) != 1 || st.Balances[0].Closing != bal {
		t.Errorf("month of %s: more %v, %d entries, totals %v, balances %v; wallet balance %d", sender, more, len(st.Entries), st.Totals, st.Balances, bal)
	}
}
