package main

// kill -9 of a SET server while opens are in flight, then a restart: every
// open answered "opened" is in MySQL with the amount the client was told
// (invariant 3), and the packets keep invariants 1 and 2.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
)

const crashInternalSecret = "crash-test-internal-secret-0123456789"

// server is one run of the hbserver binary.
type server struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer(t *testing.T, bin, cfg, set, addr, logPath string) *server {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfg, "-set", set, "-listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	t.Cleanup(s.kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("hbserver exited before it was ready (%v):\n%s", s.cmd.ProcessState, out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("hbserver not ready on %s:\n%s", addr, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server's process group (only the server is in
// it) and waits for it.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

type openAnswer struct {
	status int
	kind   string // opened, already_opened, sold_out, or "" (not final)
	amount int64
	err    error
}

type pair struct {
	packet hongbao.PacketID
	user   hongbao.UserID
}

func TestKill9WhileOpening(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hbserver")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	db := storetest.DB(t, "a", 16)
	nameBytes := make([]byte, 6)
	_, _ = rand.Read(nameBytes)
	setName := "crash" + hex.EncodeToString(nameBytes)
	if err := schema.Own(t.Context(), db, setName, 1, schema.AllBuckets()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", setName)
	})

	addr := fmt.Sprintf("127.0.0.1:%d", storetest.FreePort(t))
	// Senders are fresh users, so one wallet database serves every run.
	walletDSN := storetest.DSN(t, "a") + "hb_wallet_test"
	wallet, err := store.OpenWallet(t.Context(), walletDSN, 4, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wallet.Close() })
	cfg := filepath.Join(dir, "hb.yaml")
	yaml := fmt.Sprintf(`timezone: Asia/Shanghai
secret: crash-test-user-secret-0123456789
internal_secret: %s
limits:
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
db_conns: 32
shutdown_grace: 5s
log_level: warn
wallet_dsn: %q
sets:
  - name: %s
    servers: [%s]
    mysql_dsn: %q
    memcached: [%s]
`, crashInternalSecret, walletDSN, setName, addr, storetest.DSN(t, "a"), storetest.Memcached(t, "a"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "hbserver.log")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("hbserver log:\n%s", out)
		}
	})
	srv := startServer(t, bin, cfg, setName, addr, logPath)

	auth := api.NewInternal([]byte(crashInternalSecret), time.Now)
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 1024},
		Timeout:   20 * time.Second,
	}
	do := func(method, path string, user hongbao.UserID, body []byte) (int, map[string]any, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequest(method, "http://"+addr+path, rd)
		if err != nil {
			return 0, nil, err
		}
		auth.Sign(req, user)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, nil, err
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%d %q: %w", resp.StatusCode, raw, err)
		}
		return resp.StatusCode, m, nil
	}

	const packets, count, total = 20, 50, 5000
	ids := make([]hongbao.PacketID, packets)
	for i := range ids {
		typ := []string{"random", "fixed"}[i%2]
		body, _ := json.Marshal(map[string]any{"total": total, "count": count, "type": typ})
		sender := hongbao.UserID(mrand.Int64N(1<<62) + 1)
		if _, _, err := wallet.Apply(t.Context(), store.Entry{Key: fmt.Sprintf("topup:crash:%d", sender), User: sender,
			Amount: total, Kind: store.KindTopUp}); err != nil {
			t.Fatal(err)
		}
		st, m, err := do(http.MethodPost, "/v1/packets", sender, body)
		if err != nil || st != http.StatusCreated {
			t.Fatalf("send: %d %v %v", st, m, err)
		}
		id, err := hongbao.ParsePacketID(fmt.Sprint(m["id"]))
		if err != nil {
			t.Fatalf("send answered id %v: %v", m["id"], err)
		}
		ids[i] = id
	}

	open := func(u hongbao.UserID, id hongbao.PacketID) openAnswer {
		st, m, err := do(http.MethodPost, "/v1/packets/"+id.String()+"/open", u, nil)
		a := openAnswer{status: st, err: err}
		switch {
		case err != nil:
		case st == http.StatusOK && (m["status"] == hongbao.Opened || m["status"] == hongbao.AlreadyOpened):
			n, err := m["amount"].(json.Number).Int64()
			if err != nil || n < 1 {
				a.err = fmt.Errorf("bad amount in %v", m)
			}
			a.kind, a.amount = m["status"].(string), n
		case st == http.StatusConflict && m["code"] == "sold_out":
			a.kind = "sold_out"
		case st >= 500:
			// busy, or an outcome the client cannot know: retried.
			a.err = fmt.Errorf("%d %v", st, m)
		default:
			a.err = fmt.Errorf("unexpected answer %d %v", st, m)
		}
		return a
	}

	const users = 200
	base := mrand.Int64N(1<<61) + 1
	var (
		mu       sync.Mutex
		all      = map[pair][]openAnswer{} // every answer, in order
		answered atomic.Int64              // final answers
		retried  atomic.Int64
		gaveUp   atomic.Bool
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range users {
		u := hongbao.UserID(base + int64(i))
		wg.Go(func() {
			<-start
			for _, j := range mrand.Perm(packets) {
				id := ids[j]
				deadline := time.Now().Add(30 * time.Second)
				for {
					a := open(u, id)
					mu.Lock()
					all[pair{id, u}] = append(all[pair{id, u}], a)
					mu.Unlock()
					if a.err == nil && a.kind != "" {
						answered.Add(1)
						break
					}
					if a.err != nil {
						retried.Add(1)
					}
					if gaveUp.Load() {
						return
					}
					if time.Now().After(deadline) {
						// The server or MySQL is down: every client stops.
						gaveUp.Store(true)
						t.Errorf("packet %d user %d: no final answer: %v", id, u, a.err)
						return
					}
					time.Sleep(time.Duration(10+mrand.IntN(30)) * time.Millisecond)
				}
			}
		})
	}
	close(start)
	// Kill ~300 ms in, once opens are flowing (a loaded machine may need
	// longer to answer the first ones).
	time.Sleep(300 * time.Millisecond)
	for wait := time.Now().Add(10 * time.Second); answered.Load() < 20 && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	srv.kill()
	atKill := answered.Load()
	t.Logf("SIGKILL after %d of %d final answers", atKill, users*packets)
	if atKill == 0 || atKill >= users*packets {
		t.Errorf("the kill did not land mid-load (%d of %d answers)", atKill, users*packets)
	}
	srv = startServer(t, bin, cfg, setName, addr, logPath)
	wg.Wait()
	if gaveUp.Load() {
		t.FailNow()
	}
	t.Logf("%d answers after the restart; %d connection errors and 5xx answers retried", answered.Load()-atKill, retried.Load())
	srv.kill()

	// Every "opened" or "already_opened" the clients ever heard is in
	// MySQL with the amount they were told; sold_out means no share.
	rows := map[pair]int64{}
	for _, id := range ids {
		shares, remaining := crashInvariants(t, db, id)
		if remaining != 0 {
			t.Errorf("packet %d: %d shares left after %d openers", id, remaining, users)
		}
		for u, amount := range shares {
			rows[pair{id, u}] = amount
		}
	}
	openedAnswers := 0
	for k, as := range all {
		final := as[len(as)-1]
		for _, a := range as {
			if a.err != nil && a.status != 0 && a.status < 500 {
				t.Errorf("packet %d user %d: %v", k.packet, k.user, a.err)
			}
			switch a.kind {
			case hongbao.Opened, hongbao.AlreadyOpened:
				if a.kind == hongbao.Opened {
					openedAnswers++
				}
				if got, ok := rows[k]; !ok || got != a.amount {
					t.Errorf("packet %d user %d was told %s %d fen; MySQL has %d (row present %v)",
						k.packet, k.user, a.kind, a.amount, got, ok)
				}
			case "sold_out":
				if amount, ok := rows[k]; ok {
					t.Errorf("packet %d user %d was told sold_out but holds %d fen", k.packet, k.user, amount)
				}
			}
		}
		if _, ok := rows[k]; ok && final.kind != hongbao.Opened && final.kind != hongbao.AlreadyOpened {
			t.Errorf("packet %d user %d holds a share but was finally told %+v", k.packet, k.user, final)
		}
	}
	// Every sender was debited once, at send.
	for _, id := range ids {
		e, ok, err := wallet.Entry(t.Context(), store.SendKey(id))
		if err != nil || !ok || e.Amount != -total {
			t.Errorf("packet %d: send debit %+v (present %v, %v), want %d fen", id, e, ok, err, -total)
		}
	}
	// Each share's wallet credit was written in the open's transaction.
	credits := map[pair]int64{}
	for _, id := range ids {
		rs, err := db.QueryContext(t.Context(), "SELECT user_id, amount FROM hb_set.outbox WHERE packet_id = ? AND kind = 'open'", id)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var u hongbao.UserID
			var amount int64
			if err := rs.Scan(&u, &amount); err != nil {
				t.Fatal(err)
			}
			credits[pair{id, u}] = amount
		}
		rs.Close()
	}
	for k, amount := range rows {
		if c, ok := credits[k]; !ok || c != amount {
			t.Errorf("packet %d user %d: share of %d fen, outbox credit %d (present %v)", k.packet, k.user, amount, c, ok)
		}
	}
	if len(credits) != len(rows) {
		t.Errorf("%d outbox credits for %d shares", len(credits), len(rows))
	}
	if len(rows) != packets*count {
		t.Errorf("%d shares in MySQL, want %d", len(rows), packets*count)
	}
	t.Logf("%d opened answers, %d shares in MySQL", openedAnswers, len(rows))
}

// crashInvariants checks invariants 1 and 2 of packet id with SQL of its
// own (tables named from the ID layout of DESIGN.md) and returns the
// shares by user and the remaining count.
func crashInvariants(t *testing.T, db *sql.DB, id hongbao.PacketID) (map[hongbao.UserID]int64, int) {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	v := int64(id)
	bucket := (v >> 12) & 1023
	day := time.UnixMilli(v>>22 + 1704067200000).In(loc).Day()
	pt := fmt.Sprintf("db_%02d.t_%d_%02d", bucket/10, bucket%10, day)
	var total, remAmount int64
	var count, remCount int
	if err := db.QueryRowContext(t.Context(), "SELECT total, count, remaining_amount, remaining_count FROM "+pt+" WHERE id = ?", id).
		Scan(&total, &count, &remAmount, &remCount); err != nil {
		t.Fatalf("packet %d in %s: %v", id, pt, err)
	}
	rows, err := db.QueryContext(t.Context(), "SELECT user_id, amount FROM "+pt+"_detail WHERE packet_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	shares := map[hongbao.UserID]int64{}
	var sum int64
	n := 0
	for rows.Next() {
		var u hongbao.UserID
		var amount int64
		if err := rows.Scan(&u, &amount); err != nil {
			t.Fatal(err)
		}
		if _, dup := shares[u]; dup {
			t.Errorf("packet %d: user %d has two shares", id, u)
		}
		if amount < 1 {
			t.Errorf("packet %d: user %d has a share of %d fen", id, u, amount)
		}
		shares[u] = amount
		sum += amount
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if sum+remAmount != total || n+remCount != count {
		t.Errorf("packet %d: %d fen in %d shares + %d fen in %d left != %d fen in %d", id, sum, n, remAmount, remCount, total, count)
	}
	return shares, remCount
}
