package main

// The money path end to end, through the router of a real cluster
// (clustertest: private MariaDB and memcached per SET, the real binaries):
// debits at send, credits through the outbox and the settler, refunds at
// expiry, sends left pending by a crash, idempotent and refused sends,
// duplicate deliveries, concurrent first credits and the history pages,
// under kill -9 where it matters. Every test ends with hbctl verify.

import (
	"cmp"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/router/clustertest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/settle"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomised workload (0: from the clock)")

// ---- helpers -----------------------------------------------------------------

// balance reads user's balance through the router.
func balance(t testing.TB, c *clustertest.Cluster, user hongbao.UserID) int64 {
	t.Helper()
	r := c.Client.Retrying(10 * time.Second).Wallet(user)
	if r.Status != http.StatusOK || r.Body.User != user.String() {
		t.Fatalf("GET /v1/me/wallet as %s: %v", user, r)
	}
	return r.Body.Balance
}

// ledgerSums returns the sum of every user's ledger entries.
func ledgerSums(t testing.TB, c *clustertest.Cluster) map[hongbao.UserID]int64 {
	t.Helper()
	sums := map[hongbao.UserID]int64{}
	rows, err := c.WalletDB().Query("SELECT user_id, SUM(amount) FROM ledger GROUP BY user_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u hongbao.UserID
		var s int64
		if err := rows.Scan(&u, &s); err != nil {
			t.Fatal(err)
		}
		sums[u] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// entry is a ledger row.
type entry struct {
	key    string
	user   hongbao.UserID
	amount int64
	kind   string
	packet hongbao.PacketID
	at     time.Time
}

// ledger returns the ledger rows matching where (SQL after WHERE), in seq order.
func ledger(t testing.TB, c *clustertest.Cluster, where string, args ...any) []entry {
	t.Helper()
	rows, err := c.WalletDB().Query("SELECT entry_key, user_id, amount, kind, packet_id, created_at FROM ledger WHERE "+
		where+" ORDER BY seq", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var es []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.key, &e.user, &e.amount, &e.kind, &e.packet, &e.at); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return es
}

// waitSettled waits until every SET has delivered its outbox, closed every
// packet past expiry (or, with all, every packet) and decided every pending
// send.
func waitSettled(t testing.TB, c *clustertest.Cluster, all bool, within time.Duration) {
	t.Helper()
	expiry := "SELECT COUNT(*) FROM hb_set.expiry WHERE expires_at <= UTC_TIMESTAMP(3)"
	if all {
		expiry = "SELECT COUNT(*) FROM hb_set.expiry"
	}
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, s := range c.Sets {
			db := c.DB(s.Name)
			for what, q := range map[string]string{
				"outbox":  "SELECT COUNT(*) FROM hb_set.outbox",
				"expiry":  expiry,
				"pending": "SELECT COUNT(*) FROM hb_set.pending",
			} {
				if n := dbtest.Count(t, db, q); n > 0 {
					left = append(left, fmt.Sprintf("SET %s: %d in %s", s.Name, n, what))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after %v: %s", within, strings.Join(left, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// packetRow is a packet as its SET's MySQL holds it.
type packetRow struct {
	set     string
	id      hongbao.PacketID
	funding hongbao.Funding
	total   int64
}

// packetsOf lists sender's packets in every day table of every SET.
func packetsOf(t testing.TB, c *clustertest.Cluster, sender hongbao.UserID) []packetRow {
	t.Helper()
	var out []packetRow
	for _, s := range c.Sets {
		db := c.DB(s.Name)
		for _, tb := range dbtest.DayTables(t, db) {
			rows, err := db.Query("SELECT id, funding, total FROM "+tb+" WHERE sender = ?", sender)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				p := packetRow{set: s.Name}
				if err := rows.Scan(&p.id, &p.funding, &p.total); err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			rows.Close()
		}
	}
	return out
}

func mustID(t testing.TB, s string) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(s)
	if err != nil {
		t.Fatalf("packet id %q: %v", s, err)
	}
	return id
}

func expiresAt(t testing.TB, p api.PacketJSON) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, p.ExpiresAt)
	if err != nil {
		t.Fatalf("expires_at %q: %v", p.ExpiresAt, err)
	}
	return at
}

// ---- randomised workload with crashes ------------------------------------------

// plannedSend is one send of the workload and the opens that follow it.
type plannedSend struct {
	sender hongbao.UserID
	req    hongbao.SendRequest
	key    string
	at     time.Duration // after the start of the load
	opens  []plannedOpen
}

type plannedOpen struct {
	user  hongbao.UserID
	after time.Duration // after the send was answered
	grab  bool
}

// sent is a packet the clients were told was created.
type sent struct {
	sender hongbao.UserID
	total  int64
	count  int
}

// book is what the clients were told, and nothing else.
type book struct {
	mu       sync.Mutex
	sent     map[string]sent
	refused  int                                 // sends answered 402
	shares   map[string]map[hongbao.UserID]int64 // packet -> user -> share
	outcomes map[string]int
}

func (b *book) share(t testing.TB, id string, user hongbao.UserID, amount int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shares[id] == nil {
		b.shares[id] = map[hongbao.UserID]int64{}
	}
	if old, ok := b.shares[id][user]; ok && old != amount {
		t.Errorf("packet %s: user %s told %d, then %d", id, user, old, amount)
	}
	b.shares[id][user] = amount
}

func (b *book) outcome(o string) {
	b.mu.Lock()
	b.outcomes[o]++
	b.mu.Unlock()
}

// TestRandomWorkloadWithCrashes drives a seeded random workload through
// the router (top-ups, sends, concurrent grabs and opens, packets expiring
// with shares left) while SET servers, settlers and the router are killed
// with SIGKILL and restarted; clients retry what got no answer. Once the
// cluster is quiet the money must add up every way: hbctl verify; each
// packet's records, debit, credits and refund against what the clients
// were told; each balance (GET /v1/me/wallet) against its ledger and
// against top-ups - sends + shares + refunds from the clients' own books.
func TestRandomWorkloadWithCrashes(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with: go test -run TestRandomWorkloadWithCrashes ./cmd/hbsettler -args -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	const (
		nSenders = 40
		nOpeners = 200
		nSends   = 120
		expiry   = 3 * time.Second
	)
	c := clustertest.Start(t, clustertest.Options{Expiry: expiry, SweepAfter: 3 * time.Second})
	cl := c.Client.Retrying(30 * time.Second)

	// The plan, drawn up front from the seed.
	senders := make([]hongbao.UserID, nSenders)
	topUps := map[hongbao.UserID]int64{}
	for i := range senders {
		senders[i] = hongbao.UserID(1001 + i)
		topUps[senders[i]] = 10000 + rng.Int64N(60000)
		if i%8 == 0 { // poor: some of their sends are refused
			topUps[senders[i]] = 100 + rng.Int64N(1900)
		}
	}
	openers := make([]hongbao.UserID, nOpeners)
	for i := range openers {
		openers[i] = hongbao.UserID(5001 + i)
	}
	plan := make([]plannedSend, nSends)
	for i := range plan {
		n := 1 + rng.IntN(20)
		req := hongbao.SendRequest{Count: n, Type: hongbao.Random, Greeting: "恭喜发财"}
		if rng.IntN(4) == 0 {
			req.Type = hongbao.Fixed
			req.Total = int64(n) * (1 + rng.Int64N(20000/int64(n)))
		} else {
			req.Total = int64(n) + rng.Int64N(20000-int64(n)+1)
		}
		p := plannedSend{sender: senders[rng.IntN(nSenders)], req: req, key: fmt.Sprintf("wl-%d-%d", seed, i),
			at: time.Duration(i)*50*time.Millisecond + time.Duration(rng.IntN(40))*time.Millisecond}
		// From no opener to half as many as shares: some packets sell
		// out, some expire with shares left; some opens come after the
		// expiry.
		for _, k := range rng.Perm(nOpeners)[:rng.IntN(n+n/2+2)] {
			p.opens = append(p.opens, plannedOpen{user: openers[k],
				after: time.Duration(rng.Int64N(int64(expiry + expiry/3))), grab: rng.IntN(3) == 0})
		}
		plan[i] = p
	}
	type chaos struct {
		kind, name string
		at, down   time.Duration
	}
	var events []chaos
	for range 4 {
		s := c.Sets[rng.IntN(len(c.Sets))]
		events = append(events, chaos{clustertest.Server, s.Servers[rng.IntN(len(s.Servers))],
			500*time.Millisecond + time.Duration(rng.Int64N(int64(7*time.Second))), 150*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond)))})
	}
	for range 3 {
		events = append(events, chaos{clustertest.Settler, c.Sets[rng.IntN(len(c.Sets))].Name,
			500*time.Millisecond + time.Duration(rng.Int64N(int64(7*time.Second))), 150*time.Millisecond + time.Duration(rng.Int64N(int64(700*time.Millisecond)))})
	}
	events = append(events, chaos{clustertest.Router, clustertest.Router, // stateless: clients just retry
		500*time.Millisecond + time.Duration(rng.Int64N(int64(7*time.Second))), 100*time.Millisecond + time.Duration(rng.Int64N(int64(300*time.Millisecond)))})
	slices.SortFunc(events, func(a, b chaos) int { return cmp.Compare(a.at, b.at) })

	// Top-ups, four hbctl processes at a time. Each has its own key, so
	// an operator may retry a failed one without paying twice: concurrent
	// first credits can fail on a wallet deadlock (TestConcurrentFirstCredits).
	b := &book{sent: map[string]sent{}, shares: map[string]map[hongbao.UserID]int64{}, outcomes: map[string]int{}}
	var wg sync.WaitGroup
	work := make(chan hongbao.UserID)
	for range 4 {
		wg.Go(func() {
			for u := range work {
				var err error
				for try := range 3 {
					if err = c.Credit(u, topUps[u], fmt.Sprintf("wl-%d-%s", seed, u)); err == nil {
						break
					}
					t.Logf("top-up of %s failed (try %d), retrying with its key: %v", u, try+1, err)
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, u := range senders {
		work <- u
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := len(ledger(t, c, "kind = 'topup'")); n != nSenders {
		t.Fatalf("%d top-ups in the ledger, want %d", n, nSenders)
	}

	// The load: sends on their schedule, each followed by its opens (at
	// most 12 requests in flight), and the chaos beside them.
	start := time.Now()
	inflight := make(chan struct{}, 12)
	var chaosWG sync.WaitGroup
	chaosWG.Go(func() {
		for _, e := range events {
			time.Sleep(time.Until(start.Add(e.at)))
			c.Kill(e.kind, e.name)
			time.Sleep(e.down)
			c.Restart(e.kind, e.name)
			t.Logf("chaos at %v: kill -9 %s %s, restarted after %v", time.Since(start).Round(time.Millisecond), e.kind, e.name, e.down)
		}
	})
	open := func(id string, o plannedOpen) {
		inflight <- struct{}{}
		defer func() { <-inflight }()
		if o.grab {
			if g := cl.Grab(o.user, id); g.Status != http.StatusOK {
				t.Errorf("grab %s by %s: %v", id, o.user, g)
			}
		}
		r := cl.Open(o.user, id)
		switch {
		case r.Status == http.StatusOK && (r.Body.Status == hongbao.Opened || r.Body.Status == hongbao.AlreadyOpened) && r.Body.Amount >= 1:
			b.share(t, id, o.user, r.Body.Amount)
			b.outcome(r.Body.Status)
		case r.Status == http.StatusConflict && r.Code == "sold_out", r.Status == http.StatusGone && r.Code == "expired":
			b.outcome(r.Code)
		default:
			t.Errorf("open %s by %s: %v", id, o.user, r)
		}
		if r.Attempts > 1 {
			b.outcome("retried")
		}
	}
	sends := make(chan plannedSend)
	var sendWG, openWG sync.WaitGroup
	for range 6 {
		sendWG.Go(func() {
			for p := range sends {
				time.Sleep(time.Until(start.Add(p.at)))
				inflight <- struct{}{}
				r := cl.Send(p.sender, p.req, p.key)
				<-inflight
				switch {
				case r.Status == http.StatusCreated:
					if r.Body.Total != p.req.Total || r.Body.Count != p.req.Count || r.Body.Sender != p.sender.String() {
						t.Errorf("send %+v by %s: answered %v", p.req, p.sender, r)
					}
					b.mu.Lock()
					if _, dup := b.sent[r.Body.ID]; dup {
						t.Errorf("two sends answered with packet %s", r.Body.ID)
					}
					b.sent[r.Body.ID] = sent{sender: p.sender, total: p.req.Total, count: p.req.Count}
					b.mu.Unlock()
					answered := time.Now()
					for _, o := range p.opens {
						openWG.Go(func() {
							time.Sleep(time.Until(answered.Add(o.after)))
							open(r.Body.ID, o)
						})
					}
				case r.Status == http.StatusPaymentRequired && r.Code == "insufficient_funds":
					b.mu.Lock()
					b.refused++
					b.mu.Unlock()
				default:
					t.Errorf("send %+v by %s: %v", p.req, p.sender, r)
				}
			}
		})
	}
	for _, p := range plan {
		sends <- p
	}
	close(sends)
	sendWG.Wait()
	openWG.Wait()
	chaosWG.Wait()
	t.Logf("load done in %v: %d sends answered 201, %d refused (402); opens: %v",
		time.Since(start).Round(time.Millisecond), len(b.sent), b.refused, b.outcomes)
	if t.Failed() {
		t.FailNow()
	}
	if len(b.sent) < nSends/2 || b.outcomes[hongbao.Opened] == 0 || b.outcomes["expired"] == 0 {
		t.Fatalf("the workload did not exercise the money path: %d packets, outcomes %v", len(b.sent), b.outcomes)
	}

	// Quiet: every credit delivered, every packet closed (they all
	// expired by now), no send left pending.
	waitSettled(t, c, true, 40*time.Second)
	c.CheckInvariants(t)

	// Every packet's final state agrees with what the clients were told:
	// its records are exactly the shares answered, and what is left was
	// refunded.
	refunds := map[string]int64{}
	for _, e := range ledger(t, c, "kind = 'refund'") {
		refunds[e.packet.String()] = e.amount
	}
	expectRefunds := 0
	for id, p := range b.sent {
		d := cl.Detail(p.sender, id)
		if d.Status != http.StatusOK {
			t.Errorf("detail of %s: %v", id, d)
			continue
		}
		var told int64
		for _, a := range b.shares[id] {
			told += a
		}
		recs := map[hongbao.UserID]int64{}
		for _, r := range d.Body.Records {
			u, err := hongbao.ParseUserID(r.User)
			if err != nil {
				t.Fatal(err)
			}
			recs[u] = r.Amount
		}
		if !maps.Equal(recs, b.shares[id]) {
			t.Errorf("packet %s: records %v, clients were told %v", id, recs, b.shares[id])
		}
		soldOut := len(b.shares[id]) == p.count
		wantStatus, refund := "expired", p.total-told
		if soldOut {
			wantStatus, refund = "sold_out", 0
		} else {
			expectRefunds++
		}
		if d.Body.Status != wantStatus || d.Body.RemainingAmount != p.total-told || d.Body.RemainingCount != p.count-len(b.shares[id]) {
			t.Errorf("packet %s (total %d, count %d, %d shares told, %d fen): final state %s, %d fen / %d shares left",
				id, p.total, p.count, len(b.shares[id]), told, d.Body.Status, d.Body.RemainingAmount, d.Body.RemainingCount)
		}
		if refunds[id] != refund {
			t.Errorf("packet %s: refund in the ledger %d, want %d", id, refunds[id], refund)
		}
	}
	if len(refunds) != expectRefunds {
		t.Errorf("%d refunds in the ledger, want %d", len(refunds), expectRefunds)
	}

	// The ledger's debits and credits are exactly the sends and shares
	// the clients were told of.
	debits := map[string]int64{}
	for _, e := range ledger(t, c, "kind IN ('send', 'void')") {
		if e.kind == hongbao.KindSend {
			debits[e.packet.String()] = e.amount
		} else if _, ok := b.sent[e.packet.String()]; ok || e.amount != 0 {
			t.Errorf("void %+v for a packet answered 201", e)
		}
	}
	credits := map[string]map[hongbao.UserID]int64{}
	for _, e := range ledger(t, c, "kind = 'open'") {
		if credits[e.packet.String()] == nil {
			credits[e.packet.String()] = map[hongbao.UserID]int64{}
		}
		credits[e.packet.String()][e.user] = e.amount
	}
	for id, p := range b.sent {
		if debits[id] != -p.total {
			t.Errorf("packet %s: debit %d, want %d", id, debits[id], -p.total)
		}
		if !maps.Equal(credits[id], b.shares[id]) {
			t.Errorf("packet %s: credits %v, shares told %v", id, credits[id], b.shares[id])
		}
	}
	if len(debits) != len(b.sent) {
		t.Errorf("%d debits in the ledger for %d packets answered 201", len(debits), len(b.sent))
	}

	// Every balance: the API, the ledger and the clients' own books agree.
	want := map[hongbao.UserID]int64{}
	for u, a := range topUps {
		want[u] += a
	}
	for id, p := range b.sent {
		want[p.sender] -= p.total
		var told int64
		for u, a := range b.shares[id] {
			want[u] += a
			told += a
		}
		if len(b.shares[id]) < p.count {
			want[p.sender] += p.total - told
		}
	}
	sums := ledgerSums(t, c)
	for _, u := range append(slices.Clone(senders), openers...) {
		got := balance(t, c, u)
		if got != sums[u] || got != want[u] {
			t.Errorf("user %s: balance %d, ledger sum %d, expected from the answers %d", u, got, sums[u], want[u])
		}
	}
}

// ---- first credits at once ----------------------------------------------------

// TestConcurrentFirstCredits credits users who have no account yet, eight
// at a time, as hbctl wallet credit (an operator's top-ups) and the
// settlers (first credits to new openers) do: wallet.Wallet.Apply on the
// cluster's wallet. Every credit must be applied; none may fail because
// another user's account was being created at the same moment.
func TestConcurrentFirstCredits(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	w, err := wallet.Open(t.Context(), c.WalletDSN, 16, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var failed []string
	var mu sync.Mutex
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				u := hongbao.UserID(8000 + 10*round + i)
				_, _, err := w.Apply(t.Context(), hongbao.Entry{Key: fmt.Sprintf("topup:first-%s", u), User: u, Amount: 100, Kind: hongbao.KindTopUp})
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("user %s: %v", u, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if len(failed) > 0 {
		t.Errorf("%d of 40 first credits failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	sums := ledgerSums(t, c)
	for round := range 5 {
		for i := range 8 {
			u := hongbao.UserID(8000 + 10*round + i)
			if got := balance(t, c, u); got != sums[u] {
				t.Errorf("user %s: balance %d, ledger sum %d", u, got, sums[u])
			}
		}
	}
	c.CheckInvariants(t)
}

// ---- idempotent sends ----------------------------------------------------------

// TestIdempotentSend sends the same request under one Idempotency-Key
// twice in a row, and under five more keys eight times at once each:
// every attempt is answered 201 with its key's packet, each key yields one
// packet and one debit (ledger row send:<id>), and the balance drops once
// per key. The same key for another request is refused with 422.
func TestIdempotentSend(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 77
	c.TopUp(t, sender, 20000)

	req := hongbao.SendRequest{Total: 1000, Count: 5, Type: hongbao.Random, Greeting: "again"}
	first := cl.Send(sender, req, "same-key")
	second := cl.Send(sender, req, "same-key")
	if first.Status != http.StatusCreated || second.Status != http.StatusCreated || first.Body.ID != second.Body.ID {
		t.Fatalf("same key twice: %v then %v; want 201 twice with one packet", first, second)
	}

	// Five keys, each sent eight times at once.
	req2 := hongbao.SendRequest{Total: 2000, Count: 4, Type: hongbao.Fixed}
	ids := []string{first.Body.ID}
	for k := range 5 {
		key := fmt.Sprintf("concurrent-key-%d", k)
		answers := make([]clustertest.Response[api.PacketJSON], 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = cl.Send(sender, req2, key) })
		}
		wg.Wait()
		var want string // the packet of the first 201
		for _, r := range answers {
			if r.Status == http.StatusCreated && want == "" {
				want = r.Body.ID
			}
		}
		for i, r := range answers {
			if r.Status != http.StatusCreated || r.Body.ID != want {
				t.Errorf("%s, concurrent send %d: %v; want 201 with packet %s", key, i, r, want)
			}
		}
		if want != "" {
			ids = append(ids, want)
		}
	}

	// The same key for another request is refused and moves nothing.
	if r := cl.Send(sender, hongbao.SendRequest{Total: 999, Count: 5, Type: hongbao.Random, Greeting: "again"}, "same-key"); r.Status != http.StatusUnprocessableEntity || r.Code != "idempotency_key_reused" {
		t.Errorf("same key, other request: %v; want 422 idempotency_key_reused", r)
	}

	// One debit and one packet per key (that got any 201 at all).
	if got, want := balance(t, c, sender), 20000-1000-2000*int64(len(ids)-1); got != want {
		t.Errorf("balance %d, want %d", got, want)
	}
	for _, id := range ids {
		if es := ledger(t, c, "entry_key = ?", "send:"+id); len(es) != 1 {
			t.Errorf("ledger rows with key send:%s: %+v, want exactly one", id, es)
		}
	}
	if es := ledger(t, c, "user_id = ? AND kind = 'send'", sender); len(es) != len(ids) {
		t.Errorf("debits of the sender: %+v, want %d", es, len(ids))
	}
	ps := packetsOf(t, c, sender)
	if len(ps) != len(ids) {
		t.Errorf("packets of the sender in MySQL: %+v, want %d", ps, len(ids))
	}
	for _, p := range ps {
		if p.funding != hongbao.Funded {
			t.Errorf("packet %s: funding %d, want funded", p.id, p.funding)
		}
	}
	c.CheckInvariants(t)
}

// ---- refused sends -------------------------------------------------------------

// TestInsufficientFunds: a send the balance does not cover is answered
// 402 insufficient_funds, with or without an Idempotency-Key; it moves no
// money, leaves no funded packet in any SET and nothing anyone can open;
// concurrent sends never overdraw.
func TestInsufficientFunds(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const poor, never, exact, racer, opener hongbao.UserID = 31, 32, 33, 34, 35
	c.TopUp(t, poor, 500)
	c.TopUp(t, exact, 1000)
	c.TopUp(t, racer, 1000)

	req := hongbao.SendRequest{Total: 1000, Count: 2, Type: hongbao.Random}
	for _, tc := range []struct {
		name string
		user hongbao.UserID
		key  string
	}{{"without key", poor, ""}, {"with key", poor, "poor-1"}, {"never credited", never, "never-1"}} {
		if r := cl.Send(tc.user, req, tc.key); r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds" {
			t.Errorf("%s: send of 1000 fen: %v; want 402 insufficient_funds", tc.name, r)
		}
	}
	if got := balance(t, c, poor); got != 500 {
		t.Errorf("balance after refused sends: %d, want 500", got)
	}
	if got := balance(t, c, never); got != 0 {
		t.Errorf("balance of a user never credited: %d, want 0", got)
	}
	for _, u := range []hongbao.UserID{poor, never} {
		if es := ledger(t, c, "user_id = ? AND kind <> 'topup'", u); len(es) != 0 {
			t.Errorf("user %s: ledger entries after refused sends: %+v", u, es)
		}
		for _, p := range packetsOf(t, c, u) {
			if p.funding == hongbao.Funded {
				t.Errorf("user %s: funded packet %s in SET %s after a refused send", u, p.id, p.set)
				continue
			}
			// A refused send may leave a cancelled row: nobody can open it.
			if r := cl.Open(opener, p.id.String()); r.Status != http.StatusNotFound {
				t.Errorf("open of unfunded packet %s (funding %d): %v; want 404", p.id, p.funding, r)
			}
			if r := cl.Grab(opener, p.id.String()); r.Status != http.StatusNotFound && (r.Status != http.StatusOK || r.Body.CanOpen) {
				t.Errorf("grab of unfunded packet %s (funding %d): %v; want 404 or can_open false", p.id, p.funding, r)
			}
			if r := cl.Detail(opener, p.id.String()); r.Status != http.StatusNotFound && (r.Status != http.StatusOK || r.Body.Status == string(hongbao.Active)) {
				t.Errorf("detail of unfunded packet %s (funding %d): %v; want 404, or anything but active", p.id, p.funding, r)
			}
		}
	}

	// Exactly the balance is enough; then nothing is left.
	if r := cl.Send(exact, req, ""); r.Status != http.StatusCreated {
		t.Fatalf("send of the whole balance: %v", r)
	}
	if r := cl.Send(exact, hongbao.SendRequest{Total: 1, Count: 1, Type: hongbao.Random}, "exact-2"); r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds" {
		t.Errorf("send from an empty wallet: %v; want 402 insufficient_funds", r)
	}
	if got := balance(t, c, exact); got != 0 {
		t.Errorf("balance after spending it all: %d, want 0", got)
	}

	// Five concurrent sends of 300 against 1000: three are paid, never more.
	codes := make([]int, 5)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			r := cl.Send(racer, hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Fixed}, fmt.Sprintf("race-%d", i))
			codes[i] = r.Status
			if r.Status != http.StatusCreated && (r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds") {
				t.Errorf("concurrent send %d: %v", i, r)
			}
		})
	}
	wg.Wait()
	paid := 0
	for _, s := range codes {
		if s == http.StatusCreated {
			paid++
		}
	}
	if got := balance(t, c, racer); paid != 3 || got != 100 {
		t.Errorf("concurrent sends: %d paid (%v), balance %d; want 3 paid and 100 left", paid, codes, got)
	}
	funded := 0
	for _, p := range packetsOf(t, c, racer) {
		if p.funding == hongbao.Funded {
			funded++
		}
	}
	if funded != paid {
		t.Errorf("%d funded packets for %d paid sends", funded, paid)
	}
	c.CheckInvariants(t)
}

// ---- expiry racing opens -------------------------------------------------------

// TestExpiryRacesOpens: users keep arriving to open a big packet across its
// expiry. Every fen ends up either in exactly one share or in the refund,
// and no open made after the expiry (let alone after the refund was
// written) takes a share.
func TestExpiryRacesOpens(t *testing.T) {
	const expiry = 2 * time.Second
	c := clustertest.Start(t, clustertest.Options{Expiry: expiry})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 500
	c.TopUp(t, sender, 20000)
	s := cl.Send(sender, hongbao.SendRequest{Total: 20000, Count: 100, Type: hongbao.Random}, "big")
	if s.Status != http.StatusCreated {
		t.Fatalf("send: %v", s)
	}
	id, expires := s.Body.ID, expiresAt(t, s.Body)

	// 100 users, one arriving every 30ms from now on: they straddle the
	// expiry. Each opens twice, 50ms apart: the second answer repeats the
	// share of the first, or is expired like it.
	type result struct {
		user    hongbao.UserID
		answers []clustertest.Response[api.OpenJSON]
	}
	results := make([]result, 100)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		results[i].user = hongbao.UserID(9001 + i)
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(time.Duration(i) * 30 * time.Millisecond)))
			for range 2 {
				results[i].answers = append(results[i].answers, cl.Open(results[i].user, id))
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()

	owner, err := c.SetOf(mustID(t, id))
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, false, 20*time.Second)
	refundRows := ledger(t, c, "entry_key = ?", "refund:"+id)
	if len(refundRows) != 1 {
		t.Fatalf("refund rows of %s: %+v, want one", id, refundRows)
	}
	refund := refundRows[0]

	var shares int64
	opened, expired := 0, 0
	for _, r := range results {
		var got int64 // this user's share, from the first opened answer
		for _, a := range r.answers {
			if got == 0 && a.Sent.After(refund.at) && (a.Status != http.StatusGone || a.Code != "expired") {
				t.Errorf("user %s: open sent at %s after the refund was written (%s): %v, want 410 expired",
					r.user, a.Sent.Format(api.TimeFormat), refund.at.Format(api.TimeFormat), a)
			}
			switch {
			case a.Status == http.StatusOK && a.Body.Status == hongbao.Opened:
				if got != 0 {
					t.Errorf("user %s opened twice: %v", r.user, r.answers)
				}
				got = a.Body.Amount
				opened++
				shares += a.Body.Amount
				if !a.Sent.Before(expires) {
					t.Errorf("user %s: open sent at %s, after the expiry %s, took a share", r.user, a.Sent.Format(api.TimeFormat), expires.Format(api.TimeFormat))
				}
			case a.Status == http.StatusOK && a.Body.Status == hongbao.AlreadyOpened:
				if a.Body.Amount != got {
					t.Errorf("user %s: already_opened %d, share %d", r.user, a.Body.Amount, got)
				}
			case a.Status == http.StatusGone && a.Code == "expired":
				expired++
				if got != 0 {
					t.Errorf("user %s holds a share of %d, but an open again was answered %v; want already_opened", r.user, got, a)
				}
			default:
				t.Errorf("user %s: open answered %v", r.user, a)
			}
		}
	}
	t.Logf("packet %s on SET %s: %d shares (%d fen) before the expiry, %d expired answers, refund %d fen",
		id, owner, opened, shares, expired, refund.amount)
	if opened == 0 || expired == 0 || refund.amount == 0 {
		t.Errorf("the opens did not straddle the expiry: %d opened, %d expired, refund %d", opened, expired, refund.amount)
	}
	if shares+refund.amount != 20000 {
		t.Errorf("shares %d + refund %d != total 20000", shares, refund.amount)
	}
	if refund.user != sender {
		t.Errorf("refund to %s, want the sender %s", refund.user, sender)
	}
	credits := ledger(t, c, "packet_id = ? AND kind = 'open'", mustID(t, id))
	var credited int64
	for _, e := range credits {
		credited += e.amount
	}
	if len(credits) != opened || credited != shares {
		t.Errorf("credits in the ledger: %d rows, %d fen; want %d rows, %d fen", len(credits), credited, opened, shares)
	}
	d := cl.Detail(sender, id)
	if d.Status != http.StatusOK || d.Body.Status != "expired" || d.Body.RemainingAmount != refund.amount || len(d.Body.Records) != opened {
		t.Errorf("detail after the expiry: %v; want expired with %d fen left and %d records", d, refund.amount, opened)
	}
	if got := balance(t, c, sender); got != refund.amount {
		t.Errorf("sender's balance %d, want the refund %d", got, refund.amount)
	}
	c.CheckInvariants(t)
}

// ---- duplicate delivery ----------------------------------------------------------

// TestDuplicateDelivery delivers the same outbox entries twice at once,
// then again after putting them back into the outbox (a settler that
// crashed between the ledger write and the outbox delete), then once more
// by the real settler: each credit is in the ledger once and moved the
// balance once. An entry whose key is taken by a different entry is never
// applied and is reported by hbctl verify.
func TestDuplicateDelivery(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 600
	users := []hongbao.UserID{601, 602, 603}
	c.TopUp(t, sender, 900)
	s := cl.Send(sender, hongbao.SendRequest{Total: 900, Count: 3, Type: hongbao.Fixed}, "dup")
	if s.Status != http.StatusCreated {
		t.Fatalf("send: %v", s)
	}
	id := mustID(t, s.Body.ID)
	owner, err := c.SetOf(id)
	if err != nil {
		t.Fatal(err)
	}
	db := c.DB(owner)

	// With the SET's settler down, the credits wait in the outbox.
	c.Kill(clustertest.Settler, owner)
	for _, u := range users {
		if r := cl.Open(u, s.Body.ID); r.Status != http.StatusOK || r.Body.Amount != 300 {
			t.Fatalf("open by %s: %v", u, r)
		}
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ?", id); n != 3 {
		t.Fatalf("outbox rows: %d, want 3", n)
	}

	ctx := t.Context()
	newSettler := func() *settle.Settler {
		sdb, err := schema.Open(c.Set(owner).DSN, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sdb.Close() })
		w, err := wallet.Open(ctx, c.WalletDSN, 4, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		loc := dbtest.Shanghai(t)
		return settle.New(store.New(sdb, owner, loc, time.Now, rand.Int64N), w, time.Now, zap.NewNop())
	}
	s1, s2 := newSettler(), newSettler()
	saved := outboxRows(t, db, id)

	checkOnce := func(when string) {
		t.Helper()
		for _, u := range users {
			if es := ledger(t, c, "entry_key = ?", hongbao.OpenKey(id, u)); len(es) != 1 || es[0].amount != 300 {
				t.Errorf("%s: ledger rows for %s: %+v, want one of 300", when, hongbao.OpenKey(id, u), es)
			}
			if got := balance(t, c, u); got != 300 {
				t.Errorf("%s: balance of %s: %d, want 300", when, u, got)
			}
		}
		if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox"); n != 0 {
			t.Errorf("%s: %d rows left in the outbox", when, n)
		}
	}

	// Two settlers deliver the same rows at once.
	var wg sync.WaitGroup
	for _, st := range []*settle.Settler{s1, s2} {
		wg.Go(func() {
			if _, err := st.Deliver(ctx); err != nil {
				t.Errorf("deliver: %v", err)
			}
		})
	}
	wg.Wait()
	checkOnce("two settlers at once")

	// The rows come back, as after a crash before the outbox delete.
	putBack := func() {
		t.Helper()
		for _, r := range saved {
			if _, err := db.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
				r.Entry.Key, r.Entry.User, r.Entry.Amount, r.Entry.Kind, r.Entry.Packet, r.Entry.At); err != nil {
				t.Fatal(err)
			}
		}
	}
	putBack()
	if n, err := s1.Deliver(ctx); err != nil || n != 3 {
		t.Errorf("re-delivery: %d rows, %v; want 3 rows removed", n, err)
	}
	checkOnce("re-delivery")

	// And once more, by the real settler, restarted twice.
	putBack()
	c.Restart(clustertest.Settler, owner)
	c.Restart(clustertest.Settler, owner)
	waitSettled(t, c, false, 10*time.Second)
	checkOnce("re-delivery by hbsettler")
	if got := balance(t, c, sender); got != 0 {
		t.Errorf("sender's balance %d, want 0", got)
	}
	c.CheckInvariants(t)

	// A row whose key the ledger holds for a different entry stays in
	// the outbox, moves nothing, and verify names the violation.
	c.Kill(clustertest.Settler, owner)
	if _, err := db.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
		hongbao.OpenKey(id, users[0]), users[0], 301, hongbao.KindOpen, id, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Deliver(ctx); err != nil {
		t.Fatalf("deliver of a conflicting row: %v", err)
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox"); n != 1 {
		t.Errorf("conflicting row: %d outbox rows, want it kept", n)
	}
	if got := balance(t, c, users[0]); got != 300 {
		t.Errorf("conflicting row moved money: balance %d, want 300", got)
	}
	out, err := c.Ctl("verify")
	if err == nil || !strings.Contains(out, "VIOLATION") {
		t.Errorf("hbctl verify with a conflicting outbox row: err %v, want non-zero exit naming a violation:\n%s", err, out)
	}
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		t.Errorf("hbctl verify exit code 0 with a violation")
	}
	if _, err := db.Exec("DELETE FROM hb_set.outbox"); err != nil {
		t.Fatal(err)
	}
	c.CheckInvariants(t)
}

func outboxRows(t testing.TB, db *sql.DB, id hongbao.PacketID) []store.OutboxRow {
	t.Helper()
	rows, err := db.Query("SELECT id, entry_key, user_id, amount, kind, packet_id, created_at FROM hb_set.outbox WHERE packet_id = ? ORDER BY id", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []store.OutboxRow
	for rows.Next() {
		var r store.OutboxRow
		e := &r.Entry
		if err := rows.Scan(&r.ID, &e.Key, &e.User, &e.Amount, &e.Kind, &e.Packet, &e.At); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ---- sends left pending by a crash --------------------------------------------

// TestSweepPendingSends plays a server that crashed in the middle of three
// sends (packet inserted, debit not yet made or not yet recorded on the
// packet): nobody can open them meanwhile; the client's retry of one of
// them, before the sweeper, funds it once; the sweeper (-sweep-after)
// funds the one whose debit was made and cancels the one whose debit was
// not, and a retry afterwards gets the same decision. No money is moved
// twice or lost.
func TestSweepPendingSends(t *testing.T) {
	const sweepAfter = 3 * time.Second
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1, SweepAfter: sweepAfter})
	cl := c.Client.Retrying(10 * time.Second)
	const sender, opener hongbao.UserID = 900, 901
	c.TopUp(t, sender, 10000)
	ctx := t.Context()
	loc := dbtest.Shanghai(t)
	w, err := wallet.Open(ctx, c.WalletDSN, 4, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// What the crashed server left: a pending packet per key, in the
	// bucket a retry with the key lands in; for crash-2 the debit too.
	minter := hongbao.NewMinter(time.Now)
	reqs := map[string]hongbao.SendRequest{
		"crash-1": {Total: 1000, Count: 2, Type: hongbao.Random, Greeting: "one"},
		"crash-2": {Total: 2000, Count: 2, Type: hongbao.Random, Greeting: "two"},
		"crash-3": {Total: 3000, Count: 2, Type: hongbao.Random, Greeting: "three"},
	}
	ids := map[string]hongbao.PacketID{}
	for _, key := range []string{"crash-1", "crash-2", "crash-3"} {
		id, err := minter.Next(hongbao.BucketFor(sender, []byte(key)))
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.SetOf(id)
		if err != nil {
			t.Fatal(err)
		}
		sdb, err := schema.Open(c.Set(owner).DSN, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		st := store.New(sdb, owner, loc, time.Now, rand.Int64N)
		if _, created, err := st.Create(ctx, store.NewPacket{ID: id, Sender: sender, Req: reqs[key], Expiry: 24 * time.Hour,
			IdempotencyKey: key, Funding: hongbao.Pending}); err != nil || !created {
			t.Fatalf("create pending %s: created %v, %v", key, created, err)
		}
		ids[key] = id
	}
	if _, _, err := w.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(ids["crash-2"]), User: sender, Amount: -2000,
		Kind: hongbao.KindSend, Packet: ids["crash-2"]}); err != nil {
		t.Fatal(err)
	}
	for key, id := range ids {
		if r := cl.Open(opener, id.String()); r.Status != http.StatusNotFound {
			t.Errorf("open of pending %s: %v; want 404", key, r)
		}
	}
	c.CheckInvariants(t) // the paid pending send is accounted for

	// The client retries crash-3 before the sweeper: the server finishes it.
	if r := cl.Send(sender, reqs["crash-3"], "crash-3"); r.Status != http.StatusCreated || r.Body.ID != ids["crash-3"].String() {
		t.Fatalf("retry of crash-3: %v; want 201 with packet %s", r, ids["crash-3"])
	}

	waitSettled(t, c, false, 5*sweepAfter)
	void := ledger(t, c, "entry_key = ?", hongbao.SendKey(ids["crash-1"]))
	if len(void) != 1 || void[0].kind != hongbao.KindVoid || void[0].amount != 0 {
		t.Errorf("ledger under %s: %+v; want one void of 0", hongbao.SendKey(ids["crash-1"]), void)
	}
	funding := map[hongbao.PacketID]hongbao.Funding{}
	for _, p := range packetsOf(t, c, sender) {
		funding[p.id] = p.funding
	}
	for key, want := range map[string]hongbao.Funding{"crash-1": hongbao.Cancelled, "crash-2": hongbao.Funded, "crash-3": hongbao.Funded} {
		if funding[ids[key]] != want {
			t.Errorf("%s: funding %d, want %d", key, funding[ids[key]], want)
		}
	}

	// Retries after the sweep get its decision.
	if r := cl.Send(sender, reqs["crash-1"], "crash-1"); r.Status != http.StatusPaymentRequired {
		t.Errorf("retry of the cancelled crash-1: %v; want 402", r)
	}
	if r := cl.Send(sender, reqs["crash-2"], "crash-2"); r.Status != http.StatusCreated || r.Body.ID != ids["crash-2"].String() {
		t.Errorf("retry of the swept crash-2: %v; want 201 with packet %s", r, ids["crash-2"])
	}
	if r := cl.Open(opener, ids["crash-1"].String()); r.Status != http.StatusNotFound {
		t.Errorf("open of the cancelled crash-1: %v; want 404", r)
	}
	for _, key := range []string{"crash-2", "crash-3"} {
		if r := cl.Open(opener, ids[key].String()); r.Status != http.StatusOK || r.Body.Status != hongbao.Opened {
			t.Errorf("open of %s: %v; want opened", key, r)
		}
	}
	if got := balance(t, c, sender); got != 10000-2000-3000 {
		t.Errorf("sender's balance %d, want %d", got, 10000-2000-3000)
	}
	if es := ledger(t, c, "user_id = ? AND kind = 'send'", sender); len(es) != 2 {
		t.Errorf("debits: %+v; want two", es)
	}
	waitSettled(t, c, false, 10*time.Second)
	c.CheckInvariants(t)
}

// TestSettlerIdlesOnPendingExpiredPacket: a packet left pending by a crash
// that expires before the sweeper may decide it (expiry shorter than
// -sweep-after) cannot be closed yet. The settler must keep its normal
// pace meanwhile, not spin on it; once swept, the packet is closed.
func TestSettlerIdlesOnPendingExpiredPacket(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1, Expiry: time.Second, SweepAfter: 5 * time.Second})
	// A pending packet on the last SET (the first one also hosts the
	// topology and the wallet, whose polling would blur the count).
	last := c.Sets[len(c.Sets)-1]
	id, err := hongbao.NewMinter(time.Now).Next(hongbao.Buckets - 1)
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := c.SetOf(id); err != nil || owner != last.Name {
		t.Fatalf("packet %s: SET %q (%v), want the last SET %s", id, owner, err, last.Name)
	}
	loc := dbtest.Shanghai(t)
	sdb, err := schema.Open(last.DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	created := time.Now()
	if _, _, err := store.New(sdb, last.Name, loc, time.Now, rand.Int64N).Create(t.Context(), store.NewPacket{ID: id, Sender: 950,
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}, Expiry: time.Second, Funding: hongbao.Pending}); err != nil {
		t.Fatal(err)
	}
	selects := func() int64 {
		var name string
		var n int64
		if err := c.DB(last.Name).QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(time.Until(created.Add(1500 * time.Millisecond))) // expired, not yet swept
	n0, t0 := selects(), time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(selects()-n0) / time.Since(t0).Seconds()
	if rate > 200 {
		t.Errorf("SET %s's MySQL ran %.0f SELECTs/s while an expired packet waited for the sweeper; the settler spins", last.Name, rate)
	}
	waitSettled(t, c, true, 20*time.Second)
	if es := ledger(t, c, "entry_key = ?", hongbao.SendKey(id)); len(es) != 1 || es[0].kind != hongbao.KindVoid {
		t.Errorf("ledger under %s after the sweep: %+v; want one void", hongbao.SendKey(id), es)
	}
	c.CheckInvariants(t)
}

// ---- history ---------------------------------------------------------------------

// TestHistoryPaging: /v1/me/sent and /v1/me/received list newest first, and
// walking them two at a time with the cursor yields every item exactly once
// with its amount.
func TestHistoryPaging(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const sender, receiver hongbao.UserID = 700, 701
	c.TopUp(t, sender, 20000)

	type item struct {
		packet string
		amount int64
	}
	var sentItems, received []item // oldest first
	for i, total := range []int64{101, 202, 303, 404, 505} {
		s := cl.Send(sender, hongbao.SendRequest{Total: total, Count: 2, Type: hongbao.Random}, fmt.Sprintf("h-%d", i))
		if s.Status != http.StatusCreated {
			t.Fatalf("send: %v", s)
		}
		sentItems = append(sentItems, item{s.Body.ID, total})
		o := cl.Open(receiver, s.Body.ID)
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open: %v", o)
		}
		received = append(received, item{s.Body.ID, o.Body.Amount})
		// One credit at a time, so the ledger's order is the opening order.
		waitSettled(t, c, false, 10*time.Second)
	}

	walk := func(name string, page func(cursor string) clustertest.Response[api.HistoryJSON]) []item {
		t.Helper()
		var got []item
		var last time.Time
		cursor := ""
		for pages := 0; ; pages++ {
			r := page(cursor)
			if r.Status != http.StatusOK {
				t.Fatalf("%s page %d: %v", name, pages, r)
			}
			if len(r.Body.Items) > 2 || (r.Body.NextCursor != "" && len(r.Body.Items) != 2) {
				t.Fatalf("%s page %d: %d items with next cursor %q at limit 2", name, pages, len(r.Body.Items), r.Body.NextCursor)
			}
			for _, it := range r.Body.Items {
				at, err := time.Parse(time.RFC3339, it.At)
				if err != nil {
					t.Fatalf("%s: at %q: %v", name, it.At, err)
				}
				if !last.IsZero() && at.After(last) {
					t.Errorf("%s: %s at %s listed after an older item (%s)", name, it.Packet, it.At, last.Format(api.TimeFormat))
				}
				last = at
				got = append(got, item{it.Packet, it.Amount})
			}
			if r.Body.NextCursor == "" {
				return got
			}
			if pages > 10 {
				t.Fatalf("%s: paging does not end", name)
			}
			cursor = r.Body.NextCursor
		}
	}
	reversed := func(xs []item) []item { ys := slices.Clone(xs); slices.Reverse(ys); return ys }
	if got := walk("sent", func(cur string) clustertest.Response[api.HistoryJSON] { return cl.Sent(sender, cur, 2) }); !slices.Equal(got, reversed(sentItems)) {
		t.Errorf("sent, newest first:\n got %v\nwant %v", got, reversed(sentItems))
	}
	if got := walk("received", func(cur string) clustertest.Response[api.HistoryJSON] { return cl.Received(receiver, cur, 2) }); !slices.Equal(got, reversed(received)) {
		t.Errorf("received, newest first:\n got %v\nwant %v", got, reversed(received))
	}
	// The whole list in one page is the same list; others see nothing of it.
	if r := cl.Received(receiver, "", 100); r.Status != http.StatusOK || len(r.Body.Items) != 5 || r.Body.NextCursor != "" {
		t.Errorf("received at limit 100: %v", r)
	}
	if r := cl.Sent(receiver, "", 0); r.Status != http.StatusOK || len(r.Body.Items) != 0 {
		t.Errorf("sent by a user who sent nothing: %v", r)
	}
	if r := cl.Sent(sender, "", 101); r.Status != http.StatusBadRequest || r.Code != "invalid_limit" {
		t.Errorf("limit 101: %v; want 400 invalid_limit", r)
	}
	if r := cl.Sent(sender, "x", 2); r.Status != http.StatusBadRequest || r.Code != "invalid_cursor" {
		t.Errorf("cursor x: %v; want 400 invalid_cursor", r)
	}
	c.CheckInvariants(t)
}
