package set

// Tests of the known packets (known.go) and of the open path that uses them
// (open.go): unit tests of the bounded map, then the real server stack on
// the test MariaDB and memcached. These are internal tests (package set), so
// they build their own small stack (kStack) instead of the harness of the
// external tests, and look inside the server (s.known, s.memo) where the
// answer alone cannot tell.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/router/clustertest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/hongbao-dev/hongbao/store/dbtest"
)

// --- Unit tests of known (no I/O) -----------------------------------------

// kT0 is the unit tests' time.
var kT0 = time.Date(2025, 2, 1, 12, 0, 0, 0, time.UTC)

// kBatch is a committed batch of packet id with count shares, the openers
// given, expiring an hour after kT0: what learn is fed.
func kBatch(id hongbao.PacketID, count int, openers map[hongbao.UserID]int64) store.Batch {
	var taken int64
	for _, a := range openers {
		taken += a
	}
	total := taken + 100*int64(count)
	p := &hongbao.Packet{ID: id, Type: hongbao.Random, Total: total, Count: count,
		RemainingAmount: total - taken, RemainingCount: count - len(openers),
		CreatedAt: kT0, ExpiresAt: kT0.Add(time.Hour), Funding: hongbao.Funded}
	return store.Batch{Packet: p, Openers: openers}
}

// kHeld asserts the bookkeeping of k: held is the shares of the packets
// held plus knownCost each and within the limit, and every packet held is
// named in order. It returns the packets held in the order they will be
// evicted (first name in order first).
func kHeld(t *testing.T, k *known) []hongbao.PacketID {
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
	if kn := k.get(1, kT0); kn != nil {
		t.Fatalf("get of a packet never learnt = %+v", kn)
	}
	if o, answered, live := k.answer(1, 11, kT0); answered || live || o != (hongbao.Outcome{}) {
		t.Fatalf("answer of a packet never learnt = %+v, %v, %v", o, answered, live)
	}
	op := map[hongbao.UserID]int64{11: 37, 12: 1, 13: 262}
	b := kBatch(1, 5, op)
	k.learn(1, b, kT0)
	kn := k.get(1, kT0)
	if kn == nil || kn.Packet != *b.Packet || !maps.Equal(kn.Openers, op) {
		t.Fatalf("get after learn = %+v; want packet %+v with openers %v", kn, *b.Packet, op)
	}
	if k.size() != 1 || k.held != len(op)+knownCost {
		t.Errorf("size %d held %d; want 1 and %d", k.size(), k.held, len(op)+knownCost)
	}
	for u, amount := range op {
		o, answered, live := k.answer(1, u, kT0.Add(time.Minute))
		want := hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.AlreadyOpened}
		if !answered || !live || o.Err != nil || o.Result != want {
			t.Errorf("answer(1, opener %d) = %+v, %v, %v; want %+v", u, o, answered, live, want)
		}
	}
	if o, answered, live := k.answer(1, 14, kT0); answered || !live || o != (hongbao.Outcome{}) {
		t.Errorf("answer(1, newcomer) = %+v, %v, %v; want not answered, live", o, answered, live)
	}
	if _, answered, live := k.answer(2, 11, kT0); answered || live {
		t.Errorf("an opener of packet 1 is answered for packet 2: %v, %v", answered, live)
	}
	k.forget(2) // never known: nothing changes
	if k.size() != 1 {
		t.Errorf("forget of an unknown packet changed size to %d", k.size())
	}
	k.forget(1)
	if kn := k.get(1, kT0); kn != nil || k.size() != 0 || k.held != 0 {
		t.Errorf("after forget: get %+v, size %d, held %d", kn, k.size(), k.held)
	}
	if _, answered, live := k.answer(1, 11, kT0); answered || live {
		t.Errorf("a forgotten opener is answered: %v, %v", answered, live)
	}
	kHeld(t, k)
}

// TestKnownLearnForgets proves learn forgets (or never keeps) a packet above upTo, not active (sold out, expired, closed), or without openers or packet.
func TestKnownLearnForgets(t *testing.T) {
	k := newKnown(40)
	if k.upTo() != 10 {
		t.Fatalf("upTo() = %d with limit 40, want 10", k.upTo())
	}
	if got := newKnown(1 << 30).upTo(); got != knownUpTo {
		t.Errorf("upTo() with a huge limit = %d, want %d", got, knownUpTo)
	}
	soldOut := kBatch(1, 3, openers(100, 3))
	expired := kBatch(1, 3, openers(100, 1))
	expired.Packet.ExpiresAt = kT0
	closed := kBatch(1, 3, openers(100, 1))
	closed.Packet.Closed = true
	noOpeners := kBatch(1, 3, nil)
	for _, tc := range []struct {
		name string
		b    store.Batch
	}{
		{"count above upTo", kBatch(1, 11, openers(100, 1))},
		{"sold out", soldOut},
		{"expired", expired},
		{"closed", closed},
		{"openers nil", noOpeners},
		{"packet nil", store.Batch{Openers: openers(100, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKnown(40)
			k.learn(1, tc.b, kT0)
			if k.size() != 0 || k.get(1, kT0) != nil {
				t.Errorf("learnt from scratch: size %d", k.size())
			}
			k.learn(1, kBatch(1, 10, openers(100, 2)), kT0) // exactly upTo: kept
			if k.get(1, kT0) == nil {
				t.Fatal("a packet of upTo shares is not known")
			}
			k.learn(2, kBatch(2, 1, nil), kT0) // another packet: must stay
			k.learn(2, kBatch(2, 1, map[hongbao.UserID]int64{}), kT0)
			k.learn(1, tc.b, kT0)
			if kn := k.get(1, kT0); kn != nil || k.size() != 1 || k.get(2, kT0) == nil {
				t.Errorf("after learning it again: packet 1 %+v, size %d (want 1: packet 2)", kn, k.size())
			}
			if _, answered, live := k.answer(1, 101, kT0); answered || live {
				t.Errorf("forgotten packet answered: %v, %v", answered, live)
			}
			kHeld(t, k)
		})
	}
	t.Run("limit 0", func(t *testing.T) {
		k := newKnown(0)
		k.learn(1, kBatch(1, 1, map[hongbao.UserID]int64{}), kT0)
		if k.size() != 0 || k.held != 0 {
			t.Errorf("a known of limit 0 knows %d packets", k.size())
		}
	})
}

// TestKnownGetExpires proves get and answer give nothing from the packet's ExpiresAt on, even for a known opener.
func TestKnownGetExpires(t *testing.T) {
	k := newKnown(1000)
	b := kBatch(7, 4, map[hongbao.UserID]int64{70: 5})
	k.learn(7, b, kT0)
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

// kModel is the FIFO the bound promises: the packets held in the order
// they were learnt (learning a held packet again keeps its place), each
// with its cost; while over the limit, the first goes.
type kModel struct {
	limit int
	ids   []hongbao.PacketID
	cost  map[hongbao.PacketID]int
}

func (m *kModel) learn(id hongbao.PacketID, openers int) {
	if _, ok := m.cost[id]; !ok {
		m.ids = append(m.ids, id)
	}
	m.cost[id] = openers + knownCost
	for m.held() > m.limit {
		delete(m.cost, m.ids[0])
		m.ids = m.ids[1:]
	}
}

func (m *kModel) forget(id hongbao.PacketID) {
	if _, ok := m.cost[id]; ok {
		delete(m.cost, id)
		m.ids = slices.DeleteFunc(m.ids, func(x hongbao.PacketID) bool { return x == id })
	}
}

func (m *kModel) held() int {
	n := 0
	for _, c := range m.cost {
		n += c
	}
	return n
}

// kCheckModel asserts that k holds what the model holds, in its order.
func kCheckModel(t *testing.T, step string, k *known, m *kModel) {
	t.Helper()
	got := kHeld(t, k)
	if !slices.Equal(got, m.ids) || k.held != m.held() {
		t.Fatalf("%s: known holds %v (held %d); the FIFO holds %v (held %d)", step, got, k.held, m.ids, m.held())
	}
	for _, id := range m.ids {
		if kn := k.get(id, kT0); kn == nil || len(kn.Openers)+knownCost != m.cost[id] {
			t.Fatalf("%s: packet %d: %+v, want %d openers", step, id, kn, m.cost[id]-knownCost)
		}
	}
}

// TestKnownBoundFIFO proves held stays within the limit, the packet learnt first goes first, and learning a packet again replaces its cost in place.
func TestKnownBoundFIFO(t *testing.T) {
	k := newKnown(60) // upTo 15; a packet with n shares costs n+8
	m := &kModel{limit: 60, cost: map[hongbao.PacketID]int{}}
	steps := []struct {
		id      hongbao.PacketID
		openers int
		want    []hongbao.PacketID // held after the step, oldest first
		held    int
	}{
		{1, 2, []hongbao.PacketID{1}, 10},
		{2, 2, []hongbao.PacketID{1, 2}, 20},
		{3, 2, []hongbao.PacketID{1, 2, 3}, 30},
		{4, 2, []hongbao.PacketID{1, 2, 3, 4}, 40},
		{5, 2, []hongbao.PacketID{1, 2, 3, 4, 5}, 50},
		{2, 7, []hongbao.PacketID{1, 2, 3, 4, 5}, 55}, // learnt again: 10 -> 15, same place
		{6, 5, []hongbao.PacketID{2, 3, 4, 5, 6}, 58}, // +13 = 68: 1 goes
		{3, 12, []hongbao.PacketID{3, 4, 5, 6}, 53},   // again, 10 -> 20: 68, 2 goes
		{7, 0, []hongbao.PacketID{4, 5, 6, 7}, 41},    // +8 = 61: 3 goes
		{8, 14, []hongbao.PacketID{5, 6, 7, 8}, 53},   // +22 = 63: 4 goes
		{9, 0, []hongbao.PacketID{6, 7, 8, 9}, 51},    // +8 = 61: 5 goes
		{10, 0, []hongbao.PacketID{6, 7, 8, 9, 10}, 59},
	}
	for i, st := range steps {
		k.learn(st.id, kBatch(st.id, 15, openers(1000*int(st.id), st.openers)), kT0)
		m.learn(st.id, st.openers)
		got := kHeld(t, k)
		if !slices.Equal(got, st.want) || k.held != st.held {
			t.Fatalf("step %d (learn %d with %d shares): holds %v, held %d; want %v, %d", i+1, st.id, st.openers, got, k.held, st.want, st.held)
		}
		kCheckModel(t, fmt.Sprintf("step %d", i+1), k, m)
	}
	// Random learning, again and again of the same packets, against the
	// model. Limits of every size, down to one packet's cost or less.
	for _, limit := range []int{9, 16, 50, 120, 400} {
		k := newKnown(limit)
		m := &kModel{limit: limit, cost: map[hongbao.PacketID]int{}}
		r := mrand.New(mrand.NewPCG(uint64(limit), 7))
		upTo := k.upTo()
		for i := range 3000 {
			id := hongbao.PacketID(1 + r.IntN(40))
			n := r.IntN(upTo) // fewer than the count: still active
			k.learn(id, kBatch(id, upTo, openers(1000*int(id), n)), kT0)
			m.learn(id, n)
			kCheckModel(t, fmt.Sprintf("limit %d, step %d (learn %d with %d shares)", limit, i, id, n), k, m)
		}
	}
}

// TestKnownFIFOAfterForget proves a packet forgotten then learnt again (a failed transaction, then a good one) is evicted after the packets learnt before it.
func TestKnownFIFOAfterForget(t *testing.T) {
	// known.forget leaves the packet's name in order; learning it again
	// appends a second name, and eviction must not take it by the first.
	k := newKnown(24) // upTo 6; three packets without shares fill it
	m := &kModel{limit: 24, cost: map[hongbao.PacketID]int{}}
	empty := map[hongbao.UserID]int64{}
	for _, id := range []hongbao.PacketID{1, 2, 3} {
		k.learn(id, kBatch(id, 1, empty), kT0)
		m.learn(id, 0)
	}
	k.forget(1)
	m.forget(1)
	kCheckModel(t, "forget 1", k, m)
	k.learn(1, kBatch(1, 1, empty), kT0) // learnt last: 2, 3, 1
	m.learn(1, 0)
	k.learn(4, kBatch(4, 1, empty), kT0) // one too many: 2 must go
	m.learn(4, 0)
	if k.get(2, kT0) != nil || k.get(1, kT0) == nil {
		t.Errorf("learning 4 kept packet 2 (learnt before 3 and 1) and evicted 1, learnt last but for 4: order %v", k.order)
	}
	kCheckModel(t, "learn 4", k, m) // 3, 1, 4
}

// TestKnownOrderBounded proves the order list stays bounded (2*known+67 names at most) over 10,000 learn/forget cycles of the same packets.
func TestKnownOrderBounded(t *testing.T) {
	for _, keep := range []int{0, 50} {
		t.Run(fmt.Sprintf("%d kept", keep), func(t *testing.T) {
			k := newKnown(10000)
			for i := range keep {
				id := hongbao.PacketID(1000 + i)
				k.learn(id, kBatch(id, 2, openers(0, 1)), kT0)
			}
			sold := kBatch(3, 2, openers(0, 2)) // sold out: learning it forgets
			for range 10000 {
				k.learn(1, kBatch(1, 2, openers(0, 1)), kT0)
				k.learn(2, kBatch(2, 2, openers(0, 1)), kT0)
				k.learn(3, kBatch(3, 2, openers(0, 1)), kT0)
				k.learn(1, kBatch(1, 2, openers(0, 1)), kT0) // again: no new name
				k.forget(1)
				k.forget(2)
				k.learn(3, sold, kT0)
			}
			if k.size() != keep {
				t.Errorf("%d packets known, want the %d kept", k.size(), keep)
			}
			if bound := 2*keep + 64 + 3; len(k.order) > bound {
				t.Errorf("order names %d packets after 10,000 cycles (%d known), want at most %d", len(k.order), k.size(), bound)
			}
			kHeld(t, k)
			// And the packets kept are still the first to go.
			if keep > 0 {
				id := hongbao.PacketID(9999)
				for range (k.limit - k.held) / knownCost {
					k.learn(id, kBatch(id, 2, map[hongbao.UserID]int64{}), kT0)
					id++
				}
				k.learn(id, kBatch(id, 3, openers(0, 2)), kT0) // 2 more than fits
				if k.get(1000, kT0) != nil || k.get(1001, kT0) == nil || k.get(id, kT0) == nil {
					t.Errorf("learning past the limit did not evict exactly the oldest packet")
				}
				kHeld(t, k)
			}
		})
	}
}

// --- The server stack -------------------------------------------------------

// kSecret is the router -> server secret of every kStack.
var kSecret = []byte("known-test-internal-secret-0123456789")

// kOpts tunes newKStack; the zero value is the usual setup.
type kOpts struct {
	set   string           // the SET, owned by the caller; "": a fresh one owned here
	mc    string           // memcached; "": test SET a's
	memo  int              // SoldOutMemo (and so the known bound); 0: 10000
	conns int              // the server's own MySQL pool; 0: 4
	now   func() time.Time // the server's and its store's clock; nil: time.Now
}

// kStack is one server of the real stack (store on test SET a's MariaDB,
// cache on a memcached, queues, HTTP handler behind httptest), with a MySQL
// pool of its own that a test can exhaust.
type kStack struct {
	db     *sql.DB // the tests' own SQL
	pool   *sql.DB // the server's pool, of conns connections
	conns  int
	set    string
	srv    *Server
	url    string
	client *http.Client
	auth   *api.Internal
}

func newKStack(t *testing.T, o kOpts) *kStack {
	t.Helper()
	db := dbtest.DB(t, "a", 16)
	if o.set == "" {
		o.set = dbtest.UniqueName("k")
		dbtest.Own(t, db, o.set, schema.AllBuckets())
	}
	if o.mc == "" {
		o.mc = dbtest.Memcached(t, "a")
	}
	if o.memo == 0 {
		o.memo = 10000
	}
	if o.conns == 0 {
		o.conns = 4
	}
	if o.now == nil {
		o.now = time.Now
	}
	pool := dbtest.DB(t, "a", o.conns)
	loc := dbtest.Shanghai(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	srv := NewServer(Deps{
		Store:  store.New(pool, o.set, loc, o.now, mrand.Int64N),
		Cache:  cache.New([]string{o.mc}, 500*time.Millisecond, 64, log),
		Auth:   api.NewInternal(kSecret, time.Now),
		Limits: hongbao.DefaultLimits(),
		// A short Idle: a packet's worker retires (and gives its memcached
		// slot back) soon after its last open, so a test can wait for quiet.
		Queue:       queue.Config{Size: 1024, Batch: 32, Idle: 300 * time.Millisecond, TxTimeout: 5 * time.Second, SlotCap: 2, Parallel: o.conns, Merge: 8},
		SoldOutMemo: o.memo,
		Loc:         loc,
		Now:         o.now,
		Log:         log,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("server close: %v", err)
		}
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close) // before srv.Close: requests first, then queues
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &kStack{db: db, pool: pool, conns: o.conns, set: o.set, srv: srv, url: hs.URL,
		client: &http.Client{Transport: tr, Timeout: 3 * time.Second}, auth: api.NewInternal(kSecret, time.Now)}
}

type kReply = clustertest.Reply

func (s *kStack) do(method, path string, user hongbao.UserID, body []byte) kReply {
	req, err := clustertest.NewRequest(method, s.url+path, body, nil)
	if err != nil {
		return kReply{Err: err}
	}
	s.auth.Sign(req, user)
	return clustertest.Do(s.client, req)
}

func (s *kStack) open(user hongbao.UserID, id hongbao.PacketID) kReply {
	return s.do(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil)
}

func (s *kStack) grab(user hongbao.UserID, id hongbao.PacketID) kReply {
	return s.do(http.MethodPost, "/v1/packets/"+id.String()+"/grab", user, nil)
}

// send creates a random packet through the API and returns its ID.
func (s *kStack) send(t *testing.T, total int64, count int) hongbao.PacketID {
	t.Helper()
	body := fmt.Sprintf(`{"total":%d,"count":%d,"type":"random","greeting":"恭喜发财"}`, total, count)
	r := s.do(http.MethodPost, "/v1/packets", dbtest.FreshUser(), []byte(body))
	if r.Status != http.StatusCreated {
		t.Fatalf("send: %v", r)
	}
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatalf("send answered id %q: %v", r.Str("id"), err)
	}
	return id
}

// kOpened asserts r is 200 with status and amount (amount 0: any share
// of at least 1 fen) and returns the amount.
func kOpened(t *testing.T, what string, r kReply, status string, amount int64) int64 {
	t.Helper()
	if r.Status != http.StatusOK || r.Str("status") != status || r.Amount() < 1 || (amount != 0 && r.Amount() != amount) {
		want := "any amount"
		if amount != 0 {
			want = strconv.FormatInt(amount, 10)
		}
		t.Errorf("%s: %v; want 200 %s %s", what, r, status, want)
	}
	return r.Amount()
}

// kGrabbed asserts r is grab's exact answer: 200 {"can_open":canOpen} plus
// the reason when it cannot.
func kGrabbed(t *testing.T, what string, r kReply, canOpen bool, reason string) {
	t.Helper()
	wantKeys := 2
	if canOpen {
		wantKeys = 1
	}
	if r.Status != http.StatusOK || r.JSON["can_open"] != canOpen || r.Str("reason") != reason || len(r.JSON) != wantKeys {
		t.Errorf("%s: %v; want 200 can_open %v reason %q", what, r, canOpen, reason)
	}
}

// knowsTruth asserts the server knows packet id exactly as MySQL holds it:
// every share, what is left, and returns MySQL's packet.
func (s *kStack) knowsTruth(t *testing.T, what string, id hongbao.PacketID) *dbtest.Packet {
	t.Helper()
	p := dbtest.CheckPacket(t, s.db, id)
	kn := s.srv.known.get(id, s.srv.now())
	switch {
	case kn == nil:
		t.Errorf("%s: packet %d not known; MySQL has %d shares, %d left", what, id, len(p.Shares), p.RemainingCount)
	case !maps.Equal(kn.Openers, p.Shares) || kn.Packet.RemainingAmount != p.RemainingAmount || kn.Packet.RemainingCount != p.RemainingCount ||
		kn.Packet.Total != p.Total || kn.Packet.Count != p.Count || kn.Packet.Closed:
		t.Errorf("%s: known %d/%d closed=%v openers %v; MySQL %d/%d openers %v", what, kn.Packet.RemainingAmount, kn.Packet.RemainingCount,
			kn.Packet.Closed, kn.Openers, p.RemainingAmount, p.RemainingCount, p.Shares)
	}
	return p
}

// exhaust takes every connection of the server's pool, so that anything
// the server asks of MySQL waits, and returns the pool's wait count (which
// any such ask increments) and the function that gives them back.
func (s *kStack) exhaust(t *testing.T) (waits int64, release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conns := make([]*sql.Conn, 0, s.conns)
	release = func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	for range s.conns {
		c, err := s.pool.Conn(ctx)
		if err != nil {
			release()
			t.Fatalf("take the server's connections: %v", err)
		}
		conns = append(conns, c)
	}
	st := s.pool.Stats()
	if st.InUse != s.conns || st.MaxOpenConnections != s.conns {
		release()
		t.Fatalf("pool %+v: not every connection is held", st)
	}
	return st.WaitCount, release
}

// kMcOps is how many commands a memcached has served (gets, sets, cas,
// deletes, touches, increments), from its stats.
func kMcOps(t *testing.T, addr string) int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		t.Fatal(err)
	}
	counted := map[string]bool{"cmd_get": true, "cmd_set": true, "cmd_touch": true, "cmd_flush": true, "delete_hits": true,
		"delete_misses": true, "incr_hits": true, "incr_misses": true, "decr_hits": true, "decr_misses": true, "cas_misses": true,
		"cas_hits": true, "cas_badval": true}
	var n int64
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "END" {
			return n
		}
		if len(f) == 3 && f[0] == "STAT" && counted[f[1]] {
			v, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("memcached stat %q: %v", sc.Text(), err)
			}
			n += v
		}
	}
	t.Fatalf("memcached stats: no END: %v", sc.Err())
	return 0
}

// quiet waits until packet id's worker has retired and memcached (the
// server's own) has served no command for a while, and returns its count.
func (s *kStack) quiet(t *testing.T, id hongbao.PacketID, mc string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.srv.queue.Live(id) {
		if time.Now().After(deadline) {
			t.Fatalf("packet %d's worker still live", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	last := kMcOps(t, mc)
	for {
		time.Sleep(150 * time.Millisecond)
		n := kMcOps(t, mc)
		if n == last {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached %s never quiet", mc)
		}
		last = n
	}
}

// kUsers returns n distinct fresh users.
func kUsers(n int) []hongbao.UserID {
	seen := map[hongbao.UserID]bool{}
	var us []hongbao.UserID
	for len(us) < n {
		if u := dbtest.FreshUser(); !seen[u] {
			seen[u] = true
			us = append(us, u)
		}
	}
	return us
}

// kSameShares asserts that the shares told are exactly MySQL's.
func kSameShares(t *testing.T, what string, told, mysql map[hongbao.UserID]int64) {
	t.Helper()
	if !maps.Equal(told, mysql) {
		t.Errorf("%s: answers told shares %v; MySQL holds %v", what, told, mysql)
	}
}

// TestKnownRepeatedOpenFromMemory proves opened packets become known, known openers' repeated opens are answered exactly without MySQL or memcached, new openers get MySQL's shares, and a sell-out moves the packet to the memo.
func TestKnownRepeatedOpenFromMemory(t *testing.T) {
	t.Parallel()
	mc := dbtest.StartMemcached(t) // the server's own: its command count is the server's
	s := newKStack(t, kOpts{mc: mc.Addr})
	id := s.send(t, 600, 6)
	users := kUsers(9)
	told := map[hongbao.UserID]int64{}
	for _, u := range users[:3] {
		told[u] = kOpened(t, "first open", s.open(u, id), hongbao.Opened, 0)
	}
	if n := s.srv.KnownLive(); n != 1 {
		t.Errorf("KnownLive() = %d after three opens of a 6-share packet, want 1", n)
	}
	p := s.knowsTruth(t, "after three opens", id)
	kSameShares(t, "after three opens", told, p.Shares)

	// No MySQL: every pooled connection is held, so any ask would wait
	// (and count in WaitCount). No memcached: the server's own one serves
	// no command meanwhile.
	ops := s.quiet(t, id, mc.Addr)
	waits, release := s.exhaust(t)
	defer release() // a second call gives nothing back twice
	for round := range 2 {
		for _, u := range users[:3] {
			start := time.Now()
			kOpened(t, fmt.Sprintf("repeated open %d over HTTP", round), s.open(u, id), hongbao.AlreadyOpened, told[u])
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := s.srv.Open(ctx, id, u)
			cancel()
			if want := (hongbao.OpenResult{User: u, Amount: told[u], Status: hongbao.AlreadyOpened}); err != nil || res != want {
				t.Errorf("repeated Server.Open by %d: %+v, %v; want %+v", u, res, err, want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("repeated opens by %d took %v with the pool held", u, d)
			}
		}
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("repeated opens of known openers waited %d times for a MySQL connection, want 0", st.WaitCount-waits)
	}
	if n := kMcOps(t, mc.Addr); n != ops {
		t.Errorf("repeated opens of known openers sent %d commands to memcached, want 0", n-ops)
	}
	// Control: a newcomer's open does need MySQL, so it waits for the pool.
	// It goes through the queue and takes its share once the pool is back.
	newcomer := make(chan kReply, 1)
	go func() { newcomer <- s.open(users[3], id) }()
	select {
	case r := <-newcomer:
		t.Errorf("a newcomer's open answered with every connection held: %v; the check above proves nothing", r)
	case <-time.After(500 * time.Millisecond):
	}
	if st := s.pool.Stats(); st.WaitCount == waits {
		t.Errorf("the newcomer's open did not wait for a connection: the pool is not held")
	}
	release()
	told[users[3]] = kOpened(t, "newcomer's open once the pool is back", <-newcomer, hongbao.Opened, 0)

	// New openers of the known packet: exact shares, and the knowledge
	// follows MySQL after each.
	p = s.knowsTruth(t, "after the newcomer", id)
	kSameShares(t, "after the newcomer", told, p.Shares)
	told[users[4]] = kOpened(t, "new opener", s.open(users[4], id), hongbao.Opened, 0)
	p = s.knowsTruth(t, "after a new opener", id)
	kSameShares(t, "after a new opener", told, p.Shares)
	// The last share: sold out, remembered by the memo, no longer known.
	told[users[5]] = kOpened(t, "last share", s.open(users[5], id), hongbao.Opened, 0)
	p = dbtest.CheckPacket(t, s.db, id)
	kSameShares(t, "sold out", told, p.Shares)
	if p.RemainingCount != 0 || p.RemainingAmount != 0 || len(p.Shares) != 6 {
		t.Errorf("after six opens: %d shares, %d/%d left; want 6 shares, sold out", len(p.Shares), p.RemainingAmount, p.RemainingCount)
	}
	if n, kn := s.srv.KnownLive(), s.srv.known.get(id, time.Now()); n != 0 || kn != nil {
		t.Errorf("sold out: KnownLive() = %d, known %+v; want 0, nil", n, kn)
	}
	if !s.srv.memo.knows(id) || s.srv.SoldOutRemembered() != 1 {
		t.Errorf("sold out: memo knows %v, remembers %d packets; want true, 1", s.srv.memo.knows(id), s.srv.SoldOutRemembered())
	}
	waits, release = s.exhaust(t)
	defer release()
	for _, u := range users {
		r := s.open(u, id)
		if amount, ok := told[u]; ok {
			kOpened(t, "open after sell-out", r, hongbao.AlreadyOpened, amount)
		} else if !r.IsProblem(http.StatusConflict, "sold_out") {
			t.Errorf("newcomer %d after sell-out: %v; want 409 sold_out", u, r)
		}
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("opens of a sold-out packet waited %d times for MySQL, want 0 (the memo answers)", st.WaitCount-waits)
	}
}

// TestKnownGrab proves grab answers already_opened to known and memo openers and sold_out to a memo newcomer from memory alone (no MySQL connection).
func TestKnownGrab(t *testing.T) {
	t.Parallel()
	s := newKStack(t, kOpts{})
	live := s.send(t, 300, 3)
	soldOut := s.send(t, 200, 2)
	u := kUsers(6)
	amount := kOpened(t, "open of the live packet", s.open(u[0], live), hongbao.Opened, 0)
	a1 := kOpened(t, "open of the 2-share packet", s.open(u[1], soldOut), hongbao.Opened, 0)
	a2 := kOpened(t, "last share of the 2-share packet", s.open(u[2], soldOut), hongbao.Opened, 0)
	if a1+a2 != 200 || s.srv.known.get(live, time.Now()) == nil || !s.srv.memo.knows(soldOut) {
		t.Fatalf("setup: shares %d+%d of 200, live known %v, sold-out remembered %v", a1, a2,
			s.srv.known.get(live, time.Now()) != nil, s.srv.memo.knows(soldOut))
	}
	waits, release := s.exhaust(t)
	kGrabbed(t, "grab by the known opener", s.grab(u[0], live), false, hongbao.AlreadyOpened)
	kGrabbed(t, "grab by a memo's opener", s.grab(u[1], soldOut), false, hongbao.AlreadyOpened)
	kGrabbed(t, "grab by a newcomer to a sold-out packet", s.grab(u[3], soldOut), false, string(hongbao.SoldOut))
	if r := s.open(u[3], soldOut); !r.IsProblem(http.StatusConflict, "sold_out") {
		t.Errorf("open by the newcomer to a sold-out packet: %v; want 409 sold_out", r)
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("grabs answered from memory waited %d times for MySQL, want 0", st.WaitCount-waits)
	}
	release()
	kGrabbed(t, "grab by a newcomer to the known live packet", s.grab(u[4], live), true, "")
	kOpened(t, "open by the known opener", s.open(u[0], live), hongbao.AlreadyOpened, amount)
	if p := dbtest.CheckPacket(t, s.db, live); len(p.Shares) != 1 || p.Shares[u[0]] != amount {
		t.Errorf("the grabs changed the live packet: %v", p.Shares)
	}
}

// kOpenUntil opens id for user on s until the answer is not busy (the
// queue or the slot cap refusing, which applies nothing), and returns it
// with the busy answers it retried. Any other failure is returned: nothing
// here should fail.
func kOpenUntil(s *kStack, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, int, error) {
	deadline := time.Now().Add(15 * time.Second)
	for busy := 0; ; busy++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := s.srv.Open(ctx, id, user)
		cancel()
		if !errors.Is(err, hongbao.ErrBusy) || time.Now().After(deadline) {
			return res, busy, err
		}
		time.Sleep(time.Duration(2+mrand.IntN(10)) * time.Millisecond)
	}
}

// TestKnownTwoServers proves two servers opening one packet at once, each with knowledge the other's commits make stale, answer exactly what MySQL holds on either server.
func TestKnownTwoServers(t *testing.T) {
	t.Parallel()
	set := dbtest.UniqueName("k2")
	dbtest.Own(t, dbtest.DB(t, "a", 4), set, schema.AllBuckets())
	mc := dbtest.StartMemcached(t).Addr // the SET's memcached, shared
	servers := []*kStack{newKStack(t, kOpts{set: set, mc: mc, conns: 8}), newKStack(t, kOpts{set: set, mc: mc, conns: 8})}
	a, b := servers[0], servers[1]
	const count, total = 30, 30 * 157
	id := a.send(t, total, count)
	users := kUsers(44)
	told := map[hongbao.UserID]int64{}
	where := map[hongbao.UserID]int{} // the server of a user's first open

	// Both learn the packet: A opens it, then B (which makes A's stale).
	for i, s := range servers {
		res, _, err := kOpenUntil(s, id, users[i])
		if err != nil || res.Status != hongbao.Opened || res.Amount < 1 {
			t.Fatalf("first open on server %d: %+v, %v", i, res, err)
		}
		told[users[i]], where[users[i]] = res.Amount, i
	}
	b.knowsTruth(t, "B after its open", id)
	if kn := a.srv.known.get(id, time.Now()); kn == nil || len(kn.Openers) != 1 {
		t.Fatalf("A's knowledge of the packet after B's open: %+v; want one opener (stale)", kn)
	}

	// The race: rounds of six users, three on each server, all at once.
	var mu sync.Mutex
	var bad []string
	busy := 0
	for lo := 2; lo < len(users); lo += 6 {
		var wg sync.WaitGroup
		for i := lo; i < min(lo+6, len(users)); i++ {
			u, si := users[i], i%2
			wg.Go(func() {
				time.Sleep(time.Duration(mrand.IntN(3)) * time.Millisecond)
				res, n, err := kOpenUntil(servers[si], id, u)
				// At once again on the other server, whose knowledge is
				// likely stale: the same answer.
				again, m, errAgain := kOpenUntil(servers[1-si], id, u)
				mu.Lock()
				defer mu.Unlock()
				busy += n + m
				switch {
				case err == nil && res == (hongbao.OpenResult{User: u, Amount: res.Amount, Status: hongbao.Opened}) && res.Amount >= 1:
					told[u], where[u] = res.Amount, si
					if want := (hongbao.OpenResult{User: u, Amount: res.Amount, Status: hongbao.AlreadyOpened}); errAgain != nil || again != want {
						bad = append(bad, fmt.Sprintf("user %d opened %d on server %d, then on server %d: %+v, %v", u, res.Amount, si, 1-si, again, errAgain))
					}
				case errors.Is(err, hongbao.ErrSoldOut) && res == (hongbao.OpenResult{}):
					where[u] = si
					if !errors.Is(errAgain, hongbao.ErrSoldOut) || again != (hongbao.OpenResult{}) {
						bad = append(bad, fmt.Sprintf("user %d sold out on server %d, then on server %d: %+v, %v", u, si, 1-si, again, errAgain))
					}
				default:
					bad = append(bad, fmt.Sprintf("user %d on server %d: %+v, %v", u, si, res, err))
				}
			})
		}
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d bad first answers:\n\t%s", len(bad), strings.Join(bad, "\n\t"))
	}
	won := [2]int{}
	for u := range told {
		won[where[u]]++
	}
	t.Logf("shares taken on A: %d, on B: %d; %d users answered sold_out; %d busy answers retried", won[0], won[1], len(users)-len(told), busy)
	if won[0] < 2 || won[1] < 2 {
		t.Errorf("shares taken on A: %d, on B: %d; want both servers to open the packet in the race", won[0], won[1])
	}
	p := dbtest.CheckPacket(t, a.db, id)
	kSameShares(t, "after the race", told, p.Shares)
	if len(p.Shares) != count || p.RemainingCount != 0 || p.RemainingAmount != 0 {
		t.Errorf("after 44 users: %d shares, %d/%d left; want %d shares, sold out", len(p.Shares), p.RemainingAmount, p.RemainingCount, count)
	}

	// Every user again, on the other server first, then on the same one:
	// the share MySQL holds, or sold_out. Concurrently, across both.
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			for _, si := range []int{1 - where[u], where[u]} {
				r := servers[si].open(u, id)
				if amount, ok := told[u]; ok {
					kOpened(t, fmt.Sprintf("user %d again on server %d", u, si), r, hongbao.AlreadyOpened, amount)
				} else if !r.IsProblem(http.StatusConflict, "sold_out") {
					t.Errorf("user %d without a share, again on server %d: %v; want 409 sold_out", u, si, r)
				}
			}
		})
	}
	wg.Wait()
	for i, s := range servers {
		if kn := s.srv.known.get(id, time.Now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("server %d still knows the sold-out packet: %+v (%d known)", i, kn, s.srv.KnownLive())
		}
		if !s.srv.memo.knows(id) {
			t.Errorf("server %d does not remember the sold-out packet", i)
		}
	}
	p = dbtest.CheckPacket(t, a.db, id)
	kSameShares(t, "at the end", told, p.Shares)
	if got := dbtest.OutboxCredits(t, a.db, id); len(got) != count {
		t.Errorf("%d openers credited, want %d", len(got), count)
	} else {
		for u, cr := range got {
			if len(cr) != 1 || cr[0] != told[u] {
				t.Errorf("user %d credited %v, share %d", u, cr, told[u])
			}
		}
	}
}

// kForeignShare writes a share of packet id for user straight into MySQL,
// as another server's transaction would have (detail row, credit, packet).
func kForeignShare(t *testing.T, db *sql.DB, id hongbao.PacketID, user hongbao.UserID, amount int64) {
	t.Helper()
	pt, dt := dbtest.Tables(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	var count, left int
	if err := tx.QueryRowContext(ctx, "SELECT count, remaining_count FROM "+pt+" WHERE id = ? FOR UPDATE", id).Scan(&count, &left); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO " + dt + " (packet_id, user_id, amount, seq, opened_at) VALUES (?,?,?,?,?)", []any{id, user, amount, count - left + 1, now}},
		{"INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
			[]any{hongbao.OpenKey(id, user), user, amount, hongbao.KindOpen, id, now}},
		{"UPDATE " + pt + " SET remaining_amount = remaining_amount - ?, remaining_count = remaining_count - 1 WHERE id = ?", []any{amount, id}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// kClock is a clock running with the real one, offset by what a test adds.
type kClock struct{ offset atomic.Int64 }

func (c *kClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *kClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// TestKnownStaleOutside proves knowledge made stale outside this server's opens (shares in MySQL, a settler's close, expiry) gives the true answers and is forgotten or relearnt as MySQL holds it.
func TestKnownStaleOutside(t *testing.T) {
	t.Parallel()
	t.Run("shares written in MySQL", func(t *testing.T) {
		// Another server's opens (shares, credits, what is left) land in
		// MySQL while this server knows the packet.
		t.Parallel()
		s := newKStack(t, kOpts{})
		id := s.send(t, 800, 8)
		u := kUsers(7)
		told := map[hongbao.UserID]int64{}
		for _, x := range u[:2] {
			told[x] = kOpened(t, "open", s.open(x, id), hongbao.Opened, 0)
		}
		s.knowsTruth(t, "before", id)
		foreign, alsoForeign := u[2], u[3]
		kForeignShare(t, s.db, id, foreign, 50)
		kForeignShare(t, s.db, id, alsoForeign, 30)
		told[foreign], told[alsoForeign] = 50, 30
		if kn := s.srv.known.get(id, time.Now()); kn == nil || len(kn.Openers) != 2 {
			t.Fatalf("the server's knowledge: %+v; want the two shares it opened (stale)", kn)
		}
		// The foreign opener opens here: the share MySQL holds, never a
		// second one (the detail key fails the write from knowledge).
		kOpened(t, "the foreign opener opens here", s.open(foreign, id), hongbao.AlreadyOpened, 50)
		p := s.knowsTruth(t, "after the foreign opener", id)
		kSameShares(t, "after the foreign opener", told, p.Shares)
		kOpened(t, "the other foreign opener", s.open(alsoForeign, id), hongbao.AlreadyOpened, 30)
		// A newcomer: a share drawn from what is truly left.
		told[u[4]] = kOpened(t, "newcomer", s.open(u[4], id), hongbao.Opened, 0)
		p = s.knowsTruth(t, "after the newcomer", id)
		kSameShares(t, "after the newcomer", told, p.Shares)
		// Stale again, and a newcomer first this time (the conditional
		// update fails the write from knowledge).
		kForeignShare(t, s.db, id, u[5], 20)
		told[u[5]] = 20
		told[u[6]] = kOpened(t, "newcomer after another foreign share", s.open(u[6], id), hongbao.Opened, 0)
		kOpened(t, "the third foreign opener", s.open(u[5], id), hongbao.AlreadyOpened, 20)
		p = s.knowsTruth(t, "at the end", id)
		kSameShares(t, "at the end", told, p.Shares)
		if len(p.Shares) != 7 || p.RemainingCount != 1 {
			t.Errorf("%d shares, %d left; want 7, 1", len(p.Shares), p.RemainingCount)
		}
	})
	t.Run("settler closes it", func(t *testing.T) {
		// The settler's clock runs ahead: it closes the packet (and
		// refunds the rest) while this server still sees it live.
		t.Parallel()
		s := newKStack(t, kOpts{})
		id := s.send(t, 500, 5)
		u := kUsers(3)
		amount := kOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
		s.knowsTruth(t, "before the close", id)
		settler := store.New(s.db, s.set, dbtest.Shanghai(t), func() time.Time { return time.Now().Add(25 * time.Hour) }, mrand.Int64N)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done, refund, err := settler.Close(ctx, id)
		if err != nil || !done || refund != 500-amount {
			t.Fatalf("settler's close: %v, refund %d, %v; want done, refund %d", done, refund, err, 500-amount)
		}
		if s.srv.known.get(id, s.srv.now()) == nil {
			t.Fatal("the server forgot the packet before any open: nothing stale to test")
		}
		kOpened(t, "the opener again", s.open(u[0], id), hongbao.AlreadyOpened, amount)
		for _, x := range u[1:] {
			if r := s.open(x, id); !r.IsProblem(http.StatusGone, "expired") {
				t.Errorf("newcomer %d after the close: %v; want 410 expired", x, r)
			}
		}
		if kn := s.srv.known.get(id, s.srv.now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("after an open of the closed packet the server still knows it: %+v (%d known)", kn, s.srv.KnownLive())
		}
		pt, _ := dbtest.Tables(t, id)
		p := dbtest.CheckPacket(t, s.db, id)
		closed := dbtest.Count(t, s.db, "SELECT closed FROM "+pt+" WHERE id = ?", id)
		if len(p.Shares) != 1 || p.Shares[u[0]] != amount || p.RemainingCount != 4 || p.RemainingAmount != 500-amount || closed != 1 {
			t.Errorf("after the close: shares %v, %d/%d left, closed %d; want only %d's share", p.Shares, p.RemainingAmount, p.RemainingCount, closed, u[0])
		}
	})
	t.Run("expiry passes", func(t *testing.T) {
		// The server's own clock passes the expiry: what it knows is no
		// longer used, and the answers come from MySQL.
		t.Parallel()
		clock := &kClock{}
		s := newKStack(t, kOpts{now: clock.now})
		id := s.send(t, 500, 5)
		u := kUsers(2)
		amount := kOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
		s.knowsTruth(t, "before expiry", id)
		clock.advance(hongbao.DefaultLimits().Expiry + time.Second)
		if _, answered, live := s.srv.known.answer(id, u[0], s.srv.now()); answered || live {
			t.Errorf("known still answers after expiry: answered %v, live %v", answered, live)
		}
		if r := s.open(u[1], id); !r.IsProblem(http.StatusGone, "expired") {
			t.Errorf("newcomer after expiry: %v; want 410 expired", r)
		}
		kOpened(t, "the opener after expiry", s.open(u[0], id), hongbao.AlreadyOpened, amount)
		kGrabbed(t, "grab by the opener after expiry", s.grab(u[0], id), false, hongbao.AlreadyOpened)
		kGrabbed(t, "grab by a newcomer after expiry", s.grab(u[1], id), false, string(hongbao.Expired))
		if p := dbtest.CheckPacket(t, s.db, id); len(p.Shares) != 1 || p.RemainingCount != 4 {
			t.Errorf("after expiry: shares %v, %d left", p.Shares, p.RemainingCount)
		}
	})
}

// TestKnownForgetsAfterFailedOpen proves a failed transaction (the bucket moved away) makes the server forget the packet: nothing more is answered from memory until MySQL is read again.
func TestKnownForgetsAfterFailedOpen(t *testing.T) {
	t.Parallel()
	s := newKStack(t, kOpts{})
	id := s.send(t, 400, 4)
	u := kUsers(3)
	amount := kOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
	s.knowsTruth(t, "before the move", id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Disown(ctx, tx, s.set, []hongbao.Bucket{id.Bucket()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []hongbao.UserID{u[1], u[0]} {
		res, _, err := kOpenUntil(s, id, x)
		if !errors.Is(err, hongbao.ErrWrongSet) {
			t.Errorf("open by %d with the bucket moved away: %+v, %v; want wrong_set", x, res, err)
		}
		if kn := s.srv.known.get(id, time.Now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("after a failed open the server still knows the packet: %+v", kn)
		}
	}
	if err := schema.Own(ctx, s.db, s.set, 1, []hongbao.Bucket{id.Bucket()}); err != nil {
		t.Fatal(err)
	}
	kOpened(t, "the opener with the bucket back", s.open(u[0], id), hongbao.AlreadyOpened, amount)
	fresh := kOpened(t, "a newcomer with the bucket back", s.open(u[2], id), hongbao.Opened, 0)
	p := s.knowsTruth(t, "with the bucket back", id)
	kSameShares(t, "with the bucket back", map[hongbao.UserID]int64{u[0]: amount, u[2]: fresh}, p.Shares)
}

// TestKnownLearnSent: only a packet this send created, with every share
// left, is learnt (with no openers); a replayed send teaches nothing and
// never overwrites what later transactions taught.
func TestKnownLearnSent(t *testing.T) {
	fresh := func(id hongbao.PacketID) *hongbao.Packet { return kBatch(id, 10, nil).Packet }
	opened := kBatch(3, 10, openers(100, 2)).Packet // a replay that found shares taken
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
			k.learnSent(tc.p, tc.created, kT0)
			kn := k.get(tc.p.ID, kT0)
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
		later := kBatch(4, 10, openers(200, 3))
		k.learn(4, later, kT0)
		k.learnSent(kBatch(4, 10, nil).Packet, true, kT0)
		if kn := k.get(4, kT0); kn == nil || len(kn.Openers) != 3 || kn.Packet.RemainingCount != 7 {
			t.Errorf("known %+v after a late send, want the 3 openers learnt after it", kn)
		}
	})
}
