package settle_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/settle"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// batchRig is a SET's database and a wallet on a private MariaDB, without
// servers: the test writes the outbox itself.
type batchRig struct {
	set *sql.DB
	dsn string
	w   *wallet.Wallet
}

func newBatchRig(t *testing.T) *batchRig {
	t.Helper()
	m := dbtest.StartMariaDB(t)
	ctx := t.Context()
	db, err := sqldb.Open(m.DSN, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := schema.EnsureSet(ctx, db); err != nil {
		t.Fatal(err)
	}
	w, err := wallet.Open(ctx, m.DSN+"hb_wallet", nil, 16, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &batchRig{set: db, dsn: m.DSN, w: w}
}

// settler returns a settler of the rig's SET with its own pool.
func (r *batchRig) settler(t *testing.T, batch, workers int) *settle.Settler {
	t.Helper()
	db, err := sqldb.Open(r.dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := settle.New(store.New(db, "a", time.UTC, time.Now, rand.Int64N), r.w, time.Now, zap.NewNop())
	s.Batch, s.Workers = batch, workers
	return s
}

// put writes es to the outbox.
func (r *batchRig) put(t *testing.T, es []hongbao.Entry) {
	t.Helper()
	for chunk := range slices.Chunk(es, 500) {
		q := "INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES "
		var args []any
		for i, e := range chunk {
			if i > 0 {
				q += ","
			}
			q += "(?,?,?,?,?,?)"
			args = append(args, e.Key, e.User, e.Amount, e.Kind, e.Packet, time.Now().UTC())
		}
		if _, err := r.set.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// putPacked writes es to the outbox as open transactions write credits:
// a packet's credits packed, up to per in a row, under SET a's packed name
// (store/outboxrows.go);
// anything not a credit of an open is written as put writes it.
func (r *batchRig) putPacked(t *testing.T, es []hongbao.Entry, per int) {
	t.Helper()
	var single []hongbao.Entry
	byPacket := map[hongbao.PacketID][]hongbao.Entry{}
	var order []hongbao.PacketID
	for _, e := range es {
		if e.Kind != hongbao.KindOpen {
			single = append(single, e)
			continue
		}
		if byPacket[e.Packet] == nil {
			order = append(order, e.Packet)
		}
		byPacket[e.Packet] = append(byPacket[e.Packet], e)
	}
	for _, p := range order {
		for row := range slices.Chunk(byPacket[p], per) {
			var shares []string
			var sum int64
			for _, e := range row {
				shares = append(shares, fmt.Sprintf("%d:%d", e.User, e.Amount))
				sum += e.Amount
			}
			if _, err := r.set.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name, n, shares) VALUES (?,0,?,?,?,?,'a/packed',?,?)",
				"opens:"+p.String(), sum, hongbao.KindOpen, p, time.Now().UTC(), len(row), strings.Join(shares, ",")); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.put(t, single)
}

// TestBatchDeliveryExactlyOnce fills the outbox with credits of many
// packets (half of them packed as open transactions write them) and
// refunds to their senders (users who both open and send among
// them), some of them already in the wallet as after a settler that
// crashed between the wallet's commit and the outbox delete, some twice in
// the outbox; then three settlers deliver it at once, in batches, with
// parallel workers. Every key is in the ledger once with its amount, every
// balance is its user's sum to the fen, and the outbox is empty.
func TestBatchDeliveryExactlyOnce(t *testing.T) {
	r := newBatchRig(t)
	ctx := t.Context()
	users := make([]hongbao.UserID, 300)
	for i := range users {
		users[i] = dbtest.FreshUser()
	}
	var all []hongbao.Entry
	want := map[hongbao.UserID]int64{}
	for p := range 40 {
		id := hongbao.PacketID(5000 + p)
		for j := range 100 {
			u := users[(p*37+j)%len(users)]
			e := hongbao.Entry{Key: hongbao.OpenKey(id, u), User: u, Amount: 1 + rand.Int64N(20000), Kind: hongbao.KindOpen, Packet: id}
			all = append(all, e)
			want[u] += e.Amount
		}
		if p%3 == 0 {
			s := users[p]
			all = append(all, hongbao.Entry{Key: hongbao.RefundKey(id), User: s, Amount: 1 + rand.Int64N(1e6), Kind: hongbao.KindRefund, Packet: id})
			want[s] += all[len(all)-1].Amount
		}
	}
	// A settler crashed after the wallet's commit of some of them.
	crashed := all[len(all)/3 : len(all)/3+700]
	if c, err := r.w.Credit(ctx, crashed); err != nil || len(c.Fresh) != len(crashed) {
		t.Fatalf("credit before the crash: %d fresh, %v", len(c.Fresh), err)
	}
	// Half the packets' credits packed, as open transactions write them
	// (rows of up to 7, split among the settlers' parts and transactions).
	var packed, single []hongbao.Entry
	for _, e := range all {
		if e.Packet%2 == 0 {
			packed = append(packed, e)
		} else {
			single = append(single, e)
		}
	}
	r.putPacked(t, packed, 7)
	r.put(t, single)
	r.put(t, all[:250]) // and some rows twice
	outbox := len(all) + 250

	settlers := []*settle.Settler{r.settler(t, 97, 4), r.settler(t, 500, 3), r.settler(t, 1, 2)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	removed := 0
	for _, s := range settlers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := s.Deliver(ctx)
				if err != nil {
					t.Errorf("deliver: %v", err)
					return
				}
				mu.Lock()
				removed += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != 0 {
		t.Fatalf("%d rows left in the outbox", n)
	}
	// Settlers racing on the same rows may each count a row they both
	// delivered; never fewer than the rows there were.
	if removed < outbox {
		t.Errorf("deliveries report %d rows removed, want at least %d", removed, outbox)
	}
	checkLedger(t, r.w, all, want)
}

// checkLedger checks that the ledger holds exactly the entries all, each
// once with its amount, and that every user's balance is want.
func checkLedger(t *testing.T, w *wallet.Wallet, all []hongbao.Entry, want map[hongbao.UserID]int64) {
	t.Helper()
	ctx := context.Background()
	amounts := map[string]int64{}
	rows, err := w.DB().QueryContext(ctx, "SELECT entry_key, amount FROM ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var k string
		var a int64
		if err := rows.Scan(&k, &a); err != nil {
			t.Fatal(err)
		}
		amounts[k] = a
		n++
	}
	if n != len(all) {
		t.Errorf("ledger rows %d, want %d", n, len(all))
	}
	for _, e := range all {
		if got, ok := amounts[e.Key]; !ok || got != e.Amount {
			t.Errorf("ledger %s: %d (present %v), want %d", e.Key, got, ok, e.Amount)
		}
	}
	for u, sum := range want {
		if bal, err := w.Balance(ctx, u); err != nil || bal != sum {
			t.Errorf("balance of %s: %d, %v; want %d", u, bal, err, sum)
		}
	}
	if _, bad, err := w.Verify(ctx); err != nil || len(bad) != 0 {
		t.Errorf("wallet verify: %v, %v", bad, err)
	}
}

// TestDeliverKeepsAConflictingRow: in one batch with good credits, a row
// whose key the ledger holds for another amount moves nothing and stays in
// the outbox; the rest are delivered and removed.
func TestDeliverKeepsAConflictingRow(t *testing.T) {
	r := newBatchRig(t)
	ctx := t.Context()
	u, v := dbtest.FreshUser(), dbtest.FreshUser()
	old := hongbao.Entry{Key: hongbao.OpenKey(77, u), User: u, Amount: 300, Kind: hongbao.KindOpen, Packet: 77}
	if _, err := r.w.Credit(ctx, []hongbao.Entry{old}); err != nil {
		t.Fatal(err)
	}
	conflict := old
	conflict.Amount = 301
	good := []hongbao.Entry{
		{Key: hongbao.OpenKey(78, u), User: u, Amount: 5, Kind: hongbao.KindOpen, Packet: 78},
		{Key: hongbao.OpenKey(77, v), User: v, Amount: 9, Kind: hongbao.KindOpen, Packet: 77},
		{Key: hongbao.RefundKey(77), User: v, Amount: 1, Kind: hongbao.KindRefund, Packet: 77},
	}
	r.put(t, append([]hongbao.Entry{conflict}, good...))
	n, err := r.settler(t, 500, 1).Deliver(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Deliver = %d, %v; want the 3 good rows", n, err)
	}
	// The kept row comes back first in every read: a delivery that read
	// all it may is full even though it delivered one row less.
	more := hongbao.Entry{Key: hongbao.OpenKey(79, u), User: u, Amount: 7, Kind: hongbao.KindOpen, Packet: 79}
	r.put(t, []hongbao.Entry{more})
	good = append(good, more)
	sent, full, err := r.settler(t, 1, 2).DeliverRead(ctx)
	if err != nil || sent != 1 || !full {
		t.Fatalf("a delivery reading the kept row and one more (Batch 1, Workers 2) = %d delivered, full %v, %v; want 1, full", sent, full, err)
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox WHERE entry_key = ? AND amount = 301", conflict.Key); n != 1 {
		t.Errorf("conflicting row: %d left, want it kept", n)
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != 1 {
		t.Errorf("%d rows left, want only the conflicting one", n)
	}
	checkLedger(t, r.w, append([]hongbao.Entry{old}, good...), map[hongbao.UserID]int64{u: 312, v: 10})
}

// TestDeliverTransactions: a delivery records its credits in as few
// wallet transactions as Batch allows (one "credits delivered" line each),
// split among at most Workers, and every credit once.
func TestDeliverTransactions(t *testing.T) {
	r := newBatchRig(t)
	ctx := t.Context()
	tests := []struct {
		rows, batch, workers int
		perUser              int   // rows of one user (0: 1)
		wantTx               []int // entries of each wallet transaction, in any order
	}{
		{1, 500, 4, 0, []int{1}},
		{300, 500, 4, 0, []int{300}},
		{500, 500, 4, 0, []int{500}},
		{6, 500, 4, 3, []int{6}}, // two users' credits, one transaction
		{1, 0, 0, 0, []int{1}},   // no Batch or Workers set: one at a time
		// More than a batch: a part per batch read, split by user (the
		// consecutive users below split evenly).
		{2, 1, 4, 0, []int{1, 1}},
		{12, 3, 4, 0, []int{3, 3, 3, 3}},
	}
	for i, tt := range tests {
		var es []hongbao.Entry
		want := map[hongbao.UserID]int64{}
		for j := range tt.rows {
			u := hongbao.UserID(9_000_000 + 1000*i + j/max(tt.perUser, 1)) // the parts split by user
			id := hongbao.PacketID(7000 + 100*i + j)
			es = append(es, hongbao.Entry{Key: hongbao.OpenKey(id, u), User: u, Amount: int64(1 + j), Kind: hongbao.KindOpen, Packet: id})
			want[u] += int64(1 + j)
		}
		r.put(t, es)
		core, logs := observer.New(zapcore.InfoLevel)
		s := settle.New(store.New(r.set, "a", time.UTC, time.Now, rand.Int64N), r.w, time.Now, zap.New(core))
		s.Batch, s.Workers = tt.batch, tt.workers
		n, err := s.Deliver(ctx)
		if err != nil || n != tt.rows {
			t.Fatalf("%d rows, batch %d: Deliver = %d, %v", tt.rows, tt.batch, n, err)
		}
		var got []int
		for _, e := range logs.FilterMessage("credits delivered").All() {
			got = append(got, int(e.ContextMap()["entries"].(int64)))
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.wantTx) {
			t.Errorf("%d rows, batch %d, %d workers: wallet transactions of %v entries, want %v", tt.rows, tt.batch, tt.workers, got, tt.wantTx)
		}
		if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != 0 {
			t.Fatalf("%d rows left in the outbox", n)
		}
		for u, sum := range want {
			if bal, err := r.w.Balance(ctx, u); err != nil || bal != sum {
				t.Errorf("balance of %s: %d, %v; want %d", u, bal, err, sum)
			}
		}
	}
}

// TestDeliverPackedRows: the credits a packed row holds are delivered each
// once; a row with one the ledger cannot hold (its key taken by another
// amount) is kept whole and set aside, its other credits in the ledger
// once, and a packed row that does not read (not as written) is kept and
// set aside too, while the rows beside them are delivered and removed.
func TestDeliverPackedRows(t *testing.T) {
	r := newBatchRig(t)
	ctx := t.Context()
	u1, u2, u3, v := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	const p hongbao.PacketID = 81
	old := hongbao.Entry{Key: hongbao.OpenKey(p, u2), User: u2, Amount: 50, Kind: hongbao.KindOpen, Packet: p}
	if _, err := r.w.Credit(ctx, []hongbao.Entry{old}); err != nil {
		t.Fatal(err)
	}
	packed := []hongbao.Entry{
		{Key: hongbao.OpenKey(p, u1), User: u1, Amount: 11, Kind: hongbao.KindOpen, Packet: p},
		{Key: hongbao.OpenKey(p, u2), User: u2, Amount: 22, Kind: hongbao.KindOpen, Packet: p}, // the conflict
		{Key: hongbao.OpenKey(p, u3), User: u3, Amount: 33, Kind: hongbao.KindOpen, Packet: p},
	}
	good := hongbao.Entry{Key: hongbao.OpenKey(82, v), User: v, Amount: 7, Kind: hongbao.KindOpen, Packet: 82}
	r.putPacked(t, packed, 3)
	if _, err := r.set.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name, n, shares) VALUES ('opens:83', 0, 9, 'open', 83, UTC_TIMESTAMP(3), 'a/packed', 2, '5:x,6:4')"); err != nil {
		t.Fatal(err)
	}
	r.put(t, []hongbao.Entry{good})
	s := r.settler(t, 3, 2) // the credits read in two parts
	if n, err := s.Deliver(ctx); err != nil || n != 3 {
		t.Fatalf("Deliver = %d, %v; want 3 credits (u1, u3 and v)", n, err)
	}
	if n, err := s.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("Deliver again = %d, %v; want nothing: the kept rows are set aside", n, err)
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id IN (81, 83) AND n > 1"); n != 2 {
		t.Errorf("%d packed rows kept, want both", n)
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != 2 {
		t.Errorf("%d rows left, want the two kept", n)
	}
	checkLedger(t, r.w, []hongbao.Entry{old, packed[0], packed[2], good}, map[hongbao.UserID]int64{u1: 11, u2: 50, u3: 33, v: 7})
}
