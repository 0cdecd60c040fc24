package set_test

// The harness runs the real SET server stack (store on the test MariaDB,
// cache on a real memcached, queues, HTTP handler) behind httptest, and
// checks the invariants of DESIGN.md with its own SQL, independently of the
// store's code.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
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

// uniqueName returns a name no other test (or run) uses.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// freshUser returns a user ID no other test uses: the tests that look rows
// up by user across all tables rely on it.
func freshUser() hongbao.UserID { return hongbao.UserID(mrand.Int64N(1<<62) + 1) }

func shanghai(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// newHarness builds the real stack behind httptest. Cleanup closes the HTTP
// server (waiting for requests in flight), then drains the queues.
func newHarness(t testing.TB, opts harnessOpts) *harness {
	t.Helper()
	db := storetest.DB(t, "a", 64)
	if opts.Set == "" {
		opts.Set = uniqueName("t")
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = schema.AllBuckets()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := schema.Own(ctx, db, opts.Set, 1, buckets); err != nil {
		t.Fatal(err)
	}
	setName := opts.Set
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", setName)
	})
	if opts.Memcached == "" {
		opts.Memcached = storetest.Memcached(t, "a")
	}
	if opts.Limits == (hongbao.Limits{}) {
		opts.Limits = hongbao.DefaultLimits()
	}
	loc := shanghai(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	srv := set.NewServer(set.Deps{
		Store:  store.New(db, opts.Set, loc, time.Now, mrand.Int64N),
		Cache:  store.NewCache([]string{opts.Memcached}, 500*time.Millisecond, 256, log),
		Auth:   api.NewInternal(testSecret, time.Now),
		Limits: opts.Limits,
		Queue:  queue.Config{Size: 1024, Batch: 32, Idle: 2 * time.Second, TxTimeout: 5 * time.Second, SlotCap: 2},
		Loc:    loc,
		Now:    time.Now,
		Log:    log,
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
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &harness{
		t: t, db: db, set: opts.Set, loc: loc, server: srv, http: hs, url: hs.URL,
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		auth:   api.NewInternal(testSecret, time.Now),
	}
}

// reply is an HTTP answer with its body decoded as a JSON object (numbers
// kept exact).
type reply struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
	Err    error // transport error; Status is 0
}

func (r reply) String() string {
	if r.Err != nil {
		return "transport error: " + r.Err.Error()
	}
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Raw))
}

// str returns a string field ("" when absent or not a string).
func (r reply) str(k string) string {
	s, _ := r.JSON[k].(string)
	return s
}

// num returns an integer field; ok is false when absent or not an integer.
func (r reply) num(k string) (int64, bool) {
	n, ok := r.JSON[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// amount is the "amount" of an open answer, or -1.
func (r reply) amount() int64 {
	if n, ok := r.num("amount"); ok {
		return n
	}
	return -1
}

// isProblem reports whether r is problem JSON with status and code.
func (r reply) isProblem(status int, code string) bool {
	st, _ := r.num("status")
	return r.Status == status && strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") &&
		r.str("code") == code && st == int64(status)
}

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
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, h.url+rq.path, body)
	if err != nil {
		return reply{Err: err}
	}
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
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
	resp, err := h.client.Do(req)
	if err != nil {
		return reply{Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{Err: err}
	}
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&r.JSON) // non-JSON answers keep JSON nil
	return r
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
	id, err := hongbao.ParsePacketID(r.str("id"))
	if err != nil {
		t.Fatalf("send answered id %q: %v", r.str("id"), err)
	}
	return id
}

// tries counts what openFinal retried.
type tries struct {
	Busy    int    // 503 answers
	Unknown int    // other 5xx answers and transport errors: outcome unknown
	First   string // the first unknown-outcome answer
}

// openFinal opens until the answer is final, as a client would: 503 busy
// answers, other 5xx answers and transport errors are retried after a short
// sleep (opens are idempotent, so a retry after an unknown outcome answers
// already_opened if the first attempt took a share). It is safe in any
// goroutine.
func (h *harness) openFinal(user hongbao.UserID, id string) (reply, tries) {
	deadline := time.Now().Add(30 * time.Second)
	var tr tries
	for {
		r := h.open(user, id)
		switch {
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

// --- Invariants, read with the harness's own SQL -------------------------

// Independent re-statement of DESIGN.md's ID layout: 41 bits of ms since
// 2024-01-01Z | 10 bits bucket | 12 bits sequence; tables db_xx.t_y_dd.
const idEpochMs = 1704067200000

func tablesOf(t testing.TB, id hongbao.PacketID) (packets, details string) {
	t.Helper()
	v := int64(id)
	bucket := (v >> 12) & (1<<10 - 1)
	day := time.UnixMilli(v>>22 + idEpochMs).In(shanghai(t)).Day()
	packets = fmt.Sprintf("db_%02d.t_%d_%02d", bucket/10, bucket%10, day)
	if want := id.Table(shanghai(t)).Packets(); want != packets {
		t.Errorf("packet %d: DESIGN.md layout names table %s, hongbao.PacketID.Table says %s", id, packets, want)
	}
	return packets, packets + "_detail"
}

// share is one detail row.
type share struct {
	User   hongbao.UserID
	Amount int64
	Seq    int
}

// packetRow is the packet row as stored.
type packetRow struct {
	Sender                          hongbao.UserID
	Total, RemainingAmount          int64
	Count, RemainingCount           int
	Type                            string
	CreatedAt, ExpiresAt            time.Time
	RowsInDetail, DetailSum, MinAmt int64
}

// sqlCtx bounds the harness's own SQL, so a stuck database fails the test
// instead of hanging it.
func sqlCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkInvariants asserts DESIGN.md's invariants 1 and 2 for packet id from
// the tables themselves, and returns the packet row and its shares in
// opening order.
func checkInvariants(t testing.TB, db *sql.DB, id hongbao.PacketID) (packetRow, []share) {
	t.Helper()
	pt, dt := tablesOf(t, id)
	ctx := sqlCtx(t)
	var p packetRow
	err := db.QueryRowContext(ctx, "SELECT sender, type, total, count, remaining_amount, remaining_count, created_at, expires_at FROM "+pt+" WHERE id = ?", id).
		Scan(&p.Sender, &p.Type, &p.Total, &p.Count, &p.RemainingAmount, &p.RemainingCount, &p.CreatedAt, &p.ExpiresAt)
	if err != nil {
		t.Fatalf("packet %d in %s: %v", id, pt, err)
	}
	err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount), 0), COALESCE(MIN(amount), 0) FROM "+dt+" WHERE packet_id = ?", id).
		Scan(&p.RowsInDetail, &p.DetailSum, &p.MinAmt)
	if err != nil {
		t.Fatalf("details of %d: %v", id, err)
	}
	if p.DetailSum+p.RemainingAmount != p.Total {
		t.Errorf("packet %d: sum(amount) %d + remaining_amount %d != total %d", id, p.DetailSum, p.RemainingAmount, p.Total)
	}
	if p.RowsInDetail+int64(p.RemainingCount) != int64(p.Count) {
		t.Errorf("packet %d: count(*) %d + remaining_count %d != count %d", id, p.RowsInDetail, p.RemainingCount, p.Count)
	}
	if p.RowsInDetail > 0 && p.MinAmt < 1 {
		t.Errorf("packet %d: a share of %d fen", id, p.MinAmt)
	}
	if p.RemainingCount < 0 || p.RemainingAmount < int64(p.RemainingCount) {
		t.Errorf("packet %d: remaining %d fen for %d shares", id, p.RemainingAmount, p.RemainingCount)
	}
	if p.RemainingCount == 0 && p.RemainingAmount != 0 {
		t.Errorf("packet %d: sold out with %d fen left", id, p.RemainingAmount)
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id, COUNT(*) FROM "+dt+" WHERE packet_id = ? GROUP BY user_id HAVING COUNT(*) > 1", id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u, n int64
		if err := rows.Scan(&u, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("packet %d: user %d has %d shares", id, u, n)
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, "SELECT user_id, amount, seq FROM "+dt+" WHERE packet_id = ? ORDER BY seq", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var shares []share
	for rows.Next() {
		var s share
		if err := rows.Scan(&s.User, &s.Amount, &s.Seq); err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i, s := range shares {
		if s.Seq != i+1 {
			t.Errorf("packet %d: share %d has seq %d", id, i+1, s.Seq)
		}
	}
	return p, shares
}

// sharesByUser indexes shares.
func sharesByUser(shares []share) map[hongbao.UserID]int64 {
	m := make(map[hongbao.UserID]int64, len(shares))
	for _, s := range shares {
		m[s.User] = s.Amount
	}
	return m
}

// dayTables lists the existing db_xx.t_y_dd packet tables of the given days
// of month.
func dayTables(t testing.TB, db *sql.DB, days ...int) []string {
	t.Helper()
	ctx := sqlCtx(t)
	var names []string
	for _, d := range days {
		rows, err := db.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
			WHERE table_schema LIKE 'db\_%' AND table_name LIKE ?`, fmt.Sprintf("t\\_%%\\_%02d", d))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s, n string
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			names = append(names, s+"."+n)
		}
		rows.Close()
	}
	return names
}

// rowsBySenders counts the rows of senders in every packet table of the
// days (of month, in the cluster's zone) of the given times, and in every
// idempotency table.
func rowsBySenders(t testing.TB, db *sql.DB, senders []hongbao.UserID, at ...time.Time) (packets, idem int) {
	t.Helper()
	if len(senders) == 0 {
		return 0, 0
	}
	loc := shanghai(t)
	seen := map[int]bool{}
	var days []int
	for _, tm := range at {
		if d := tm.In(loc).Day(); !seen[d] {
			seen[d] = true
			days = append(days, d)
		}
	}
	ctx := sqlCtx(t)
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
	var idemTables []string
	rows, err := db.QueryContext(ctx, `SELECT table_schema FROM information_schema.tables WHERE table_schema LIKE 'db\_%' AND table_name = 't_idem'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		idemTables = append(idemTables, s+".t_idem")
	}
	rows.Close()
	return count(dayTables(t, db, days...)), count(idemTables)
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
	kind, err := classify(a.R)
	return err == nil && (kind == hongbao.Opened || (kind == hongbao.AlreadyOpened && a.Tries.Unknown > 0))
}

// summary logs the retries of a run: unknown outcomes are the server's 5xx
// answers under load, retried like a client would.
func (a *answers) summary(t testing.TB) {
	t.Helper()
	busy, unknown, first := 0, 0, ""
	for _, x := range a.list {
		busy += x.Tries.Busy
		unknown += x.Tries.Unknown
		if first == "" {
			first = x.Tries.First
		}
	}
	t.Logf("%d answers; %d busy answers and %d unknown outcomes (5xx, transport) retried", len(a.list), busy, unknown)
	if unknown > 0 {
		t.Logf("first unknown outcome: %s", first)
	}
}

func (a *answers) add(x answer) {
	a.mu.Lock()
	a.list = append(a.list, x)
	a.mu.Unlock()
}

// errNotFinal marks an answer that is not one of open's final answers.
var errNotFinal = errors.New("not a final open answer")

// classify returns "opened", "already_opened", "sold_out" (409 problem) or
// an error describing anything else.
func classify(r reply) (string, error) {
	switch {
	case r.Status == http.StatusOK && (r.str("status") == hongbao.Opened || r.str("status") == hongbao.AlreadyOpened):
		if r.amount() < 1 {
			return "", fmt.Errorf("%w: %v", errNotFinal, r)
		}
		return r.str("status"), nil
	case r.isProblem(http.StatusConflict, "sold_out"):
		return "sold_out", nil
	}
	return "", fmt.Errorf("%w: %v", errNotFinal, r)
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
