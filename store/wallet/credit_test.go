package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// keys lists the keys of es.
func keys(es []hongbao.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

func TestCreditBatch(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	a, b, sender := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	first := []hongbao.Entry{
		{Key: hongbao.OpenKey(11, a), User: a, Amount: 120, Kind: hongbao.KindOpen, Packet: 11},
		{Key: hongbao.OpenKey(12, a), User: a, Amount: 3, Kind: hongbao.KindOpen, Packet: 12},
		{Key: hongbao.OpenKey(11, b), User: b, Amount: 80, Kind: hongbao.KindOpen, Packet: 11},
		{Key: hongbao.RefundKey(12), User: sender, Amount: 997, Kind: hongbao.KindRefund, Packet: 12},
	}
	c, err := w.Credit(ctx, first)
	if err != nil || len(c.Fresh) != 4 || len(c.Existing) != 0 {
		t.Fatalf("first Credit = %d fresh %v, %d existing, %v; want 4 fresh", len(c.Fresh), keys(c.Fresh), len(c.Existing), err)
	}
	for _, e := range c.Fresh {
		if e.Seq == 0 || e.At.IsZero() {
			t.Errorf("fresh entry %s without seq or time: %+v", e.Key, e)
		}
	}
	// Re-delivery of two of them, with one new credit and one old key
	// carrying another amount: only the new one moves money, the old ones
	// come back as the ledger holds them.
	second := []hongbao.Entry{
		first[2],
		{Key: hongbao.OpenKey(12, b), User: b, Amount: 5, Kind: hongbao.KindOpen, Packet: 12},
		{Key: first[0].Key, User: a, Amount: 999, Kind: hongbao.KindOpen, Packet: 11},
		first[2], // twice in one batch
		{Key: hongbao.OpenKey(13, b), User: b, Amount: 7, Kind: hongbao.KindOpen, Packet: 13},
		{Key: hongbao.OpenKey(13, b), User: b, Amount: 7, Kind: hongbao.KindOpen, Packet: 13}, // a new key twice
	}
	c, err = w.Credit(ctx, second)
	if err != nil || len(c.Fresh) != 2 || c.Fresh[0].Key != hongbao.OpenKey(12, b) || c.Fresh[1].Key != hongbao.OpenKey(13, b) {
		t.Fatalf("second Credit = fresh %v, %v; want %s and %s", keys(c.Fresh), err, hongbao.OpenKey(12, b), hongbao.OpenKey(13, b))
	}
	got := map[string]int64{}
	for _, e := range c.Existing {
		got[e.Key] = e.Amount
	}
	if len(got) != 3 || got[first[0].Key] != 120 || got[first[2].Key] != 80 || got[hongbao.OpenKey(13, b)] != 7 {
		t.Errorf("existing %v; want %s: 120, %s: 80 and %s: 7", got, first[0].Key, first[2].Key, hongbao.OpenKey(13, b))
	}
	for u, want := range map[hongbao.UserID]int64{a: 123, b: 92, sender: 997} {
		if bal, err := w.Balance(ctx, u); err != nil || bal != want {
			t.Errorf("balance of %s: %d, %v; want %d", u, bal, err, want)
		}
	}
	if _, bad, err := w.Verify(ctx); err != nil || len(bad) != 0 {
		t.Errorf("Verify: %v, %v", bad, err)
	}
}

func TestCreditRefusesWhatIsNotACredit(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	u := dbtest.FreshUser()
	good := hongbao.Entry{Key: hongbao.OpenKey(21, u), User: u, Amount: 10, Kind: hongbao.KindOpen, Packet: 21}
	for _, tc := range []struct {
		name string
		bad  hongbao.Entry
	}{
		{"debit", hongbao.Entry{Key: hongbao.SendKey(21), User: u, Amount: -10, Kind: hongbao.KindSend, Packet: 21}},
		{"zero", hongbao.Entry{Key: hongbao.OpenKey(22, u), User: u, Amount: 0, Kind: hongbao.KindOpen, Packet: 22}},
		{"key too long", hongbao.Entry{Key: fmt.Sprintf("open:%097d", 1), User: u, Amount: 1, Kind: hongbao.KindOpen}},
		{"no key", hongbao.Entry{User: u, Amount: 1, Kind: hongbao.KindOpen}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.Credit(ctx, []hongbao.Entry{good, tc.bad})
			if !errors.Is(err, wallet.ErrNotCredit) {
				t.Fatalf("Credit with %+v = %v, want ErrNotCredit", tc.bad, err)
			}
			// Nothing of the batch is recorded.
			if _, ok, err := w.Entry(ctx, good.Key); ok || err != nil {
				t.Errorf("entry %s after a refused batch: %v, %v; want none", good.Key, ok, err)
			}
			if bal, _ := w.Balance(ctx, u); bal != 0 {
				t.Errorf("balance %d after a refused batch, want 0", bal)
			}
		})
	}
}

// TestCreditConcurrentOverlappingBatches delivers one set of credits (many
// users, several credits each, refunds among them) as overlapping batches
// in shuffled order from eight goroutines at once, three times over: every
// key is recorded once, the fresh entries the calls report add up to the
// set, and every balance is its user's sum to the fen.
func TestCreditConcurrentOverlappingBatches(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	users := make([]hongbao.UserID, 40)
	for i := range users {
		users[i] = dbtest.FreshUser()
	}
	var all []hongbao.Entry
	want := map[hongbao.UserID]int64{}
	for p := range 30 {
		id := hongbao.PacketID(1000 + p)
		for _, u := range users[p%7 : p%7+25] {
			e := hongbao.Entry{Key: hongbao.OpenKey(id, u), User: u, Amount: 1 + rand.Int64N(5000), Kind: hongbao.KindOpen, Packet: id}
			all = append(all, e)
			want[u] += e.Amount
		}
		s := users[p%len(users)]
		all = append(all, hongbao.Entry{Key: hongbao.RefundKey(id), User: s, Amount: 1 + int64(p), Kind: hongbao.KindRefund, Packet: id})
		want[s] += 1 + int64(p)
	}
	var mu sync.Mutex
	freshKeys := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 3 {
				es := append([]hongbao.Entry(nil), all...)
				r.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
				for len(es) > 0 {
					n := min(len(es), 1+r.IntN(120))
					c, err := w.Credit(ctx, es[:n])
					if err != nil {
						t.Errorf("Credit: %v", err)
						return
					}
					mu.Lock()
					for _, e := range c.Fresh {
						freshKeys[e.Key]++
					}
					mu.Unlock()
					es = es[n:]
				}
			}
		})
	}
	wg.Wait()
	if len(freshKeys) != len(all) {
		t.Errorf("%d keys reported fresh, want %d", len(freshKeys), len(all))
	}
	for k, n := range freshKeys {
		if n != 1 {
			t.Errorf("key %s reported fresh %d times", k, n)
		}
	}
	for u, sum := range want {
		if bal, err := w.Balance(ctx, u); err != nil || bal != sum {
			t.Errorf("balance of %s: %d, %v; want %d", u, bal, err, sum)
		}
	}
	var n int
	if err := w.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger").Scan(&n); err != nil || n != len(all) {
		t.Errorf("ledger rows %d, %v; want %d", n, err, len(all))
	}
	if _, bad, err := w.Verify(ctx); err != nil || len(bad) != 0 {
		t.Errorf("Verify: %v, %v", bad, err)
	}
}
