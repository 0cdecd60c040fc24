package crash_test

// kill -9 of a SET server while opens are in flight, then a restart: every
// open answered "opened" is in MySQL with the amount the client was told
// (invariant 3), and the packets keep invariants 1 and 2.

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

const crashInternalSecret = "crash-test-internal-secret-0123456789"

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
	db := dbtest.DB(t, "a", 16)
	setName := dbtest.UniqueName("crash")
	dbtest.Own(t, db, setName, fence.AllBuckets())

	addr := clustertest.FreeAddr(t)
	// Senders are fresh users, so one wallet database serves every run.
	walletDSN := dbtest.DSN(t, "a") + "hb_wallet_test"
	wallet, err := wallet.Open(t.Context(), walletDSN, nil, 4, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wallet.Close() })
	cfg := filepath.Join(t.TempDir(), "hb.yaml")
	clustertest.WriteConfig(t, cfg, clustertest.Config{Secret: "crash-test-user-secret-0123456789", InternalSecret: crashInternalSecret,
		DBConns: 32, WalletDSN: walletDSN,
		Sets: []clustertest.Set{{Name: setName, Addrs: []string{addr}, DSN: dbtest.DSN(t, "a"), Memcached: dbtest.Memcached(t, "a")}}})
	srv := clustertest.StartProcess(t, &clustertest.Process{Kind: "server", Name: setName, Bin: clustertest.Binary(t, "hbserver"),
		Args: []string{"-config", cfg, "-set", setName, "-listen", addr, "-admin", "off"}, Ready: addr})

	auth := api.NewInternal([]byte(crashInternalSecret), time.Now)
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 1024},
		Timeout:   20 * time.Second,
	}
	// do signs and sends as a router does, and like a router signs again
	// an attempt the server refused only because it reached it after the
	// signature's window (queued while the server restarted on a loaded
	// machine): the server did nothing with it. A refusal of a fresh
	// signature is an answer like any other.
	do := func(method, path string, user hongbao.UserID, body []byte) clustertest.Reply {
		for {
			req, err := clustertest.NewRequest(method, "http://"+addr+path, body, nil)
			if err != nil {
				return clustertest.Reply{Err: err}
			}
			signed := time.Now()
			auth.Sign(req, user)
			r := clustertest.Do(client, req)
			if r.Status == http.StatusForbidden && r.Str("code") == "forbidden" && time.Since(signed) > api.Window {
				continue
			}
			return r
		}
	}

	const packets, count, total = 20, 50, 5000
	ids := make([]hongbao.PacketID, packets)
	for i := range ids {
		typ := []string{"random", "fixed"}[i%2]
		body, _ := json.Marshal(map[string]any{"total": total, "count": count, "type": typ})
		sender := dbtest.FreshUser()
		if _, _, err := wallet.Apply(t.Context(), hongbao.Entry{Key: fmt.Sprintf("topup:crash:%d", sender), User: sender,
			Amount: total, Kind: hongbao.KindTopUp}); err != nil {
			t.Fatal(err)
		}
		r := do(http.MethodPost, "/v1/packets", sender, body)
		if r.Status != http.StatusCreated {
			t.Fatalf("send: %v", r)
		}
		id, err := hongbao.ParsePacketID(r.Str("id"))
		if err != nil {
			t.Fatalf("send answered id %q: %v", r.Str("id"), err)
		}
		ids[i] = id
	}

	open := func(u hongbao.UserID, id hongbao.PacketID) openAnswer {
		r := do(http.MethodPost, "/v1/packets/"+id.String()+"/open", u, nil)
		a := openAnswer{status: r.Status, err: r.Err}
		switch {
		case r.Err != nil:
		case r.Status == http.StatusOK && (r.Str("status") == hongbao.Opened || r.Str("status") == hongbao.AlreadyOpened):
			if r.Amount() < 1 {
				a.err = fmt.Errorf("bad amount in %v", r)
			}
			a.kind, a.amount = r.Str("status"), r.Amount()
		case r.Status == http.StatusConflict && r.Str("code") == "sold_out":
			a.kind = "sold_out"
		case r.Status >= 500:
			// busy, or an outcome the client cannot know: retried.
			a.err = fmt.Errorf("%v", r)
		default:
			a.err = fmt.Errorf("unexpected answer %v", r)
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
	// Kill once opens are flowing: after the first hundred final answers
	// (a quiet machine gives all 4,000 within 300 ms, a loaded one may need
	// seconds for the first).
	for wait := time.Now().Add(10 * time.Second); answered.Load() < 100 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := answered.Load()
	t.Logf("SIGKILL after %d of %d final answers", atKill, users*packets)
	if atKill == 0 || atKill >= users*packets {
		t.Errorf("the kill did not land mid-load (%d of %d answers)", atKill, users*packets)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if gaveUp.Load() {
		t.FailNow()
	}
	t.Logf("%d answers after the restart; %d connection errors and 5xx answers retried", answered.Load()-atKill, retried.Load())
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}

	// Every "opened" or "already_opened" the clients ever heard is in
	// MySQL with the amount they were told; sold_out means no share.
	rows := map[pair]int64{}
	for _, id := range ids {
		p := dbtest.CheckPacket(t, db, id)
		if p.RemainingCount != 0 {
			t.Errorf("packet %d: %d shares left after %d openers", id, p.RemainingCount, users)
		}
		for u, amount := range p.Shares {
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
		e, ok, err := wallet.Entry(t.Context(), hongbao.SendKey(id))
		if err != nil || !ok || e.Amount != -total {
			t.Errorf("packet %d: send debit %+v (present %v, %v), want %d fen", id, e, ok, err, -total)
		}
	}
	// Each share's wallet credit was written in the open's transaction.
	credits := map[pair]int64{}
	for _, id := range ids {
		for u, amounts := range dbtest.OutboxCredits(t, db, id) {
			for _, amount := range amounts {
				credits[pair{id, u}] = amount
			}
		}
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
