package set

// The internal tests (package set) of the open path build their own small
// stack instead of the external tests' harness (harness_test.go), so they
// can look inside the server (s.srv.known, s.srv.memo, its pool) where an
// answer alone cannot tell whether MySQL or memcached was asked.

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
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// stackSecret is the router -> server secret of every stack.
var stackSecret = []byte("known-test-internal-secret-0123456789")

// stackOpts tunes newStack; the zero value is the usual setup.
type stackOpts struct {
	set   string           // the SET, owned by the caller; "": a fresh one owned here
	mc    string           // memcached; "": test SET a's
	memo  int              // SoldOutMemo (and so the known bound); 0: 10000
	conns int              // the server's own MySQL pool; 0: 4
	now   func() time.Time // the server's and its store's clock; nil: time.Now
}

// stack is one server of the real stack (store on test SET a's MariaDB,
// cache on a memcached, queues, HTTP handler behind httptest), with a MySQL
// pool of its own that a test can exhaust.
type stack struct {
	db     *sql.DB // the tests' own SQL
	pool   *sql.DB // the server's pool, of conns connections
	conns  int
	set    string
	srv    *Server
	url    string
	client *http.Client
	auth   *api.Internal
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	db := dbtest.DB(t, "a", 16)
	if o.set == "" {
		o.set = dbtest.UniqueName("k")
		dbtest.Own(t, db, o.set, fence.AllBuckets())
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
		Auth:   api.NewInternal(stackSecret, time.Now),
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
	return &stack{db: db, pool: pool, conns: o.conns, set: o.set, srv: srv, url: hs.URL,
		client: &http.Client{Transport: tr, Timeout: 3 * time.Second}, auth: api.NewInternal(stackSecret, time.Now)}
}

// reply is an HTTP answer with its JSON body.
type reply = clustertest.Reply

func (s *stack) do(method, path string, user hongbao.UserID, body []byte) reply {
	req, err := clustertest.NewRequest(method, s.url+path, body, nil)
	if err != nil {
		return reply{Err: err}
	}
	s.auth.Sign(req, user)
	return clustertest.Do(s.client, req)
}

func (s *stack) open(user hongbao.UserID, id hongbao.PacketID) reply {
	return s.do(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil)
}

func (s *stack) grab(user hongbao.UserID, id hongbao.PacketID) reply {
	return s.do(http.MethodPost, "/v1/packets/"+id.String()+"/grab", user, nil)
}

// send creates a random packet through the API and returns its ID.
func (s *stack) send(t *testing.T, total int64, count int) hongbao.PacketID {
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

// openUntil opens id for user on s until the answer is not busy (the
// queue or the slot cap refusing, which applies nothing), and returns it
// with the busy answers it retried. Any other failure is returned: nothing
// here should fail.
func openUntil(s *stack, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, int, error) {
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

// checkOpened asserts r is 200 with status and amount (amount 0: any share
// of at least 1 fen) and returns the amount.
func checkOpened(t *testing.T, what string, r reply, status string, amount int64) int64 {
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

// checkGrabbed asserts r is grab's exact answer: 200 {"can_open":canOpen} plus
// the reason when it cannot.
func checkGrabbed(t *testing.T, what string, r reply, canOpen bool, reason string) {
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
func (s *stack) knowsTruth(t *testing.T, what string, id hongbao.PacketID) *dbtest.Packet {
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
func (s *stack) exhaust(t *testing.T) (waits int64, release func()) {
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

// memcachedOps is how many commands a memcached has served (gets, sets, cas,
// deletes, touches, increments), from its stats.
func memcachedOps(t *testing.T, addr string) int64 {
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
func (s *stack) quiet(t *testing.T, id hongbao.PacketID, mc string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.srv.queue.Live(id) {
		if time.Now().After(deadline) {
			t.Fatalf("packet %d's worker still live", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	last := memcachedOps(t, mc)
	for {
		time.Sleep(150 * time.Millisecond)
		n := memcachedOps(t, mc)
		if n == last {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached %s never quiet", mc)
		}
		last = n
	}
}

// freshUsers returns n distinct fresh users.
func freshUsers(n int) []hongbao.UserID {
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

// checkShares asserts that the shares told are exactly MySQL's.
func checkShares(t *testing.T, what string, told, mysql map[hongbao.UserID]int64) {
	t.Helper()
	if !maps.Equal(told, mysql) {
		t.Errorf("%s: answers told shares %v; MySQL holds %v", what, told, mysql)
	}
}
