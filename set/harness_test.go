package set_test

// The harness runs the real SET server stack (store on the test MariaDB,
// cache on a real memcached, queues, HTTP handler) behind httptest, and
// checks the invariants of DESIGN.md with the tests' own SQL (dbtest),
// independently of the store's code.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/set"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// testSecret is the router -> server secret of every harness.
var testSecret = []byte("harness-internal-secret-0123456789")

// harnessOpts tunes newHarness; the zero value is the usual setup.
type harnessOpts struct {
	// Memcached is the memcached address; "" uses the shared test one.
	Memcached string
	// Set is the SET name; "" picks a unique one.
	Set string
	// Buckets the SET owns in the MySQL fence; nil owns all of them.
	Buckets []hongbao.Bucket
	// Limits; zero uses hongbao.DefaultLimits().
	Limits hongbao.Limits
	// SoldOutMemo is the server's memo of sold-out packets; 0 uses 10000,
	// negative turns it off.
	SoldOutMemo int
	// StoreDB is the server's own pool; nil shares the harness's.
	StoreDB *sql.DB
	// Wallet, when set, funds sends (and holds daily limits); nil: none.
	Wallet *wallet.Wallet
	// DevGrant, with Wallet, is the dev cluster's grant (and turns on
	// POST /v1/dev/topup); 0: none.
	DevGrant int64
	// Log is the server's logger; nil logs warnings and above to the test.
	Log *zap.Logger
}

type harness struct {
	t      testing.TB
	db     *sql.DB
	set    string
	loc    *time.Location
	server *set.Server
	http   *httptest.Server
	url    string
	client *http.Client
	auth   *api.Internal
	gaveUp atomic.Bool // a client of openFinal found no final answer in time
}

// newHarness builds the real stack behind httptest. Cleanup closes the HTTP
// server (waiting for requests in flight), then drains the queues.
func newHarness(t testing.TB, opts harnessOpts) *harness {
	t.Helper()
	db := dbtest.DB(t, "a", 64)
	if opts.Set == "" {
		opts.Set = dbtest.UniqueName("t")
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = fence.AllBuckets()
	}
	dbtest.Own(t, db, opts.Set, buckets)
	if opts.Memcached == "" {
		opts.Memcached = dbtest.Memcached(t, "a")
	}
	if opts.Limits == (hongbao.Limits{}) {
		opts.Limits = hongbao.DefaultLimits()
	}
	if opts.SoldOutMemo == 0 {
		opts.SoldOutMemo = 10000
	}
	if opts.StoreDB == nil {
		opts.StoreDB = db
	}
	loc := dbtest.Shanghai(t)
	log := opts.Log
	if log == nil {
		log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	srv := set.NewServer(set.Deps{
		Store:    store.New(opts.StoreDB, opts.Set, loc, time.Now, mrand.Int64N),
		Cache:    cache.New([]string{opts.Memcached}, 500*time.Millisecond, 256, log),
		Auth:     api.NewInternal(testSecret, time.Now),
		Wallet:   opts.Wallet,
		DevGrant: opts.DevGrant,
		Limits:   opts.Limits,
		// Merging on, as configured in production: every test of the open
		// path also runs merged transactions.
		Queue:       queue.Config{Size: 1024, Batch: 32, Idle: 2 * time.Second, TxTimeout: 5 * time.Second, SlotCap: 2, Parallel: 4, Merge: 8},
		SoldOutMemo: opts.SoldOutMemo,
		Loc:         loc,
		Now:         time.Now,
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
	t.Cleanup(hs.Close) // runs before srv.Close: requests first, then queues
	// As many idle connections as the largest crowd of clients (1,200), so
	// no answer closes a connection another request then dials again.
	tr := &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &harness{
		t: t, db: db, set: opts.Set, loc: loc, server: srv, http: hs, url: hs.URL,
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		auth:   api.NewInternal(testSecret, time.Now),
	}
}

// reply is an HTTP answer with its JSON body.
type reply = clustertest.Reply

// request is one request to the harness; the zero Sign signs it as the
// router would.
type request struct {
	method, path string
	user         hongbao.UserID
	body         []byte
	header       map[string]string
	unsigned     bool          // send no signature
	signer       *api.Internal // sign with this instead of the harness's
}

func (h *harness) do(rq request) reply {
	req, err := clustertest.NewRequest(rq.method, h.url+rq.path, rq.body, rq.header)
	if err != nil {
		return reply{Err: err}
	}
	switch {
	case rq.unsigned:
		if rq.user != 0 {
			req.Header.Set(api.HeaderUser, rq.user.String())
		}
	case rq.signer != nil:
		rq.signer.Sign(req, rq.user)
	default:
		h.auth.Sign(req, rq.user)
	}
	return clustertest.Do(h.client, req)
}

// jsonBody marshals v unless it already is raw bytes or a string.
func jsonBody(v any) []byte {
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// send posts a packet; idemKey "" sends no Idempotency-Key.
func (h *harness) send(user hongbao.UserID, body any, idemKey string) reply {
	rq := request{method: http.MethodPost, path: "/v1/packets", user: user, body: jsonBody(body)}
	if idemKey != "" {
		rq.header = map[string]string{"Idempotency-Key": idemKey}
	}
	return h.do(rq)
}

func (h *harness) open(user hongbao.UserID, id string) reply {
	return h.do(request{method: http.MethodPost, path: "/v1/packets/" + id + "/open", user: user})
}

func (h *harness) grab(user hongbao.UserID, id string) reply {
	return h.do(request{method: http.MethodPost, path: "/v1/packets/" + id + "/grab", user: user})
}

func (h *harness) detail(user hongbao.UserID, id string) reply {
	return h.do(request{method: http.MethodGet, path: "/v1/packets/" + id, user: user})
}

// mustSend creates a packet and returns its ID.
func (h *harness) mustSend(t testing.TB, sender hongbao.UserID, total int64, count int, typ string) hongbao.PacketID {
	t.Helper()
	r := h.send(sender, map[string]any{"total": total, "count": count, "type": typ, "greeting": "恭喜发财"}, "")
	if r.Status != http.StatusCreated {
		t.Fatalf("send: %v", r)
	}
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatalf("send answered id %q: %v", r.Str("id"), err)
	}
	return id
}

// distinctUsers returns n distinct user IDs from a random base.
func distinctUsers(n int) []hongbao.UserID {
	base := mrand.Int64N(1<<61) + 1
	us := make([]hongbao.UserID, n)
	for i := range us {
		us[i] = hongbao.UserID(base + int64(i))
	}
	return us
}

// tries counts what openFinal retried.
type tries struct {
	Busy    int    // 503 answers
	Unknown int    // other 5xx answers and transport errors: outcome unknown
	Late    int    // refused signatures that reached the server after api.Window
	First   string // the first unknown-outcome answer
}

// openFinal opens until the answer is final, as a client would: 503 busy
// answers, other 5xx answers and transport errors are retried after a short
// sleep (opens are idempotent, so a retry after an unknown outcome answers
// already_opened if the first attempt took a share). It is safe in any
// goroutine. Like a router (router/forward.go), it signs again after a
// refusal of a signature that may have reached the server after its window:
// on a starved machine a request can wait that long between its signing and
// the server's reading it. A refusal sooner than that is final, and a bug.
func (h *harness) openFinal(user hongbao.UserID, id string) (reply, tries) {
	deadline := time.Now().Add(30 * time.Second)
	var tr tries
	for {
		signed := time.Now()
		r := h.open(user, id)
		switch {
		case r.IsProblem(http.StatusForbidden, "forbidden") && time.Since(signed) > api.Window:
			tr.Late++
			deadline = time.Now().Add(30 * time.Second) // the server answers: it is alive
		case r.Err == nil && r.Status < 500:
			return r, tr
		case r.Status == http.StatusServiceUnavailable:
			tr.Busy++
		default:
			tr.Unknown++
			if tr.First == "" {
				tr.First = r.String()
			}
		}
		// One client giving up means the stack is down: the others stop
		// too, so a dead database fails the test quickly.
		if h.gaveUp.Load() || time.Now().After(deadline) {
			h.gaveUp.Store(true)
			return r, tr
		}
		time.Sleep(time.Duration(5+mrand.IntN(20)) * time.Millisecond)
	}
}

// --- Invariants, read with the tests' own SQL -------------------------------

// checkInvariants asserts DESIGN.md's invariants 1 and 2 for packet id from
// the tables themselves, and returns the packet and its shares in opening
// order.
func checkInvariants(t testing.TB, db *sql.DB, id hongbao.PacketID) (*dbtest.Packet, []dbtest.Share) {
	t.Helper()
	p := dbtest.CheckPacket(t, db, id)
	return p, p.Details
}

// assertSameShares compares the shares the clients were told with the rows.
func assertSameShares(t *testing.T, id hongbao.PacketID, told, db map[hongbao.UserID]int64) {
	t.Helper()
	for u, amount := range told {
		if got, ok := db[u]; !ok {
			t.Errorf("packet %d: user %d was told %d fen but has no row", id, u, amount)
		} else if got != amount {
			t.Errorf("packet %d: user %d was told %d fen, the row says %d", id, u, amount, got)
		}
	}
	for u, amount := range db {
		if _, ok := told[u]; !ok {
			t.Errorf("packet %d: user %d has a row of %d fen nobody was told about", id, u, amount)
		}
	}
}

// rowsBySenders counts the rows of senders in every packet table of the
// days (of month, in the cluster's zone) of the given times, and in every
// idempotency table.
func rowsBySenders(t testing.TB, db *sql.DB, senders []hongbao.UserID, at ...time.Time) (packets, idem int) {
	t.Helper()
	if len(senders) == 0 {
		return 0, 0
	}
	loc := dbtest.Shanghai(t)
	seen := map[int]bool{}
	var days []int
	for _, tm := range at {
		if d := tm.In(loc).Day(); !seen[d] {
			seen[d] = true
			days = append(days, d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := strings.TrimSuffix(strings.Repeat("?,", len(senders)), ",")
	args := make([]any, len(senders))
	for i, s := range senders {
		args[i] = int64(s)
	}
	count := func(tables []string) int {
		total := 0
		for len(tables) > 0 {
			n := min(len(tables), 100)
			parts := make([]string, n)
			var qa []any
			for i, tb := range tables[:n] {
				parts[i] = fmt.Sprintf("SELECT COUNT(*) AS n FROM %s WHERE sender IN (%s)", tb, in)
				qa = append(qa, args...)
			}
			var c int
			if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(n), 0) FROM ("+strings.Join(parts, " UNION ALL ")+") x", qa...).Scan(&c); err != nil {
				t.Fatal(err)
			}
			total += c
			tables = tables[n:]
		}
		return total
	}
	idemTables := dbtest.TablesLike(t, db, `db\_%`, `^t_idem$`)
	return count(dbtest.DayTables(t, db, days...)), count(idemTables)
}

// answers collects the final open answers of concurrent clients.
type answers struct {
	mu   sync.Mutex
	list []answer
}

type answer struct {
	User   hongbao.UserID
	Packet hongbao.PacketID
	R      reply
	Tries  tries
}

// won reports whether a gave the user a share: opened, or already_opened
// after an attempt whose outcome the client could not know.
func (a answer) won() bool {
	kind, err := clustertest.Classify(a.R)
	return err == nil && (kind == hongbao.Opened || (kind == hongbao.AlreadyOpened && a.Tries.Unknown > 0))
}

// summary logs the retries of a run: unknown outcomes are the server's 5xx
// answers under load, retried like a client would.
func (a *answers) summary(t testing.TB) {
	t.Helper()
	busy, unknown, late, first := 0, 0, 0, ""
	for _, x := range a.list {
		busy += x.Tries.Busy
		unknown += x.Tries.Unknown
		late += x.Tries.Late
		if first == "" {
			first = x.Tries.First
		}
	}
	t.Logf("%d answers; %d busy answers, %d unknown outcomes (5xx, transport) and %d signatures late at the server retried",
		len(a.list), busy, unknown, late)
	if unknown > 0 {
		t.Logf("first unknown outcome: %s", first)
	}
}

func (a *answers) add(x answer) {
	a.mu.Lock()
	a.list = append(a.list, x)
	a.mu.Unlock()
}

// told returns the shares the answers gave (see answer.won), by packet and
// user. It reports answers that are not final, or that say already_opened
// to a user's first open, and logs the retries.
func (a *answers) told(t testing.TB) map[hongbao.PacketID]map[hongbao.UserID]int64 {
	t.Helper()
	told := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	var bad firstErrors
	for _, x := range a.list {
		kind, err := clustertest.Classify(x.R)
		switch {
		case err != nil:
			bad.add("packet %d user %d: %v", x.Packet, x.User, err)
		case x.won():
			if told[x.Packet] == nil {
				told[x.Packet] = map[hongbao.UserID]int64{}
			}
			told[x.Packet][x.User] = x.R.Amount()
		case kind == hongbao.AlreadyOpened:
			bad.add("packet %d user %d: first open answered %v", x.Packet, x.User, x.R)
		}
	}
	bad.report(t, "bad answers")
	a.summary(t)
	return told
}

// open opens packet id as user until the answer is final (openFinal) and
// adds the answer.
func (a *answers) open(h *harness, user hongbao.UserID, id hongbao.PacketID) {
	r, tr := h.openFinal(user, id.String())
	a.add(answer{User: user, Packet: id, R: r, Tries: tr})
}

// openAtOnce opens packet id once for each of users (a user may be listed
// more than once), all clients starting at the same moment, and returns
// their final answers.
func (h *harness) openAtOnce(id hongbao.PacketID, users []hongbao.UserID) *answers {
	got := &answers{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			<-start
			got.open(h, u, id)
		})
	}
	close(start)
	wg.Wait()
	return got
}

// firstErrors collects failures of many clients and reports how many there
// were with the first few, instead of one line per client.
type firstErrors struct {
	n     int
	first []string
}

func (e *firstErrors) add(format string, args ...any) {
	e.n++
	if len(e.first) < 5 {
		e.first = append(e.first, fmt.Sprintf(format, args...))
	}
}

func (e *firstErrors) report(t testing.TB, what string) {
	t.Helper()
	if e.n > 0 {
		t.Errorf("%d %s; first:\n\t%s", e.n, what, strings.Join(e.first, "\n\t"))
	}
}
