package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// TestClusterMoveBucket: `hbctl topology move` moves a bucket from SET a to
// SET b live. Within ~3 s the router sends the bucket's packet to SET b,
// whose MySQL now holds it with the same money; an old SET-a server answers
// a signed request for the bucket 421 wrong_set; SET a's fence refuses any
// write of the bucket; topology show counts 499/501.
func TestClusterMoveBucket(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	setA, setB := c.Sets[0].Name, c.Sets[1].Name
	if n := len(topo.Buckets(setA)); n != 500 {
		t.Fatalf("SET %s owns %d buckets before the move, want 500 (has a move run already?)", setA, n)
	}
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }

	// A bucket of SET a holding no other packet today (a move carries
	// along every row of the bucket).
	sender := c.RichUser(t)
	today := time.Now().In(c.Loc).Day()
	var key string
	var bucket hongbao.Bucket
	for tries := 0; tries < 300; tries++ {
		key, bucket = packettest.BucketKey(t, sender, ownedByA)
		var n int
		err := c.DB(setA).QueryRow("SELECT COUNT(*) FROM " + hongbao.DayTable{Bucket: bucket, Day: today}.Packets()).Scan(&n)
		if dbtest.MissingTable(err) || (err == nil && n == 0) {
			break
		}
	}
	body := packettest.SendBody{Total: 1000, Count: 5, Type: "random", Greeting: "搬家"}
	id := c.MustSend(t, sender, body, key)
	if id == 0 {
		return
	}
	if id.Bucket() != bucket {
		t.Fatalf("packet %s is in bucket %d, want %d", id, id.Bucket(), bucket)
	}
	early := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser()}
	for _, u := range early {
		if a := c.OpenFinal(u, id, packettest.RetryBusy, 10*time.Second); a.R.Str("status") != hongbao.Opened {
			t.Fatalf("open before the move: %v", a.R)
		}
	}
	before := c.CheckPacket(t, topo, id)
	if before == nil || before.Set != setA {
		t.Fatalf("packet %s is not on SET %s before the move", id, setA)
	}

	// A reader follows the packet through the router during the move.
	type seen struct {
		at time.Time
		r  clustertest.Reply
	}
	var polls []seen
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() {
		defer pollers.Done()
		reader := dbtest.FreshUser()
		for {
			select {
			case <-stop:
				return
			default:
			}
			polls = append(polls, seen{time.Now(), c.Detail(reader, id)})
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
		r     clustertest.Reply
	}
	var staleAnswers []stale
	var staleMu sync.Mutex
	var probes sync.WaitGroup
	probeSigner := api.NewInternal([]byte(c.InternalSecret), time.Now)
	for _, srv := range c.Sets[0].Addrs {
		probes.Add(1)
		go func() {
			defer probes.Done()
			reader := dbtest.FreshUser()
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
	late := dbtest.FreshUser()
	var final packettest.OpenAnswer
	for {
		final = c.OpenFinal(late, id, packettest.RetryBusy, 5*time.Second)
		if final.R.Status == http.StatusOK || time.Since(moved) > 30*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	routedAfter := time.Since(moved)
	if final.R.Str("status") != hongbao.Opened {
		t.Fatalf("open through the router after the move: %v (after %v)", final.R, routedAfter)
	}
	// ~3 s on an idle machine (two topology polls); a starved one takes
	// longer, so only a router that does not follow for many polls fails.
	if routedAfter > 15*time.Second {
		t.Errorf("the router took %v after the move to open the packet on SET %s, want ~3 s", routedAfter, setB)
	}
	r := c.Detail(dbtest.FreshUser(), id)
	if r.Status != http.StatusOK || len(r.JSON["records"].([]any)) != 3 {
		t.Errorf("detail through the router after the move: %v", r)
	}
	close(stop)
	pollers.Wait()

	topo2 := c.Topology(t)
	if topo2.Owner(bucket).Name != setB || topo2.Version != topo.Version+1 {
		t.Fatalf("topology after the move: bucket %d on %s at version %d (was %d)", bucket, topo2.Owner(bucket).Name, topo2.Version, topo.Version)
	}
	after := c.CheckPacket(t, topo2, id) // and asserts SET a holds no row of it any more
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
	intruder := c.RichUser(t) // can pay: only the bucket's owner may refuse the send
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
				return c.Request(http.MethodPost, "http://"+srv+"/v1/packets", 0, packettest.SendBody{Total: 100, Count: 1, Type: "random"}.JSON(),
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
	st := store.New(c.DB(setA), setA, c.Loc, time.Now, mrand.Int64N)
	_, _, err = st.Create(ctx, store.NewPacket{ID: minted, Sender: intruder, Expiry: time.Hour, Funding: hongbao.Funded,
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}})
	if !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("create in bucket %d on SET %s after the move: %v, want wrong_set", bucket, setA, err)
	}
	if _, err := st.OpenBatch(ctx, id, []hongbao.UserID{intruder}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("open of %s on SET %s after the move: %v, want wrong_set", id, setA, err)
	}
	if p := dbtest.ReadPacket(t, c.DB(setA), minted); p != nil {
		t.Errorf("a refused create left packet %s on SET %s", minted, setA)
	}
	if p := dbtest.ReadPacket(t, c.DB(setA), id); p != nil {
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
	if p := c.CheckPacket(t, c.Topology(t), id); p != nil && p.Shares[intruder] != 0 {
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
	table := id.Table(c.Loc)
	rowsOn := func(set string) int {
		var n int
		if err := c.DB(set).QueryRow("SELECT COUNT(*) FROM "+table.Packets()+" WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	leftover := &migrate.Bucket{B: bucket, From: migrate.Side{Live: c.DB(setB), Cold: c.DB(setB)}, To: migrate.Side{Live: c.DB(setA), Cold: c.DB(setA)}}
	if _, err := leftover.Pass(context.Background()); err != nil {
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
