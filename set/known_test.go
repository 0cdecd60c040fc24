package set

// Unit tests of the known packets (known.go), with no I/O: what learn keeps
// and forgets, what get and answer give, and expiry. The bound's eviction
// order is in known_eviction_test.go; the open path that uses known, on the
// real stack, in known_answers_test.go, known_stale_test.go and
// known_servers_test.go.

import (
	"maps"
	"reflect"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// t0 is the unit tests' time.
var t0 = time.Date(2025, 2, 1, 12, 0, 0, 0, time.UTC)

// batch is a committed batch of packet id with count shares, the openers
// given, expiring an hour after t0: what learn is fed.
func batch(id hongbao.PacketID, count int, openers map[hongbao.UserID]int64) store.Batch {
	var taken int64
	for _, a := range openers {
		taken += a
	}
	total := taken + 100*int64(count)
	p := &hongbao.Packet{ID: id, Type: hongbao.Random, Total: total, Count: count,
		RemainingAmount: total - taken, RemainingCount: count - len(openers),
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Funding: hongbao.Funded}
	return store.Batch{Packet: p, Openers: openers}
}

// checkKnown asserts the bookkeeping of k: held is the shares of the packets
// held plus knownCost each and within the limit, and every packet held is
// named in order. It returns the packets held in the order they will be
// evicted (first name in order first).
func checkKnown(t *testing.T, k *known) []hongbao.PacketID {
	t.Helper()
	k.mu.RLock()
	defer k.mu.RUnlock()
	sum := 0
	for _, e := range k.packets {
		sum += len(e.kn.Openers) + knownCost
	}
	if sum != k.held {
		t.Errorf("held = %d, the packets known hold %d", k.held, sum)
	}
	if k.held > k.limit {
		t.Errorf("held %d, over the limit %d", k.held, k.limit)
	}
	var live []hongbao.PacketID
	seen := map[hongbao.PacketID]bool{}
	for _, n := range k.order {
		if e, ok := k.packets[n.id]; ok && e.gen == n.gen && !seen[n.id] {
			seen[n.id] = true
			live = append(live, n.id)
		}
	}
	if len(live) != len(k.packets) {
		t.Errorf("order %v names %d of the %d packets known", k.order, len(live), len(k.packets))
	}
	return live
}

// TestKnownLearnGetAnswerForget proves a learnt packet is returned as learnt, answers already_opened (exact amount) only for its openers and live for others, and forget drops it.
func TestKnownLearnGetAnswerForget(t *testing.T) {
	k := newKnown(1000)
	if kn := k.get(1, t0); kn != nil {
		t.Fatalf("get of a packet never learnt = %+v", kn)
	}
	if o, answered, live := k.answer(1, 11, t0); answered || live || o != (hongbao.Outcome{}) {
		t.Fatalf("answer of a packet never learnt = %+v, %v, %v", o, answered, live)
	}
	op := map[hongbao.UserID]int64{11: 37, 12: 1, 13: 262}
	b := batch(1, 5, op)
	k.learn(1, b, t0)
	kn := k.get(1, t0)
	if kn == nil || !reflect.DeepEqual(kn.Packet, *b.Packet) || !maps.Equal(kn.Openers, op) {
		t.Fatalf("get after learn = %+v; want packet %+v with openers %v", kn, *b.Packet, op)
	}
	if k.size() != 1 || k.held != len(op)+knownCost {
		t.Errorf("size %d held %d; want 1 and %d", k.size(), k.held, len(op)+knownCost)
	}
	for u, amount := range op {
		o, answered, live := k.answer(1, u, t0.Add(time.Minute))
		want := hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.AlreadyOpened}
		if !answered || !live || o.Err != nil || o.Result != want {
			t.Errorf("answer(1, opener %d) = %+v, %v, %v; want %+v", u, o, answered, live, want)
		}
	}
	if o, answered, live := k.answer(1, 14, t0); answered || !live || o != (hongbao.Outcome{}) {
		t.Errorf("answer(1, newcomer) = %+v, %v, %v; want not answered, live", o, answered, live)
	}
	if _, answered, live := k.answer(2, 11, t0); answered || live {
		t.Errorf("an opener of packet 1 is answered for packet 2: %v, %v", answered, live)
	}
	k.forget(2) // never known: nothing changes
	if k.size() != 1 {
		t.Errorf("forget of an unknown packet changed size to %d", k.size())
	}
	k.forget(1)
	if kn := k.get(1, t0); kn != nil || k.size() != 0 || k.held != 0 {
		t.Errorf("after forget: get %+v, size %d, held %d", kn, k.size(), k.held)
	}
	if _, answered, live := k.answer(1, 11, t0); answered || live {
		t.Errorf("a forgotten opener is answered: %v, %v", answered, live)
	}
	checkKnown(t, k)
}

// TestKnownLearnForgets proves learn forgets (or never keeps) a packet not active (sold out, expired, closed), or of at most upTo shares without openers, or without packet.
func TestKnownLearnForgets(t *testing.T) {
	k := newKnown(40)
	if k.upTo() != 10 {
		t.Fatalf("upTo() = %d with limit 40, want 10", k.upTo())
	}
	if got := newKnown(1 << 30).upTo(); got != knownUpTo {
		t.Errorf("upTo() with a huge limit = %d, want %d", got, knownUpTo)
	}
	soldOut := batch(1, 3, openers(100, 3))
	expired := batch(1, 3, openers(100, 1))
	expired.Packet.ExpiresAt = t0
	closed := batch(1, 3, openers(100, 1))
	closed.Packet.Closed = true
	noOpeners := batch(1, 3, nil)
	for _, tc := range []struct {
		name string
		b    store.Batch
	}{
		{"sold out", soldOut},
		{"expired", expired},
		{"closed", closed},
		{"openers nil", noOpeners},
		{"packet nil", store.Batch{Openers: openers(100, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKnown(40)
			k.learn(1, tc.b, t0)
			if k.size() != 0 || k.get(1, t0) != nil {
				t.Errorf("learnt from scratch: size %d", k.size())
			}
			k.learn(1, batch(1, 10, openers(100, 2)), t0) // exactly upTo: kept
			if k.get(1, t0) == nil {
				t.Fatal("a packet of upTo shares is not known")
			}
			k.learn(2, batch(2, 1, nil), t0) // another packet: must stay
			k.learn(2, batch(2, 1, map[hongbao.UserID]int64{}), t0)
			k.learn(1, tc.b, t0)
			if kn := k.get(1, t0); kn != nil || k.size() != 1 || k.get(2, t0) == nil {
				t.Errorf("after learning it again: packet 1 %+v, size %d (want 1: packet 2)", kn, k.size())
			}
			if _, answered, live := k.answer(1, 101, t0); answered || live {
				t.Errorf("forgotten packet answered: %v, %v", answered, live)
			}
			checkKnown(t, k)
		})
	}
	t.Run("count above upTo, sold out", func(t *testing.T) {
		k := newKnown(40)
		k.learn(1, batch(1, 11, nil), t0)
		k.learn(1, batch(1, 11, openers(100, 11)), t0)
		if k.size() != 0 || k.get(1, t0) != nil {
			t.Errorf("a sold-out packet above upTo is known: size %d", k.size())
		}
	})
	t.Run("limit 0", func(t *testing.T) {
		k := newKnown(0)
		k.learn(1, batch(1, 1, map[hongbao.UserID]int64{}), t0)
		if k.size() != 0 || k.held != 0 {
			t.Errorf("a known of limit 0 knows %d packets", k.size())
		}
	})
}

// TestKnownGetExpires proves get and answer give nothing from the packet's ExpiresAt on, even for a known opener.
func TestKnownGetExpires(t *testing.T) {
	k := newKnown(1000)
	b := batch(7, 4, map[hongbao.UserID]int64{70: 5})
	k.learn(7, b, t0)
	exp := b.Packet.ExpiresAt
	if k.get(7, exp.Add(-time.Millisecond)) == nil {
		t.Fatal("get a millisecond before expiry = nil")
	}
	if o, answered, _ := k.answer(7, 70, exp.Add(-time.Millisecond)); !answered || o.Result.Amount != 5 {
		t.Errorf("answer a millisecond before expiry = %+v, %v", o, answered)
	}
	for _, at := range []time.Time{exp, exp.Add(time.Millisecond), exp.Add(48 * time.Hour)} {
		if kn := k.get(7, at); kn != nil {
			t.Errorf("get at %v (expiry %v) = %+v, want nil", at, exp, kn)
		}
		if o, answered, live := k.answer(7, 70, at); answered || live {
			t.Errorf("answer of the opener at %v = %+v, %v, %v; want nothing", at, o, answered, live)
		}
	}
}

// TestKnownLearnSent: only a packet this send created, with every share
// left, is learnt (with no openers); a replayed send teaches nothing and
// never overwrites what later transactions taught.
func TestKnownLearnSent(t *testing.T) {
	fresh := func(id hongbao.PacketID) *hongbao.Packet { return batch(id, 10, nil).Packet }
	opened := batch(3, 10, openers(100, 2)).Packet // a replay that found shares taken
	for _, tc := range []struct {
		name    string
		p       *hongbao.Packet
		created bool
		want    bool
	}{
		{"created here", fresh(1), true, true},
		{"replayed send", fresh(2), false, false},
		{"created, but shares taken meanwhile", opened, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKnown(1000)
			k.learnSent(tc.p, tc.created, t0)
			kn := k.get(tc.p.ID, t0)
			if (kn != nil) != tc.want {
				t.Fatalf("known = %+v, want known: %v", kn, tc.want)
			}
			if kn != nil && (len(kn.Openers) != 0 || kn.Openers == nil || kn.Packet.RemainingCount != tc.p.Count) {
				t.Errorf("known %+v, want the fresh packet with an empty list of openers", kn)
			}
		})
	}
	t.Run("does not overwrite newer knowledge", func(t *testing.T) {
		k := newKnown(1000)
		later := batch(4, 10, openers(200, 3))
		k.learn(4, later, t0)
		k.learnSent(batch(4, 10, nil).Packet, true, t0)
		if kn := k.get(4, t0); kn == nil || len(kn.Openers) != 3 || kn.Packet.RemainingCount != 7 {
			t.Errorf("known %+v after a late send, want the 3 openers learnt after it", kn)
		}
	})
}

// TestKnownUnlisted: a packet above upTo shares is known without its
// openers (unlisted, whatever the batch carried), for a knownCost; its
// next transaction may use it, and no open of it is answered from memory
// nor called live (memcached has its openers).
func TestKnownUnlisted(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    store.Batch
	}{
		{"no openers", batch(1, 11, nil)},
		{"openers carried", batch(1, 11, openers(100, 3))},
		{"a fresh packet", batch(1, 500, map[hongbao.UserID]int64{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKnown(40)
			k.learn(1, tc.b, t0)
			kn := k.get(1, t0)
			if kn == nil || !kn.Unlisted || kn.Openers != nil || kn.Packet.RemainingCount != tc.b.Packet.RemainingCount {
				t.Fatalf("get = %+v; want the packet, unlisted, no openers", kn)
			}
			if !kn.Usable(t0) {
				t.Error("an unlisted packet taking opens is not usable")
			}
			for u := range tc.b.Openers {
				if _, answered, live := k.answer(1, u, t0); answered || live {
					t.Errorf("opener %d of an unlisted packet: answered %v, live %v; want neither", u, answered, live)
				}
			}
			if k.held != knownCost {
				t.Errorf("held %d, want knownCost %d", k.held, knownCost)
			}
			checkKnown(t, k)
		})
	}
}
