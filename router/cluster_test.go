package router_test

// Integration tests of the whole cluster (issue 3): real hbrouter, hbserver
// and hbctl processes over private MariaDB and memcached instances
// (routertest), and the tests talk HTTP to the router like any client, or
// straight to the servers. The invariants are checked with the tests' own
// SQL (storetest), straight from each SET's MySQL.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/router"
	"github.com/hongbao-dev/hongbao/router/routertest"
	"github.com/hongbao-dev/hongbao/set"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
)

// TestClusterPacketsLandOnBothSets: packets sent through the router are
// spread over both SETs, and each one's rows are in the MySQL of exactly the
// SET the topology says owns its bucket.
func TestClusterPacketsLandOnBothSets(t *testing.T) {
	c := startCluster(t)
	const n = 100
	sender := c.richUser(t)
	bodies := make([]sendBody, n)
	ids := make([]hongbao.PacketID, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		bodies[i] = sendBody{Total: int64(100 + i), Count: 1 + i%10, Type: "random", Greeting: "恭喜发财 " + strconv.Itoa(i)}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ids[i] = c.mustSend(t, sender, bodies[i], "")
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[hongbao.PacketID]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("packet ID %s answered twice", id)
		}
		seen[id] = true
	}
	topo := c.topology(t)
	perSet := map[string]int{}
	for i, id := range ids {
		p := c.checkPacket(t, topo, id)
		if p == nil {
			continue
		}
		perSet[p.Set]++
		b := bodies[i]
		if p.Sender != sender || p.Total != b.Total || p.Count != b.Count || p.Type != b.Type ||
			p.RemainingAmount != b.Total || p.RemainingCount != b.Count || len(p.Shares) != 0 {
			t.Errorf("packet %s stored as %+v, sent %+v by %s", id, *p, b, sender)
		}
	}
	for _, s := range c.Sets {
		if perSet[s.Name] == 0 {
			t.Errorf("no packet of %d landed on SET %s (per SET: %v)", n, s.Name, perSet)
		}
	}
	var debited int64
	for _, b := range bodies {
		debited += b.Total
	}
	if got := c.balance(t, sender); got != 100_000_000-debited {
		t.Errorf("sender's balance %d after %d sends of %d fen in all, want %d", got, n, debited, 100_000_000-debited)
	}
	t.Logf("packets per SET: %v", perSet)
	// And the router finds each of them again.
	for i, id := range ids[:10] {
		r := c.detail(storetest.FreshUser(), id)
		if total, _ := r.Num("total"); r.Status != http.StatusOK || r.Str("id") != id.String() || total != bodies[i].Total {
			t.Errorf("detail of %s: %v", id, r)
		}
	}
}

// TestClusterIdempotentSend: the same send with the same Idempotency-Key,
// five times and partly at once, makes one packet (one ID, one row); the
// key reused for a different body is refused with 422.
func TestClusterIdempotentSend(t *testing.T) {
	c := startCluster(t)
	sender := c.richUser(t)
	key := storetest.UniqueName("idem-")
	body := sendBody{Total: 888, Count: 8, Type: "random", Greeting: "一次就好"}
	var replies [5]routertest.Reply
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = c.send(sender, body, key)
		}()
	}
	close(start)
	wg.Wait()
	replies[4] = c.send(sender, body, key)
	var id hongbao.PacketID
	for i, r := range replies {
		if r.Status != http.StatusCreated {
			t.Errorf("send %d with the same key: %v", i+1, r)
			continue
		}
		got := replyID(t, r)
		if id == 0 {
			id = got
		} else if got != id {
			t.Errorf("send %d with the same key created packet %s, an earlier one %s", i+1, got, id)
		}
		if total, _ := r.Num("total"); total != body.Total {
			t.Errorf("send %d: %v", i+1, r)
		}
	}
	if t.Failed() {
		return
	}
	if want := hongbao.BucketFor(sender, []byte(key)); id.Bucket() != want {
		t.Errorf("packet %s is in bucket %d, DESIGN.md says xxhash(sender, key) picks %d", id, id.Bucket(), want)
	}
	topo := c.topology(t)
	p := c.checkPacket(t, topo, id)
	if p == nil {
		return
	}
	countRows := func() (packets, keys int) { return c.senderRows(t, id.Table(c.loc), sender, key) }
	if packets, keys := countRows(); packets != 1 || keys != 1 {
		t.Errorf("5 sends with one key left %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	var keyFor hongbao.PacketID
	if err := c.DB(p.Set).QueryRow("SELECT packet_id FROM "+id.Bucket().DB()+".t_idem WHERE sender = ? AND idem_key = ?",
		sender, key).Scan(&keyFor); err != nil || keyFor != id {
		t.Errorf("idempotency row on SET %s names packet %s (%v), want %s", p.Set, keyFor, err, id)
	}

	// The key reused for a different request is refused.
	for _, other := range []sendBody{
		{Total: 999, Count: 8, Type: "random", Greeting: body.Greeting},
		{Total: 888, Count: 8, Type: "fixed", Greeting: body.Greeting},
		{Total: 888, Count: 8, Type: "random", Greeting: "另一个"},
	} {
		if r := c.send(sender, other, key); !r.IsProblem(http.StatusUnprocessableEntity, "idempotency_key_reused") {
			t.Errorf("send %+v with a used key: %v, want 422 idempotency_key_reused", other, r)
		}
	}
	if packets, keys := countRows(); packets != 1 || keys != 1 {
		t.Errorf("after the refused sends: %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	if got := c.balance(t, sender); got != 100_000_000-body.Total {
		t.Errorf("sender's balance %d after one packet of %d sent 5 times, want %d (one debit)", got, body.Total, 100_000_000-body.Total)
	}
	// The key belongs to its sender: another sender's packet is another.
	if r := c.send(c.richUser(t), body, key); r.Status != http.StatusCreated || replyID(t, r) == id {
		t.Errorf("another sender with the same key: %v, want a new packet", r)
	}
}

// TestClusterManyPacketsManyOpeners: 200 packets opened at once by 25
// clients each, users overlapping across packets (and some opening one
// packet twice). Every invariant holds, every answer agrees with MySQL, and
// exactly min(count, distinct openers) opens of each packet said "opened".
func TestClusterManyPacketsManyOpeners(t *testing.T) {
	c := startCluster(t)
	const packets, attempts, poolSize = 200, 25, 80
	senders := make([]hongbao.UserID, 40) // a sender's debits take turns on its account row
	for i := range senders {
		senders[i] = c.richUser(t)
	}
	pool := make([]hongbao.UserID, poolSize)
	for i := range pool {
		pool[i] = storetest.FreshUser()
	}
	ids := make([]hongbao.PacketID, packets)
	bodies := make([]sendBody, packets)
	for i := range bodies {
		count := 10 + mrand.IntN(16)
		if mrand.IntN(2) == 0 {
			bodies[i] = sendBody{Total: int64(count * (1 + mrand.IntN(300))), Count: count, Type: "fixed", Greeting: "fixed"}
		} else {
			bodies[i] = sendBody{Total: int64(count + mrand.IntN(8000)), Count: count, Type: "random", Greeting: "lucky"}
		}
	}
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ids[i] = c.mustSend(t, senders[i%len(senders)], bodies[i], "")
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sent := time.Since(began)

	// 25 opens per packet by users drawn with replacement from the pool.
	type job struct {
		packet int
		user   hongbao.UserID
	}
	var jobs []job
	distinct := make([]map[hongbao.UserID]bool, packets)
	for i := range ids {
		distinct[i] = map[hongbao.UserID]bool{}
		for range attempts {
			u := pool[mrand.IntN(poolSize)]
			distinct[i][u] = true
			jobs = append(jobs, job{i, u})
		}
	}
	mrand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	answers := make([][]openAnswer, packets)
	var mu sync.Mutex
	var retries atomic.Int64
	began = time.Now()
	sem = make(chan struct{}, 160)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a := c.openFinal(j.user, ids[j.packet], retryBusy, 60*time.Second)
			retries.Add(int64(a.Retries))
			mu.Lock()
			answers[j.packet] = append(answers[j.packet], a)
			mu.Unlock()
		}()
	}
	wg.Wait()
	opened := time.Since(began)

	topo := c.topology(t)
	totalOpened := 0
	for i, id := range ids {
		p := c.checkPacket(t, topo, id)
		if p == nil {
			continue
		}
		want := min(bodies[i].Count, len(distinct[i]))
		got := checkAnswers(t, p, answers[i])
		totalOpened += got
		if got != want {
			t.Errorf("packet %s (count %d, %d distinct openers): %d opens answered opened, want %d",
				id, bodies[i].Count, len(distinct[i]), got, want)
		}
		if len(p.Shares) != want {
			t.Errorf("packet %s (count %d, %d distinct openers): %d shares in MySQL, want %d",
				id, bodies[i].Count, len(distinct[i]), len(p.Shares), want)
		}
		for u := range p.Shares {
			if !distinct[i][u] {
				t.Errorf("packet %s: user %s holds a share but never opened it", id, u)
			}
		}
		if p.Total != bodies[i].Total || p.Count != bodies[i].Count || p.Type != bodies[i].Type {
			t.Errorf("packet %s stored as %+v, sent %+v", id, *p, bodies[i])
		}
	}
	spent := map[hongbao.UserID]int64{}
	for i, b := range bodies {
		spent[senders[i%len(senders)]] += b.Total
	}
	for _, u := range senders {
		if got := c.balance(t, u); got != 100_000_000-spent[u] {
			t.Errorf("sender %s: balance %d, want %d", u, got, 100_000_000-spent[u])
		}
	}
	t.Logf("%d packets sent in %v; %d opens (%d answered opened, %d busy retries) in %v",
		packets, sent.Round(time.Millisecond), len(jobs), totalOpened, retries.Load(), opened.Round(time.Millisecond))
}

// TestClusterServerRefusesUnsignedRequests: a SET server takes only
// requests a router signed. A user's Bearer token alone, a forged or stale
// signature or one under another secret is refused with 403 forbidden, and
// nothing is written.
func TestClusterServerRefusesUnsignedRequests(t *testing.T) {
	c := startCluster(t)
	topo := c.topology(t)
	setA := c.Sets[0].Name
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }
	sender := c.richUser(t)
	key, bucket := bucketKey(t, sender, ownedByA)
	minted, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	good := api.NewInternal([]byte(c.InternalSecret), time.Now)
	wrongSecret := api.NewInternal([]byte("not-the-internal-secret-0123456789"), time.Now)
	stale := api.NewInternal([]byte(c.InternalSecret), func() time.Time { return time.Now().Add(-5 * time.Minute) })
	forge := func(user hongbao.UserID) func(*http.Request) {
		return func(r *http.Request) {
			sig := make([]byte, 32)
			_, _ = rand.Read(sig)
			r.Header.Set(api.HeaderUser, user.String())
			r.Header.Set(api.HeaderTime, strconv.FormatInt(time.Now().Unix(), 10))
			r.Header.Set(api.HeaderSig, base64.RawURLEncoding.EncodeToString(sig))
		}
	}
	type attack struct {
		name string
		prep func(r *http.Request, user hongbao.UserID)
	}
	attacks := []attack{
		{"bearer token only", func(*http.Request, hongbao.UserID) {}},
		{"forged X-Hb-Sig", func(r *http.Request, u hongbao.UserID) { forge(u)(r) }},
		{"signed under another secret", func(r *http.Request, u hongbao.UserID) { wrongSecret.Sign(r, u) }},
		{"signature 5 minutes old", func(r *http.Request, u hongbao.UserID) { stale.Sign(r, u) }},
		{"signature of another user", func(r *http.Request, u hongbao.UserID) {
			good.Sign(r, storetest.FreshUser())
			r.Header.Set(api.HeaderUser, u.String())
		}},
	}
	for _, srv := range c.Sets[0].Addrs {
		for _, a := range attacks {
			for _, withID := range []bool{false, true} {
				hdr := map[string]string{"Idempotency-Key": key}
				if withID {
					hdr[api.HeaderPacketID] = minted.String()
				}
				req := c.Request(http.MethodPost, "http://"+srv+"/v1/packets", sender, sendBody{Total: 500, Count: 5, Type: "random"}.json(), hdr)
				a.prep(req, sender)
				if r := c.Do(req); !r.IsProblem(http.StatusForbidden, "forbidden") {
					t.Errorf("send straight to %s, %s (packet id header %v): %v, want 403 forbidden", srv, a.name, withID, r)
				}
			}
		}
	}

	// Opens and reads of an existing packet, straight to its servers.
	victimSender := c.richUser(t)
	pkt := c.mustSend(t, victimSender, sendBody{Total: 500, Count: 5, Type: "random"}, "")
	if pkt == 0 {
		return
	}
	owner, _ := router.Route(topo, pkt, nil)
	opener := storetest.FreshUser()
	for _, srv := range owner.Servers {
		for _, a := range attacks {
			for _, method := range []string{http.MethodPost, http.MethodGet} {
				path := "/v1/packets/" + pkt.String()
				if method == http.MethodPost {
					path += "/open"
				}
				req := c.Request(method, "http://"+srv+path, opener, nil, nil)
				a.prep(req, opener)
				if r := c.Do(req); !r.IsProblem(http.StatusForbidden, "forbidden") {
					t.Errorf("%s %s straight to %s, %s: %v, want 403 forbidden", method, path, srv, a.name, r)
				}
			}
		}
	}

	// Nothing was written.
	day := minted.Table(c.loc)
	rowsOf := func(u hongbao.UserID) (packets, keys int) { return c.senderRows(t, day, u, "") }
	if packets, keys := rowsOf(sender); packets != 0 || keys != 0 {
		t.Errorf("refused sends wrote %d packet rows and %d idempotency rows", packets, keys)
	}
	if got := c.balance(t, sender); got != 100_000_000 {
		t.Errorf("refused sends moved money: balance %d", got)
	}
	if p := c.checkPacket(t, topo, pkt); p != nil && (len(p.Shares) != 0 || p.RemainingCount != p.Count) {
		t.Errorf("refused opens changed packet %s: %+v", pkt, *p)
	}

	// The control: the same send, signed by the router's secret, is taken,
	// so the refusals above were the signature's doing.
	req := c.Request(http.MethodPost, "http://"+c.Sets[0].Addrs[0]+"/v1/packets", 0, sendBody{Total: 500, Count: 5, Type: "random"}.json(),
		map[string]string{"Idempotency-Key": key, api.HeaderPacketID: minted.String()})
	good.Sign(req, sender)
	if r := c.Do(req); r.Status != http.StatusCreated || r.Str("id") != minted.String() {
		t.Errorf("properly signed send straight to a server: %v", r)
	}
	if packets, keys := rowsOf(sender); packets != 1 || keys != 1 {
		t.Errorf("signed send wrote %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	if got := c.balance(t, sender); got != 100_000_000-500 {
		t.Errorf("signed send: balance %d, want %d", got, 100_000_000-500)
	}
}

// TestClusterKillServerDuringOpens: SIGKILL of a SET server while opens of
// ~30 packets are in flight on it. Clients retrying 503/5xx all get a final
// answer within 30 s, every answer agrees with MySQL (an "opened" is
// durable with its amount), nobody holds two shares, every invariant holds.
func TestClusterKillServerDuringOpens(t *testing.T) {
	c := startCluster(t)
	topo := c.topology(t)
	setA := c.Sets[0].Name
	victim, victimName := c.Sets[0].Addrs[0], c.Sets[0].Servers[0]
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }
	const count, openers, poolSize = 20, 30, 60

	// Packets of SET a: 20 whose first server is the victim, 10 the other.
	sender := c.richUser(t)
	var onVictim, onOther []hongbao.PacketID
	for tries := 0; (len(onVictim) < 20 || len(onOther) < 10) && tries < 300; tries++ {
		key, _ := bucketKey(t, sender, ownedByA)
		id := c.mustSend(t, sender, sendBody{Total: 2000 + int64(tries), Count: count, Type: "random", Greeting: "kill -9"}, key)
		if id == 0 {
			return
		}
		if _, ranked := router.Route(topo, id, nil); ranked[0] == victim {
			if len(onVictim) < 20 {
				onVictim = append(onVictim, id)
			}
		} else if len(onOther) < 10 {
			onOther = append(onOther, id)
		}
	}
	ids := append(slices.Clone(onVictim), onOther...)
	if len(onVictim) < 10 {
		t.Fatalf("only %d packets rank %s first", len(onVictim), victim)
	}
	pool := make([]hongbao.UserID, poolSize)
	for i := range pool {
		pool[i] = storetest.FreshUser()
	}

	answers := make([][]openAnswer, len(ids))
	openersOf := make([]map[hongbao.UserID]bool, len(ids))
	var mu sync.Mutex
	var done, retries atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200)
	began := time.Now()
	for i, id := range ids {
		openersOf[i] = map[hongbao.UserID]bool{}
		for _, k := range mrand.Perm(poolSize)[:openers] {
			u := pool[k]
			openersOf[i][u] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(mrand.IntN(1500)) * time.Millisecond)
				sem <- struct{}{}
				a := c.openFinal(u, id, retryAny5xx, 30*time.Second)
				<-sem
				retries.Add(int64(a.Retries))
				done.Add(1)
				mu.Lock()
				answers[i] = append(answers[i], a)
				mu.Unlock()
			}()
		}
	}
	// Kill once a quarter of the opens are answered: the rest are queued,
	// in flight or still to come.
	total := int64(len(ids) * openers)
	for done.Load() < total/4 && time.Since(began) < 5*time.Second {
		time.Sleep(2 * time.Millisecond)
	}
	atKill := done.Load()
	c.Kill(routertest.Server, victimName)
	killedAt := time.Since(began)
	if atKill > total/2 {
		t.Errorf("the kill came late: %d of %d opens were already answered", atKill, total)
	}
	wg.Wait()
	elapsed := time.Since(began)

	var slowest time.Duration
	totalOpened := 0
	for i, id := range ids {
		p := c.checkPacket(t, topo, id)
		if p == nil {
			continue
		}
		totalOpened += checkAnswers(t, p, answers[i])
		for _, a := range answers[i] {
			slowest = max(slowest, a.Took)
			if a.Took > 30*time.Second {
				t.Errorf("packet %s, user %s: final answer only after %v", id, a.User, a.Took)
			}
		}
		if p.RemainingCount != 0 || len(p.Shares) != count {
			t.Errorf("packet %s: %d shares, %d left, after %d openers of %d shares all answered",
				id, len(p.Shares), p.RemainingCount, openers, count)
		}
		for u := range p.Shares {
			if !openersOf[i][u] {
				t.Errorf("packet %s: user %s holds a share but never opened it", id, u)
			}
		}
	}
	t.Logf("%d packets (%d first on %s), %d opens: SIGKILL at %v after %d answers; all answered in %v "+
		"(slowest client %v, %d retries), %d answered opened",
		len(ids), len(onVictim), victim, total, killedAt.Round(time.Millisecond), atKill, elapsed.Round(time.Millisecond),
		slowest.Round(time.Millisecond), retries.Load(), totalOpened)

	c.Restart(routertest.Server, victimName)
	// The restarted server serves again: a fresh packet of SET a that ranks
	// it first can be sent and opened.
	for tries := 0; tries < 100; tries++ {
		key, _ := bucketKey(t, sender, ownedByA)
		id := c.mustSend(t, sender, sendBody{Total: 100, Count: 1, Type: "random"}, key)
		if _, ranked := router.Route(topo, id, nil); ranked[0] != victim {
			continue
		}
		a := c.openFinal(storetest.FreshUser(), id, retryAny5xx, 10*time.Second)
		if kind, err := routertest.Classify(a.R); err != nil || kind != hongbao.Opened {
			t.Errorf("open after the restart: %v", a.R)
		}
		break
	}
}

// TestClusterMoveBucket: `hbctl topology move` moves a bucket from SET a to
// SET b live. Within ~3 s the router sends the bucket's packet to SET b,
// whose MySQL now holds it with the same money; an old SET-a server answers
// a signed request for the bucket 421 wrong_set; SET a's fence refuses any
// write of the bucket; topology show counts 499/501.
func TestClusterMoveBucket(t *testing.T) {
	c := startCluster(t)
	topo := c.topology(t)
	setA, setB := c.Sets[0].Name, c.Sets[1].Name
	if n := len(topo.Buckets(setA)); n != 500 {
		t.Fatalf("SET %s owns %d buckets before the move, want 500 (has a move run already?)", setA, n)
	}
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }

	// A bucket of SET a holding no other packet today (a move carries
	// along every row of the bucket).
	sender := c.richUser(t)
	today := time.Now().In(c.loc).Day()
	var key string
	var bucket hongbao.Bucket
	for tries := 0; tries < 300; tries++ {
		key, bucket = bucketKey(t, sender, ownedByA)
		var n int
		err := c.DB(setA).QueryRow("SELECT COUNT(*) FROM " + hongbao.DayTable{Bucket: bucket, Day: today}.Packets()).Scan(&n)
		if storetest.MissingTable(err) || (err == nil && n == 0) {
			break
		}
	}
	body := sendBody{Total: 1000, Count: 5, Type: "random", Greeting: "搬家"}
	id := c.mustSend(t, sender, body, key)
	if id == 0 {
		return
	}
	if id.Bucket() != bucket {
		t.Fatalf("packet %s is in bucket %d, want %d", id, id.Bucket(), bucket)
	}
	early := []hongbao.UserID{storetest.FreshUser(), storetest.FreshUser()}
	for _, u := range early {
		if a := c.openFinal(u, id, retryBusy, 10*time.Second); a.R.Str("status") != hongbao.Opened {
			t.Fatalf("open before the move: %v", a.R)
		}
	}
	before := c.checkPacket(t, topo, id)
	if before == nil || before.Set != setA {
		t.Fatalf("packet %s is not on SET %s before the move", id, setA)
	}

	// A reader follows the packet through the router during the move.
	type seen struct {
		at time.Time
		r  routertest.Reply
	}
	var polls []seen
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() {
		defer pollers.Done()
		reader := storetest.FreshUser()
		for {
			select {
			case <-stop:
				return
			default:
			}
			polls = append(polls, seen{time.Now(), c.detail(reader, id)})
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		pollers.Wait()
	}()

	time.Sleep(100 * time.Millisecond)
	moveBegan := time.Now()
	out := c.MustCtl(t, "topology", "move", "--bucket", strconv.Itoa(int(bucket)), "--to", setB)
	moved := time.Now()
	t.Logf("hbctl topology move (%v):\n%s", moved.Sub(moveBegan).Round(time.Millisecond), out)

	// From now on SET a does not own the bucket (DESIGN.md invariant 5):
	// asked straight with a router's signature, its servers must refuse the
	// packet (421 wrong_set), never answer for it from rows that are gone.
	type stale struct {
		srv   string
		after time.Duration
		r     routertest.Reply
	}
	var staleAnswers []stale
	var staleMu sync.Mutex
	var probes sync.WaitGroup
	probeSigner := api.NewInternal([]byte(c.InternalSecret), time.Now)
	for _, srv := range c.Sets[0].Addrs {
		probes.Add(1)
		go func() {
			defer probes.Done()
			reader := storetest.FreshUser()
			for time.Since(moved) < 3*time.Second {
				req := c.Request(http.MethodGet, "http://"+srv+"/v1/packets/"+id.String(), 0, nil, nil)
				probeSigner.Sign(req, reader)
				r := c.Do(req)
				if r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
					return
				}
				staleMu.Lock()
				staleAnswers = append(staleAnswers, stale{srv, time.Since(moved), r})
				staleMu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}

	// Within ~3 s the router sends the packet to SET b: a new open
	// succeeds there and the detail shows every share.
	late := storetest.FreshUser()
	var final openAnswer
	for {
		final = c.openFinal(late, id, retryBusy, 5*time.Second)
		if final.R.Status == http.StatusOK || time.Since(moved) > 5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	routedAfter := time.Since(moved)
	if final.R.Str("status") != hongbao.Opened {
		t.Fatalf("open through the router after the move: %v (after %v)", final.R, routedAfter)
	}
	if routedAfter > 3*time.Second {
		t.Errorf("the router took %v after the move to open the packet on SET %s, want ~3 s at most", routedAfter, setB)
	}
	r := c.detail(storetest.FreshUser(), id)
	if r.Status != http.StatusOK || len(r.JSON["records"].([]any)) != 3 {
		t.Errorf("detail through the router after the move: %v", r)
	}
	close(stop)
	pollers.Wait()

	topo2 := c.topology(t)
	if topo2.Owner(bucket).Name != setB || topo2.Version != topo.Version+1 {
		t.Fatalf("topology after the move: bucket %d on %s at version %d (was %d)", bucket, topo2.Owner(bucket).Name, topo2.Version, topo.Version)
	}
	after := c.checkPacket(t, topo2, id) // and asserts SET a holds no row of it any more
	if after == nil {
		t.FailNow()
	}
	if after.Set != setB || after.Total != before.Total || after.Count != before.Count || after.Sender != sender ||
		len(after.Shares) != 3 || after.RemainingAmount != before.RemainingAmount-final.R.Amount() {
		t.Errorf("packet on SET %s after the move: %+v, before: %+v", after.Set, *after, *before)
	}
	for _, u := range early {
		if after.Shares[u] != before.Shares[u] {
			t.Errorf("user %s's share was %d on SET %s, is %d on SET %s", u, before.Shares[u], setA, after.Shares[u], setB)
		}
	}
	if after.Shares[late] != final.R.Amount() {
		t.Errorf("user %s was told %d, SET %s holds %d", late, final.R.Amount(), setB, after.Shares[late])
	}

	// What a reader saw through the router while the bucket moved: the
	// packet, with the same money, or a 503 to retry; never another answer.
	var busy int
	var firstBusy, lastBusy time.Duration
	for _, p := range polls {
		if p.r.Status == http.StatusServiceUnavailable {
			if busy == 0 {
				firstBusy = p.at.Sub(moveBegan)
			}
			lastBusy = p.at.Sub(moveBegan)
			busy++
			continue
		}
		total, _ := p.r.Num("total")
		recs, _ := p.r.JSON["records"].([]any)
		if p.r.Status != http.StatusOK || total != body.Total {
			t.Errorf("detail through the router %v after the move began: %v", p.at.Sub(moveBegan).Round(time.Millisecond), p.r)
			continue
		}
		for _, rec := range recs {
			m, _ := rec.(map[string]any)
			u, _ := hongbao.ParseUserID(m["user"].(string))
			amt, _ := m["amount"].(json.Number).Int64()
			if after.Shares[u] != amt {
				t.Errorf("detail during the move showed user %s with %d fen; MySQL says %d", u, amt, after.Shares[u])
			}
		}
	}
	t.Logf("router opened on SET %s %v after the move; reader saw %d answers during it, %d of them 503 (from %v to %v after the move began)",
		setB, routedAfter.Round(time.Millisecond), len(polls), busy, firstBusy.Round(time.Millisecond), lastBusy.Round(time.Millisecond))

	probes.Wait()
	for i, a := range staleAnswers {
		if i == 3 {
			t.Errorf("... %d such answers in all", len(staleAnswers))
			break
		}
		t.Errorf("old SET-%s server %s, asked for packet %s of moved bucket %d %v after the move: %v; want 421 wrong_set "+
			"(it still believes it owns the bucket and reads the rows the move deleted)",
			setA, a.srv, id, bucket, a.after.Round(time.Millisecond), a.r)
	}

	// An old SET-a server, asked directly with a valid router signature,
	// refuses every request of the bucket with 421 wrong_set.
	internal := api.NewInternal([]byte(c.InternalSecret), time.Now)
	intruder := c.richUser(t) // can pay: only the bucket's owner may refuse the send
	minted, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range c.Sets[0].Addrs {
		reqs := map[string]func() *http.Request{
			"open": func() *http.Request {
				return c.Request(http.MethodPost, "http://"+srv+"/v1/packets/"+id.String()+"/open", 0, nil, nil)
			},
			"detail": func() *http.Request {
				return c.Request(http.MethodGet, "http://"+srv+"/v1/packets/"+id.String(), 0, nil, nil)
			},
			"send": func() *http.Request {
				return c.Request(http.MethodPost, "http://"+srv+"/v1/packets", 0, sendBody{Total: 100, Count: 1, Type: "random"}.json(),
					map[string]string{api.HeaderPacketID: minted.String()})
			},
		}
		for name, mk := range reqs {
			deadline := time.Now().Add(3 * time.Second)
			for {
				req := mk()
				internal.Sign(req, intruder)
				r := c.Do(req)
				if r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("signed %s of bucket %d straight to old SET-%s server %s: %v, want 421 wrong_set", name, bucket, setA, srv, r)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	// SET a's MySQL fence: no write of the bucket can commit there, even
	// from a store that ignores the topology.
	var fences int
	if err := c.DB(setA).QueryRow("SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", setA, int(bucket)).Scan(&fences); err != nil || fences != 0 {
		t.Errorf("SET %s's fence still has bucket %d (%d rows, %v)", setA, bucket, fences, err)
	}
	if err := c.DB(setB).QueryRow("SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", setB, int(bucket)).Scan(&fences); err != nil || fences != 1 {
		t.Errorf("SET %s's fence lacks bucket %d (%d rows, %v)", setB, bucket, fences, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := store.New(c.DB(setA), setA, c.loc, time.Now, mrand.Int64N)
	_, _, err = st.Create(ctx, store.NewPacket{ID: minted, Sender: intruder, Expiry: time.Hour, Funding: hongbao.Funded,
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}})
	if !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("create in bucket %d on SET %s after the move: %v, want wrong_set", bucket, setA, err)
	}
	if _, err := st.OpenBatch(ctx, id, []hongbao.UserID{intruder}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("open of %s on SET %s after the move: %v, want wrong_set", id, setA, err)
	}
	if p := storetest.ReadPacket(t, c.DB(setA), minted); p != nil {
		t.Errorf("a refused create left packet %s on SET %s", minted, setA)
	}
	if p := storetest.ReadPacket(t, c.DB(setA), id); p != nil {
		t.Errorf("packet %s still on SET %s after the move: %+v", id, setA, *p)
	}
	// The control: a bucket SET a still owns takes the same write.
	other, err := hongbao.NewMinter(time.Now).Next(topo2.Buckets(setA)[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := st.Create(ctx, store.NewPacket{ID: other, Sender: intruder, Expiry: time.Hour, Funding: hongbao.Funded,
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}}); err != nil || !created {
		t.Errorf("create in bucket %d, still SET %s's: created %v, %v", other.Bucket(), setA, created, err)
	}
	if p := c.checkPacket(t, c.topology(t), id); p != nil && p.Shares[intruder] != 0 {
		t.Errorf("user %s got a share of %s through an old SET-a server", intruder, id)
	}

	// hbctl shows the new counts.
	var shown struct {
		Version int64 `json:"version"`
		Sets    []struct {
			Name        string `json:"name"`
			BucketCount int    `json:"bucket_count"`
		} `json:"sets"`
	}
	js := c.MustCtl(t, "topology", "show", "--json")
	if err := json.Unmarshal([]byte(js), &shown); err != nil {
		t.Fatalf("topology show --json: %v\n%s", err, js)
	}
	counts := map[string]int{}
	for _, s := range shown.Sets {
		counts[s.Name] = s.BucketCount
	}
	if shown.Version != topo2.Version || counts[setA] != 499 || counts[setB] != 501 || len(shown.Sets) != 2 {
		t.Errorf("topology show --json: version %d, counts %v; want version %d, %s 499, %s 501\n%s",
			shown.Version, counts, topo2.Version, setA, setB, strings.TrimSpace(js))
	}
	// A move that stopped after publishing the topology, before deleting
	// the old copy, leaves stale rows on SET a: running the move again
	// finds the bucket moved and deletes them, and SET b keeps its rows.
	table := id.Table(c.loc)
	rowsOn := func(set string) int {
		var n int
		if err := c.DB(set).QueryRow("SELECT COUNT(*) FROM "+table.Packets()+" WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := store.CopyBucket(context.Background(), c.DB(setB), c.DB(setA), bucket); err != nil {
		t.Fatal(err)
	}
	if rowsOn(setA) != 1 {
		t.Fatalf("leftover copy not made on %s", setA)
	}
	again := c.MustCtl(t, "topology", "move", "--bucket", strconv.Itoa(int(bucket)), "--to", setB)
	if !strings.Contains(again, "already on SET") || rowsOn(setA) != 0 || rowsOn(setB) != 1 {
		t.Errorf("second move: %q; rows on %s %d (want 0), on %s %d (want 1)", again, setA, rowsOn(setA), setB, rowsOn(setB))
	}
}

// ---- the cluster -------------------------------------------------------------

// cluster is a routertest cluster of two SETs of two servers and a router,
// with no settler: every share's wallet credit stays in its SET's outbox,
// where checkPacket finds it.
type cluster struct {
	*routertest.Cluster
	loc  *time.Location
	meta *sql.DB
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startLimitedCluster(t, "") // no abuse limits: tests load the cluster
}

// richUser returns a fresh user with enough money for any test.
func (c *cluster) richUser(t testing.TB) hongbao.UserID {
	t.Helper()
	u := storetest.FreshUser()
	c.TopUp(t, u, 100_000_000)
	return u
}

// balance reads user's wallet balance.
func (c *cluster) balance(t testing.TB, user hongbao.UserID) int64 {
	t.Helper()
	b, err := c.Wallet().Balance(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// do sends a request through the router as user (0: no token).
func (c *cluster) do(method, path string, user hongbao.UserID, body []byte, hdr map[string]string) routertest.Reply {
	return c.Do(c.Request(method, c.URL()+path, user, body, hdr))
}

// sendBody is the JSON of a send.
type sendBody struct {
	Total    int64  `json:"total"`
	Count    int    `json:"count"`
	Type     string `json:"type"`
	Greeting string `json:"greeting"`
}

func (b sendBody) json() []byte {
	raw, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return raw
}

// send posts a packet through the router; key "" sends no Idempotency-Key.
func (c *cluster) send(user hongbao.UserID, b sendBody, key string) routertest.Reply {
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	return c.do(http.MethodPost, "/v1/packets", user, b.json(), hdr)
}

// mustSend sends until created (503 answers retried briefly) and returns the
// packet's ID. Safe in any goroutine: it reports with Errorf and returns 0.
func (c *cluster) mustSend(t testing.TB, user hongbao.UserID, b sendBody, key string) hongbao.PacketID {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.send(user, b, key)
		if r.Status == http.StatusCreated {
			id, err := hongbao.ParsePacketID(r.Str("id"))
			if err != nil {
				t.Errorf("send answered id %q: %v", r.Str("id"), err)
			}
			return id
		}
		if (r.Err == nil && r.Status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			t.Errorf("send %+v as %s: %v", b, user, r)
			return 0
		}
		time.Sleep(time.Duration(10+mrand.IntN(20)) * time.Millisecond)
	}
}

func (c *cluster) open(user hongbao.UserID, id hongbao.PacketID) routertest.Reply {
	return c.do(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil, nil)
}

func (c *cluster) detail(user hongbao.UserID, id hongbao.PacketID) routertest.Reply {
	return c.do(http.MethodGet, "/v1/packets/"+id.String(), user, nil, nil)
}

// replyID is the packet ID of a send's answer.
func replyID(t testing.TB, r routertest.Reply) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatalf("answer %v: id %q: %v", r, r.Str("id"), err)
	}
	return id
}

// retryPolicy says which answers openFinal retries.
type retryPolicy int

const (
	retryBusy   retryPolicy = iota // 503 only
	retryAny5xx                    // 503, every other 5xx and transport errors
)

// openAnswer is the final answer one client got.
type openAnswer struct {
	User    hongbao.UserID
	Packet  hongbao.PacketID
	R       routertest.Reply
	Retries int
	Took    time.Duration
}

// openFinal opens until the answer is final or the deadline passes,
// sleeping a little between tries.
func (c *cluster) openFinal(user hongbao.UserID, id hongbao.PacketID, policy retryPolicy, within time.Duration) openAnswer {
	began := time.Now()
	deadline := began.Add(within)
	retries := 0
	for {
		r := c.open(user, id)
		retry := r.Status == http.StatusServiceUnavailable
		if policy == retryAny5xx {
			retry = retry || r.Err != nil || r.Status >= 500
		}
		if !retry || time.Now().After(deadline) {
			return openAnswer{User: user, Packet: id, R: r, Retries: retries, Took: time.Since(began)}
		}
		retries++
		time.Sleep(time.Duration(10+mrand.IntN(30)) * time.Millisecond)
	}
}

// topology reads the current topology from the meta database.
func (c *cluster) topology(t testing.TB) *set.Topology {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo, err := set.LoadTopology(ctx, c.meta)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// dbPacket is a packet as the MySQL of its SET holds it.
type dbPacket struct {
	storetest.Packet
	Set string
}

// checkPacket finds packet id in the SETs' MySQL, asserts it is held by
// exactly the SET topo says owns its bucket, asserts DESIGN.md's invariants
// 1 and 2 on its rows, and that every share's wallet credit waits in an
// outbox, and returns them (nil if it is nowhere).
func (c *cluster) checkPacket(t testing.TB, topo *set.Topology, id hongbao.PacketID) *dbPacket {
	t.Helper()
	owner := topo.Owner(id.Bucket()).Name
	var found *dbPacket
	for _, s := range c.Sets {
		p := storetest.ReadPacket(t, c.DB(s.Name), id)
		if p == nil {
			continue
		}
		if s.Name != owner {
			t.Errorf("packet %s (bucket %d) has rows on SET %s, but SET %s owns the bucket", id, id.Bucket(), s.Name, owner)
			continue
		}
		found = &dbPacket{Packet: *p, Set: s.Name}
	}
	if found == nil {
		t.Errorf("packet %s (bucket %d) is not in the MySQL of its owner SET %s", id, id.Bucket(), owner)
		return nil
	}
	p := found
	p.Check(t)
	// Every share has its wallet credit in an outbox (no settler runs in
	// this cluster, so none is delivered): exactly one, of the same amount.
	credits := map[hongbao.UserID][]int64{}
	for _, s := range c.Sets {
		for u, cs := range storetest.OutboxCredits(t, c.DB(s.Name), id) {
			credits[u] = append(credits[u], cs...)
		}
	}
	for u, share := range p.Shares {
		if cs := credits[u]; len(cs) != 1 || cs[0] != share {
			t.Errorf("packet %s: user %s holds %d fen, outbox credits %v", id, u, share, cs)
		}
	}
	for u, cs := range credits {
		if _, ok := p.Shares[u]; !ok {
			t.Errorf("packet %s: outbox credits %v to user %s, who holds no share", id, cs, u)
		}
	}
	if p.Funding != hongbao.Funded {
		t.Errorf("packet %s: funding %d, want %d (funded: the sender was debited)", id, p.Funding, hongbao.Funded)
	}
	if p.Type == string(hongbao.Fixed) {
		for u, a := range p.Shares {
			if a != p.Total/int64(p.Count) {
				t.Errorf("fixed packet %s: user %s got %d, want %d", id, u, a, p.Total/int64(p.Count))
			}
		}
	}
	return p
}

// senderRows counts sender's rows, over every SET, in the packet table day
// and in the idempotency table of its bucket (those of key, unless key is
// "").
func (c *cluster) senderRows(t testing.TB, day hongbao.DayTable, sender hongbao.UserID, key string) (packets, keys int) {
	t.Helper()
	idem, args := "SELECT COUNT(*) FROM "+day.DB()+".t_idem WHERE sender = ?", []any{sender}
	if key != "" {
		idem, args = idem+" AND idem_key = ?", append(args, key)
	}
	count := func(db *sql.DB, q string, args ...any) int {
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil && !storetest.MissingTable(err) {
			t.Fatal(err)
		}
		return n
	}
	for _, s := range c.Sets {
		packets += count(c.DB(s.Name), "SELECT COUNT(*) FROM "+day.Packets()+" WHERE sender = ?", sender)
		keys += count(c.DB(s.Name), idem, args...)
	}
	return packets, keys
}

// checkAnswers compares the final answers clients got for packet p with its
// rows: every answer is final, every opened/already_opened amount is the
// user's share in MySQL, no sold_out went to a user holding a share, and no
// user was told opened twice. It returns the number of "opened" answers.
func checkAnswers(t testing.TB, p *dbPacket, answers []openAnswer) (opened int) {
	t.Helper()
	openedBy := map[hongbao.UserID]int{}
	for _, a := range answers {
		kind, err := routertest.Classify(a.R)
		if err != nil {
			t.Errorf("packet %s, user %s (after %d retries, %v): %v", a.Packet, a.User, a.Retries, a.Took, err)
			continue
		}
		share, has := p.Shares[a.User]
		switch kind {
		case hongbao.Opened, hongbao.AlreadyOpened:
			if kind == hongbao.Opened {
				opened++
				openedBy[a.User]++
			}
			if !has {
				t.Errorf("packet %s: user %s was told %s %d fen, but has no share in MySQL", a.Packet, a.User, kind, a.R.Amount())
			} else if share != a.R.Amount() {
				t.Errorf("packet %s: user %s was told %s %d fen, MySQL says %d", a.Packet, a.User, kind, a.R.Amount(), share)
			}
		case "sold_out":
			if has {
				t.Errorf("packet %s: user %s was told sold_out, but holds a share of %d fen", a.Packet, a.User, share)
			}
		}
	}
	for u, n := range openedBy {
		if n > 1 {
			t.Errorf("packet %s: user %s was told opened %d times", p.ID, u, n)
		}
	}
	return opened
}

// bucketKey returns an Idempotency-Key whose bucket for sender satisfies ok.
func bucketKey(t testing.TB, sender hongbao.UserID, ok func(hongbao.Bucket) bool) (string, hongbao.Bucket) {
	t.Helper()
	for range 100_000 {
		key := storetest.UniqueName("k-")
		if b := hongbao.BucketFor(sender, []byte(key)); ok(b) {
			return key, b
		}
	}
	t.Fatal("no idempotency key found for the wanted buckets")
	return "", 0
}
