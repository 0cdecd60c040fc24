package router_test

// The cluster harness runs the real binaries: hbctl seeds a private
// topology database, four hbserver processes (two SETs of two servers) and
// one hbrouter run as child processes against the test MariaDB and
// memcached instances of `make test`, and the tests talk HTTP to the router
// like any client. The invariants are checked with the harness's own SQL,
// straight from each SET's MySQL.
//
// The cluster is started once, by the first test that needs it, and torn
// down by TestMain.

import (
	"bufio"
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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
)

var (
	clusterOnce sync.Once
	theCluster  *cluster // set as soon as startup begins, so TestMain can stop what started
	clusterUp   bool
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theCluster != nil {
		theCluster.stop()
	}
	os.Exit(code)
}

// getCluster returns the shared cluster, starting it on first use. If the
// start failed (in an earlier test, which reported why), it fails t.
func getCluster(t *testing.T) *cluster {
	t.Helper()
	clusterOnce.Do(func() {
		theCluster = &cluster{procs: map[string]*proc{}, dbs: map[string]*sql.DB{}}
		theCluster.start(t)
		clusterUp = true
	})
	if !clusterUp {
		t.Fatal("the test cluster did not start (see the first test's failure)")
	}
	t.Cleanup(func() {
		if t.Failed() {
			theCluster.dumpLogs(t)
		}
	})
	return theCluster
}

// cluster is two SETs of two hbserver processes each and one hbrouter.
type cluster struct {
	dir            string
	bin            string
	config         string
	secret         string
	internalSecret string
	metaName       string
	metaDSN        string
	walletName     string
	walletDSN      string
	loc            *time.Location

	setNames []string            // [SET a, SET b], in config order
	servers  map[string][]string // SET -> server addresses
	dsns     map[string]string   // SET -> MySQL DSN
	router   string              // router address

	mu    sync.Mutex
	procs map[string]*proc // by name: "router", or a server address

	meta   *sql.DB
	wallet *store.Wallet
	dbs    map[string]*sql.DB // SET -> pool on its MySQL
	signer *hongbao.Signer
	http   *http.Client
	tokens sync.Map // hongbao.UserID -> string
}

// proc is one child process.
type proc struct {
	name string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freshUser returns a user ID no other test (or run) uses.
func freshUser() hongbao.UserID { return hongbao.UserID(mrand.Int64N(1<<62) + 1) }

func (c *cluster) start(t *testing.T) {
	t.Helper()
	began := time.Now()
	var err error
	if c.loc, err = time.LoadLocation("Asia/Shanghai"); err != nil {
		t.Fatal(err)
	}
	c.dir, err = os.MkdirTemp("", "hbcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c.bin = filepath.Join(c.dir, "bin")
	c.build(t)

	suffix := randHex(4)
	c.setNames = []string{"a" + suffix, "b" + suffix}
	c.secret = "cluster-user-secret-" + randHex(8)
	c.internalSecret = "cluster-internal-secret-" + randHex(8)
	c.dsns = map[string]string{c.setNames[0]: storetest.DSN(t, "a"), c.setNames[1]: storetest.DSN(t, "b")}
	mcs := map[string]string{c.setNames[0]: storetest.Memcached(t, "a"), c.setNames[1]: storetest.Memcached(t, "b")}
	c.servers = map[string][]string{}
	for _, s := range c.setNames {
		for range 2 {
			c.servers[s] = append(c.servers[s], fmt.Sprintf("127.0.0.1:%d", storetest.FreePort(t)))
		}
	}
	c.router = fmt.Sprintf("127.0.0.1:%d", storetest.FreePort(t))
	mc, err := mysql.ParseDSN(storetest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	c.metaName = "hb_meta_" + suffix
	mc.DBName = c.metaName
	c.metaDSN = mc.FormatDSN()
	c.walletName = "hb_wallet_" + suffix
	mc.DBName = c.walletName
	c.walletDSN = mc.FormatDSN()
	c.writeConfig(t, mcs)

	out := c.hbctl(t, "topology", "init", "-config", c.config)
	t.Logf("hbctl topology init:\n%s", out)

	c.meta = c.openDB(t, c.metaDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.wallet, err = store.OpenWallet(ctx, c.walletDSN, 8, time.Now); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.setNames {
		c.dbs[s] = c.openDB(t, c.dsns[s])
	}
	for _, s := range c.setNames {
		for _, addr := range c.servers[s] {
			c.startServer(t, s, addr)
		}
	}
	c.startProc(t, "router", filepath.Join(c.bin, "hbrouter"), "-config", c.config, "-listen", c.router)
	for _, s := range c.setNames {
		for _, addr := range c.servers[s] {
			c.waitReady(t, addr)
		}
	}
	c.waitReady(t, c.router)

	c.signer = hongbao.NewSigner([]byte(c.secret))
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	c.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Logf("cluster up in %v: SETs %v, servers %v, router %s, meta %s, dir %s",
		time.Since(began).Round(time.Millisecond), c.setNames, c.servers, c.router, c.metaName, c.dir)
}

func (c *cluster) openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := store.OpenDB(dsn, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("ping %s: %v", dsn, err)
	}
	return db
}

// build compiles the three commands once, from the module root.
func (c *cluster) build(t *testing.T) {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "build", "-o", c.bin+string(filepath.Separator), "./cmd/...")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
}

func (c *cluster) writeConfig(t *testing.T, mcs map[string]string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "timezone: Asia/Shanghai\nsecret: %q\ninternal_secret: %q\ntoken_ttl: 24h\nlog_level: warn\n", c.secret, c.internalSecret)
	b.WriteString(`limits:
  max_total: 20000
  max_count: 100
  max_share: 20000
  expiry: 24h
  max_greeting: 200
queue:
  size: 1024
  batch: 32
  idle: 5s
  tx_timeout: 5s
  slot_cap: 2
cache:
  timeout: 200ms
  conns: 64
db_conns: 16
shutdown_grace: 5s
`)
	fmt.Fprintf(&b, "router:\n  listen: %q\nmeta_dsn: %q\nwallet_dsn: %q\nsets:\n", c.router, c.metaDSN, c.walletDSN)
	for _, s := range c.setNames {
		fmt.Fprintf(&b, "  - name: %q\n    servers: [%s]\n    mysql_dsn: %q\n    memcached: [%q]\n",
			s, quoteList(c.servers[s]), c.dsns[s], mcs[s])
	}
	c.config = filepath.Join(c.dir, "cluster.yaml")
	if err := os.WriteFile(c.config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// hbctl runs hbctl and returns its output; a failure fails t.
func (c *cluster) hbctl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "hbctl"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("hbctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

func (c *cluster) startServer(t *testing.T, setName, addr string) {
	t.Helper()
	c.startProc(t, addr, filepath.Join(c.bin, "hbserver"), "-config", c.config, "-set", setName, "-listen", addr)
}

// startProc starts a child in its own process group, logging to a file in
// the cluster's directory (appended to across restarts).
func (c *cluster) startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(c.dir, strings.NewReplacer(":", "_", "/", "_").Replace(name)+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, args: args, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		fmt.Fprintf(f, "=== %s exited: %v\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		f.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group of p (its pgid is its pid).
func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// stopWithin sends SIGTERM and, after grace, SIGKILL; it waits for the exit.
func (p *proc) stopWithin(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// kill9 kills the server at addr with SIGKILL and waits until it is gone.
func (c *cluster) kill9(t *testing.T, addr string) {
	t.Helper()
	c.mu.Lock()
	p := c.procs[addr]
	c.mu.Unlock()
	if p == nil {
		t.Fatalf("no process %s", addr)
	}
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die after SIGKILL", addr)
	}
}

// restartServer starts the server at addr again, with its original
// arguments, and waits until it is ready.
func (c *cluster) restartServer(t *testing.T, addr string) {
	t.Helper()
	for _, s := range c.setNames {
		for _, a := range c.servers[s] {
			if a == addr {
				c.startServer(t, s, addr)
				c.waitReady(t, addr)
				return
			}
		}
	}
	t.Fatalf("no server %s", addr)
}

func (c *cluster) waitReady(t *testing.T, addr string) {
	t.Helper()
	c.mu.Lock()
	p := c.procs[addr]
	if addr == c.router {
		p = c.procs["router"]
	}
	c.mu.Unlock()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			t.Fatalf("%s exited before it was ready:\n%s", addr, tail(p.log, 40))
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 30s (last: %s)", addr, last)
}

// stop ends every child and removes what the cluster created outside its
// directory: the meta database and its SETs' fence rows.
func (c *cluster) stop() {
	c.mu.Lock()
	procs := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	if p := c.procs["router"]; p != nil {
		p.stopWithin(5 * time.Second)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stopWithin(8 * time.Second) }()
	}
	wg.Wait()
	for name, db := range c.dbs {
		_, _ = db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ?", name)
		db.Close()
	}
	if c.wallet != nil {
		c.wallet.Close()
	}
	if c.meta != nil {
		_, _ = c.meta.Exec("DROP DATABASE IF EXISTS `" + c.walletName + "`")
		_, _ = c.meta.Exec("DROP DATABASE IF EXISTS `" + c.metaName + "`")
		c.meta.Close()
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if c.dir != "" && os.Getenv("HB_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(c.dir)
	}
}

// dumpLogs prints the end of every process log.
func (c *cluster) dumpLogs(t *testing.T) {
	c.mu.Lock()
	var names []string
	for n := range c.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	procs := make([]*proc, len(names))
	for i, n := range names {
		procs[i] = c.procs[n]
	}
	c.mu.Unlock()
	for _, p := range procs {
		t.Logf("---- log of %s (%s), last lines:\n%s", p.name, p.log, tail(p.log, 40))
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// --- HTTP client --------------------------------------------------------------

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

func (r reply) str(k string) string {
	s, _ := r.JSON[k].(string)
	return s
}

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

func (r reply) id(t testing.TB) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(r.str("id"))
	if err != nil {
		t.Fatalf("answer %v: id %q: %v", r, r.str("id"), err)
	}
	return id
}

// topUp credits user's wallet with amount fen (an operator top-up, as
// hbctl wallet credit does), so the user can send packets.
func (c *cluster) topUp(t testing.TB, user hongbao.UserID, amount int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := c.wallet.Apply(ctx, store.Entry{Key: "topup:cluster-test-" + randHex(8), User: user, Amount: amount,
		Kind: store.KindTopUp}); err != nil {
		t.Fatalf("top up %s: %v", user, err)
	}
}

// richUser returns a fresh user with enough money for any test.
func (c *cluster) richUser(t testing.TB) hongbao.UserID {
	t.Helper()
	u := freshUser()
	c.topUp(t, u, 100_000_000)
	return u
}

// balance reads user's wallet balance.
func (c *cluster) balance(t testing.TB, user hongbao.UserID) int64 {
	t.Helper()
	b, err := c.wallet.Balance(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// token returns a bearer token of user.
func (c *cluster) token(user hongbao.UserID) string {
	if tok, ok := c.tokens.Load(user); ok {
		return tok.(string)
	}
	tok := c.signer.Sign(user, time.Now().Add(2*time.Hour))
	c.tokens.Store(user, tok)
	return tok
}

// doReq sends req and reads the answer.
func (c *cluster) doReq(req *http.Request) reply {
	resp, err := c.http.Do(req)
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

// newReq builds a request to addr (host:port) as user (Bearer token; 0:
// none).
func (c *cluster) newReq(method, addr, path string, user hongbao.UserID, body []byte, hdr map[string]string) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		panic(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != 0 {
		req.Header.Set("Authorization", "Bearer "+c.token(user))
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// do sends a request through the router.
func (c *cluster) do(method, path string, user hongbao.UserID, body []byte, hdr map[string]string) reply {
	return c.doReq(c.newReq(method, c.router, path, user, body, hdr))
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
func (c *cluster) send(user hongbao.UserID, b sendBody, key string) reply {
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
			id, err := hongbao.ParsePacketID(r.str("id"))
			if err != nil {
				t.Errorf("send answered id %q: %v", r.str("id"), err)
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

func (c *cluster) open(user hongbao.UserID, id hongbao.PacketID) reply {
	return c.do(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil, nil)
}

func (c *cluster) detail(user hongbao.UserID, id hongbao.PacketID) reply {
	return c.do(http.MethodGet, "/v1/packets/"+id.String(), user, nil, nil)
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
	R       reply
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

// classify returns "opened", "already_opened", "sold_out" or an error for
// anything that is not a final answer of open.
func classify(r reply) (string, error) {
	switch {
	case r.Status == http.StatusOK && (r.str("status") == hongbao.Opened || r.str("status") == hongbao.AlreadyOpened):
		if r.amount() < 1 {
			return "", fmt.Errorf("not a final open answer (amount): %v", r)
		}
		return r.str("status"), nil
	case r.isProblem(http.StatusConflict, "sold_out"):
		return "sold_out", nil
	}
	return "", fmt.Errorf("not a final open answer: %v", r)
}

// --- The truth, read with SQL from each SET's MySQL ---------------------------

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

// dbPacket is a packet as one SET's MySQL holds it.
type dbPacket struct {
	ID                     hongbao.PacketID
	Set                    string
	Sender                 hongbao.UserID
	Type                   string
	Total, RemainingAmount int64
	Count, RemainingCount  int
	Funding                hongbao.Funding
	Shares                 map[hongbao.UserID]int64
	Order                  []hongbao.UserID // by seq
}

func isMissingTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049)
}

// readPacket reads packet id from SET setName's MySQL; nil when it is not
// there.
func (c *cluster) readPacket(t testing.TB, setName string, id hongbao.PacketID) *dbPacket {
	t.Helper()
	db := c.dbs[setName]
	tb := id.Table(c.loc)
	p := &dbPacket{ID: id, Set: setName, Shares: map[hongbao.UserID]int64{}}
	err := db.QueryRow("SELECT sender, type, total, count, remaining_amount, remaining_count, funding FROM "+tb.Packets()+" WHERE id = ?", id).
		Scan(&p.Sender, &p.Type, &p.Total, &p.Count, &p.RemainingAmount, &p.RemainingCount, &p.Funding)
	if errors.Is(err, sql.ErrNoRows) || isMissingTable(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("packet %s in %s of SET %s: %v", id, tb.Packets(), setName, err)
	}
	rows, err := db.Query("SELECT user_id, amount, seq FROM "+tb.Details()+" WHERE packet_id = ? ORDER BY seq", id)
	if err != nil && !isMissingTable(err) {
		t.Fatalf("details of %s on SET %s: %v", id, setName, err)
	}
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var u hongbao.UserID
			var amount int64
			var seq int
			if err := rows.Scan(&u, &amount, &seq); err != nil {
				t.Fatal(err)
			}
			if _, dup := p.Shares[u]; dup {
				t.Errorf("packet %s on SET %s: user %s has two shares", id, setName, u)
			}
			if amount < 1 {
				t.Errorf("packet %s on SET %s: user %s has a share of %d fen", id, setName, u, amount)
			}
			if seq != len(p.Order)+1 {
				t.Errorf("packet %s on SET %s: share %d has seq %d", id, setName, len(p.Order)+1, seq)
			}
			p.Shares[u] = amount
			p.Order = append(p.Order, u)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// checkPacket finds packet id in the SETs' MySQL, asserts it is held by
// exactly the SET topo says owns its bucket, asserts DESIGN.md's invariants
// 1 and 2 on its rows, and returns them (nil if it is nowhere).
func (c *cluster) checkPacket(t testing.TB, topo *set.Topology, id hongbao.PacketID) *dbPacket {
	t.Helper()
	owner := topo.Owner(id.Bucket()).Name
	var found *dbPacket
	for _, s := range c.setNames {
		p := c.readPacket(t, s, id)
		if p == nil {
			continue
		}
		if s != owner {
			t.Errorf("packet %s (bucket %d) has rows on SET %s, but SET %s owns the bucket", id, id.Bucket(), s, owner)
			continue
		}
		found = p
	}
	if found == nil {
		t.Errorf("packet %s (bucket %d) is not in the MySQL of its owner SET %s", id, id.Bucket(), owner)
		return nil
	}
	p := found
	var sum int64
	for _, a := range p.Shares {
		sum += a
	}
	if sum+p.RemainingAmount != p.Total {
		t.Errorf("packet %s: sum(detail) %d + remaining_amount %d != total %d", id, sum, p.RemainingAmount, p.Total)
	}
	if len(p.Order)+p.RemainingCount != p.Count {
		t.Errorf("packet %s: count(detail) %d + remaining_count %d != count %d", id, len(p.Order), p.RemainingCount, p.Count)
	}
	if len(p.Shares) != len(p.Order) {
		t.Errorf("packet %s: %d detail rows for %d users", id, len(p.Order), len(p.Shares))
	}
	if p.RemainingCount < 0 || p.RemainingAmount < int64(p.RemainingCount) || (p.RemainingCount == 0 && p.RemainingAmount != 0) {
		t.Errorf("packet %s: %d fen left for %d shares", id, p.RemainingAmount, p.RemainingCount)
	}
	// Every share has its wallet credit in an outbox (no settler runs in
	// this cluster, so none is delivered): exactly one, of the same amount.
	credits := map[hongbao.UserID][]int64{}
	for _, s := range c.setNames {
		rows, err := c.dbs[s].Query("SELECT user_id, amount FROM hb_set.outbox WHERE packet_id = ? AND kind = 'open'", id)
		if isMissingTable(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var u hongbao.UserID
			var amount int64
			if err := rows.Scan(&u, &amount); err != nil {
				t.Fatal(err)
			}
			credits[u] = append(credits[u], amount)
		}
		rows.Close()
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

// checkAnswers compares the final answers clients got for packet p with its
// rows: every answer is final, every opened/already_opened amount is the
// user's share in MySQL, no sold_out went to a user holding a share, and no
// user was told opened twice. It returns the number of "opened" answers.
func checkAnswers(t testing.TB, p *dbPacket, answers []openAnswer) (opened int) {
	t.Helper()
	openedBy := map[hongbao.UserID]int{}
	for _, a := range answers {
		kind, err := classify(a.R)
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
				t.Errorf("packet %s: user %s was told %s %d fen, but has no share in MySQL", a.Packet, a.User, kind, a.R.amount())
			} else if share != a.R.amount() {
				t.Errorf("packet %s: user %s was told %s %d fen, MySQL says %d", a.Packet, a.User, kind, a.R.amount(), share)
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
		key := "k-" + randHex(8)
		if b := hongbao.BucketFor(sender, []byte(key)); ok(b) {
			return key, b
		}
	}
	t.Fatal("no idempotency key found for the wanted buckets")
	return "", 0
}
