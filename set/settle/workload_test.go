package settle_test

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomised workload (0: from the clock)")

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
	voided   int                                 // sends answered 409 send_cancelled
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
	t.Logf("seed %d (rerun with: go test -run TestRandomWorkloadWithCrashes ./set/settle -args -seed=%d)", seed, seed)
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
				case r.Status == http.StatusConflict && r.Code == hongbao.ErrSendCancelled.Code:
					// A killed server left the send pending and the
					// client's retry came after the sweeper (3 s) voided
					// it (a loaded machine's retries took longer): nothing
					// was debited, which the balances below check (the
					// send is in no book).
					b.mu.Lock()
					b.voided++
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
	t.Logf("load done in %v: %d sends answered 201, %d refused (402), %d voided by the sweeper before their debit (409); opens: %v",
		time.Since(start).Round(time.Millisecond), len(b.sent), b.refused, b.voided, b.outcomes)
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
