package statement_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
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
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/statement"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// rig is a fresh SET on test MySQL a (its own buckets) and a wallet in a
// database of its own, moving money between them as the servers and the settler do.
type rig struct {
	st     *store.Store
	w      *wallet.Wallet
	db     *sql.DB // the SET's MySQL
	bucket hongbao.Bucket
	minter *hongbao.Minter
	clock  atomic.Int64 // the store's offset from now, in ns
}

func newRig(t *testing.T) *rig {
	ctx := context.Background()
	// A private MariaDB: the check from the SETs' side reads every packet
	// of the day, and the shared one holds other tests' packets without
	// entries in this wallet.
	m := dbtest.StartMariaDB(t)
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "hb_wallet"
	w, err := wallet.Open(ctx, cfg.FormatDSN(), nil, 8, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	db, err := sqldb.Open(m.DSN, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	set := dbtest.UniqueName("stm")
	b := hongbao.Bucket(rand.IntN(hongbao.Buckets))
	dbtest.Own(t, db, set, []hongbao.Bucket{b})
	r := &rig{w: w, db: db, bucket: b, minter: hongbao.NewMinter(time.Now)}
	now := func() time.Time { return time.Now().Add(time.Duration(r.clock.Load())) }
	r.st = store.New(db, set, dbtest.Shanghai(t), now, rand.Int64N)
	return r
}

// daily builds today's statement as WriteStatement does: the SETs' moves
// first, then the wallet's snapshot.
func (r *rig) daily(t *testing.T) (*statement.Statement, error) {
	t.Helper()
	return r.dailyOf(t, r.readSETs(t))
}

// today is today's period in the cluster's zone.
type today struct {
	from, to time.Time
	money    *statement.SETMoney
}

// readSETs reads the SETs' side of today.
func (r *rig) readSETs(t *testing.T) today {
	t.Helper()
	from, to, err := statement.ParseDay(time.Now().In(dbtest.Shanghai(t)).Format(time.DateOnly), dbtest.Shanghai(t))
	if err != nil {
		t.Fatal(err)
	}
	money, err := statement.ReadSETs(context.Background(), r.st, from, to, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return today{from, to, money}
}

// dailyOf builds today's statement from d, the wallet's snapshot taken now.
func (r *rig) dailyOf(t *testing.T, d today) (*statement.Statement, error) {
	t.Helper()
	return statement.Daily(context.Background(), r.snapshot(t), r.st, d.money, "today", d.from, d.to)
}

// snapshot takes a snapshot of the wallet, closed when the test ends.
func (r *rig) snapshot(t *testing.T) *wallet.Snapshot {
	t.Helper()
	snap, err := r.w.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return snap
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
		Expiry: time.Minute, Funding: hongbao.Pending}); err != nil { // a minute: its expiry is today but in the day's last minute
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
	st, err := r.daily(t)
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
	if _, err := r.db.Exec("UPDATE "+details+" SET amount = amount + 1 WHERE packet_id = ? ORDER BY seq LIMIT 1", id); err != nil {
		t.Fatal(err)
	}
	st, err = r.daily(t)
	if !errors.Is(err, statement.ErrDisagree) || len(st.Problems) != 1 || !strings.HasPrefix(st.Problems[0].String(), "open:"+id.String()) {
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
	if want := 1 + len(st.Entries) + len(st.Totals) + len(st.SETs) + len(st.InFlight) + len(st.Balances) + len(st.Problems); len(rows) != want {
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
	st, more, err := statement.Monthly(ctx, r.snapshot(t), sender, month, from, to, 1)
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

// TestDailyNamesWhatTheLedgerLacks: the check from the SETs' side. A
// funded packet whose debit the ledger lacks, a share whose credit and an
// expired packet whose refund left the outbox without reaching the ledger
// are named as problems (their keys and amounts, in JSON and as CSV
// problem rows); a share whose credit is still in the outbox is in
// flight, not a problem.
func TestDailyNamesWhatTheLedgerLacks(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	lostDebit, _ := r.send(t, 900, 3)
	lostCredit, _ := r.send(t, 600, 2)
	flying, _ := r.send(t, 500, 5)
	u1, u2 := dbtest.FreshUser(), dbtest.FreshUser()
	a1, err := r.st.OpenBatch(ctx, lostCredit, []hongbao.UserID{u1})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := r.st.OpenBatch(ctx, flying, []hongbao.UserID{u2}) // its credit stays in the outbox
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.w.DB().Exec("DELETE FROM ledger WHERE entry_key = ?", hongbao.SendKey(lostDebit)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec("DELETE FROM hb_set.outbox WHERE packet_id = ? AND kind = 'open'", lostCredit); err != nil { // u1's credit, packed
		t.Fatal(err)
	}
	lostRefund, _ := r.send(t, 400, 4)
	if _, err := r.st.OpenBatch(ctx, lostRefund, []hongbao.UserID{dbtest.FreshUser()}); err != nil {
		t.Fatal(err)
	}
	r.clock.Store(int64(2 * time.Minute)) // past its expiry
	done, refund, err := r.st.Close(ctx, lostRefund)
	if err != nil || !done || refund <= 0 {
		t.Fatalf("close: %v %d %v", done, refund, err)
	}
	if _, err := r.db.Exec("DELETE FROM hb_set.outbox WHERE entry_key = ?", hongbao.RefundKey(lostRefund)); err != nil {
		t.Fatal(err)
	}
	r.deliver(t, []hongbao.PacketID{lostRefund}) // its credit: that share is in the ledger
	st, err := r.daily(t)
	if !errors.Is(err, statement.ErrDisagree) {
		t.Fatalf("statement: %v, want ErrDisagree", err)
	}
	var got []string
	for _, p := range st.Problems {
		got = append(got, fmt.Sprintf("%s %d", p.Key, p.Amount))
	}
	slices.Sort(got)
	want := []string{fmt.Sprintf("%s %d", hongbao.OpenKey(lostCredit, u1), a1.Outcomes[0].Result.Amount), fmt.Sprintf("%s -900", hongbao.SendKey(lostDebit)),
		fmt.Sprintf("%s %d", hongbao.RefundKey(lostRefund), refund)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems %v, want %v", st.Problems, want)
	}
	if st.InFlight[hongbao.KindOpen] != (statement.Total{N: 1, Sum: a2.Outcomes[0].Result.Amount}) || len(st.InFlight) != 1 {
		t.Errorf("in flight %v, want one credit of %d fen", st.InFlight, a2.Outcomes[0].Result.Amount)
	}
	var buf bytes.Buffer
	if err := st.Write(&buf, "csv"); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, row := range rows {
		if row[0] == "problem" && row[11] != "" {
			problems = append(problems, row[8]+" "+row[5])
		}
	}
	slices.Sort(problems)
	if !slices.Equal(problems, want) {
		t.Errorf("CSV problem rows %v, want %v", problems, want)
	}
	checkFiles(t, st)
}

// TestDailyOpeningBalance: a user with money from an earlier day. The
// statement's opening balance is that money and its closing balance the
// opening plus the day's entries, exact to the fen, equal to the wallet's.
func TestDailyOpeningBalance(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, sender := r.send(t, 1000, 4) // tops the sender up by 1007, then debits 1000
	if _, err := r.w.DB().Exec("UPDATE ledger SET created_at = created_at - INTERVAL 2 DAY WHERE entry_key = ?", "topup:"+sender.String()); err != nil {
		t.Fatal(err)
	}
	opener := dbtest.FreshUser()
	if _, _, err := r.w.Apply(ctx, hongbao.Entry{Key: "topup:old:" + opener.String(), User: opener, Amount: 250, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.w.DB().Exec("UPDATE ledger SET created_at = created_at - INTERVAL 3 DAY WHERE entry_key = ?", "topup:old:"+opener.String()); err != nil {
		t.Fatal(err)
	}
	shares, err := r.st.OpenBatch(ctx, id, []hongbao.UserID{opener})
	if err != nil {
		t.Fatal(err)
	}
	r.deliver(t, []hongbao.PacketID{id})
	st, err := r.daily(t)
	if err != nil {
		t.Fatal(err)
	}
	want := map[hongbao.UserID]statement.Balance{
		sender: {User: sender, Opening: 1007, Closing: 7},
		opener: {User: opener, Opening: 250, Closing: 250 + shares.Outcomes[0].Result.Amount},
	}
	if len(st.Balances) != 2 {
		t.Fatalf("balances %v, want %v", st.Balances, want)
	}
	for _, b := range st.Balances {
		bal, err := r.w.Balance(ctx, b.User)
		if err != nil || b != want[b.User] || b.Closing != bal {
			t.Errorf("balance %+v, want %+v; the wallet's %d (%v)", b, want[b.User], bal, err)
		}
	}
}

// TestDailyNamesUnreadableOutboxRows: a packed outbox row whose credits do
// not read (not as written) does not stop the day's statement: the
// statement is made, the row is a problem named by its number, and the
// credits it held, in neither the ledger nor a readable row, are named
// too, each saying that a row did not read. Before, the SETs' side of the
// statement failed as a whole on such a row. SETs sharing a MySQL each
// read the row; it is one problem.
func TestDailyNamesUnreadableOutboxRows(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, _ := r.send(t, 700, 3)
	users := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser()}
	b, err := r.st.OpenBatch(ctx, id, users)
	if err != nil {
		t.Fatal(err)
	}
	var row int64
	if err := r.db.QueryRow("SELECT id FROM hb_set.outbox WHERE packet_id = ? AND kind = 'open'", id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec("UPDATE hb_set.outbox SET shares = 'x:1' WHERE id = ?", row); err != nil {
		t.Fatal(err)
	}
	// Read as two SETs sharing the MySQL read it: once each.
	d := r.readSETs(t)
	d.money.Unreadable = append(d.money.Unreadable, d.money.Unreadable...)
	st, err := r.dailyOf(t, d)
	if !errors.Is(err, statement.ErrDisagree) || st == nil {
		t.Fatalf("statement: %v, want it made, with ErrDisagree", err)
	}
	var got []string
	unreadable := 0
	for _, p := range st.Problems {
		if p.Key == "" {
			unreadable++
			if !strings.Contains(p.Detail, fmt.Sprintf("outbox row %d", row)) || !strings.Contains(p.String(), "cannot be read") {
				t.Errorf("problem %q does not name outbox row %d", p, row)
			}
			continue
		}
		if !strings.HasSuffix(p.Detail, "(1 do not read)") {
			t.Errorf("problem %q does not say a row did not read", p)
		}
		got = append(got, fmt.Sprintf("%s %d", p.Key, p.Amount))
	}
	var want []string
	for i, u := range users {
		want = append(want, fmt.Sprintf("%s %d", hongbao.OpenKey(id, u), b.Outcomes[i].Result.Amount))
	}
	slices.Sort(got)
	slices.Sort(want)
	if unreadable != 1 || !slices.Equal(got, want) {
		t.Fatalf("problems %v: want the row and %v", st.Problems, want)
	}
	if len(st.InFlight) != 0 {
		t.Errorf("in flight %v: an unreadable row's credits are not known to be in flight", st.InFlight)
	}
	checkFiles(t, st)
}
