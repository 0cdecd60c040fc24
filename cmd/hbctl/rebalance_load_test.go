package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/router/clustertest"
)

// opened is an open the router acknowledged.
type opened struct {
	id     hongbao.PacketID
	user   hongbao.UserID
	amount int64
}

// load sends and opens packets through the router from workers clients
// until stop is closed, keeping every acknowledged open and every answer
// that was not one.
type load struct {
	mu     sync.Mutex
	acks   []opened
	errors []string
	sent   []hongbao.PacketID
	n      atomic.Int64
}

func (l *load) run(t testing.TB, c *clustertest.Cluster, workers int, stop <-chan struct{}) *sync.WaitGroup {
	cl := c.Client.Retrying(15 * time.Second)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sender := user()
				r := cl.Send(sender, hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, fmt.Sprintf("w%d-%d", w, i))
				if r.Status != http.StatusCreated && r.Status != http.StatusOK {
					l.fail("send: " + r.String())
					continue
				}
				id, err := hongbao.ParsePacketID(r.Body.ID)
				if err != nil {
					l.fail("send answered id " + r.Body.ID)
					continue
				}
				l.mu.Lock()
				l.sent = append(l.sent, id)
				l.mu.Unlock()
				for range 5 {
					u := user()
					o := cl.Open(u, id.String())
					l.n.Add(1)
					if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
						l.fail(fmt.Sprintf("open %s: %v", id, o))
						continue
					}
					l.mu.Lock()
					l.acks = append(l.acks, opened{id, u, o.Body.Amount})
					l.mu.Unlock()
				}
			}
		})
	}
	return &wg
}

func (l *load) fail(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors = append(l.errors, s)
}

// TestRebalanceUnderLoad is the operator's story with clients sending and
// opening packets all along: add SET c (in the meta database only: its
// servers find themselves there), rebalance a third of the buckets onto
// it, drain it, remove it. No client sees an error; every acknowledged
// open is in the MySQL of the SET owning its bucket at the end, with its
// amount; every packet sold out before reads the same after; hbctl verify
// holds; every move's freeze is recorded.
//
// The settlers sweep pending sends after 30 s, their production default:
// a send caught in a freeze waits that long at most on a starved machine,
// and the tests' 5 s would cancel it under the client (402).
func TestRebalanceUnderLoad(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Spare: 1, SweepAfter: 30 * time.Second})
	spare := c.Spares[0].Name
	before := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	for _, b := range []hongbao.Bucket{3, 250, 501, 777, 998} {
		id, shares := sendInto(t, c, b, 3, 3)
		before[id] = shares
	}

	l := &load{}
	stop := make(chan struct{})
	wg := l.run(t, c, 24, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	c.MustCtl(t, c.AddSetArgs(spare)...)
	c.StartSet(t, spare)
	var listed struct {
		Sets []struct {
			Name    string `json:"name"`
			Buckets int    `json:"buckets"`
			Ready   int    `json:"servers_ready"`
		} `json:"sets"`
	}
	if err := json.Unmarshal([]byte(c.MustCtl(t, "set", "list", "--json")), &listed); err != nil || len(listed.Sets) != 3 ||
		listed.Sets[2].Name != spare || listed.Sets[2].Buckets != 0 || listed.Sets[2].Ready != 2 {
		t.Fatalf("set list after adding %s: %+v (%v)", spare, listed, err)
	}
	var plan struct {
		Moves []struct {
			To string `json:"To"`
		} `json:"moves"`
	}
	if err := json.Unmarshal([]byte(c.MustCtl(t, "rebalance", "plan", "--json")), &plan); err != nil || len(plan.Moves) < 300 || len(plan.Moves) > 340 {
		t.Fatalf("rebalance plan with an empty SET %s: %d moves (%v)", spare, len(plan.Moves), err)
	}

	began := time.Now()
	out := c.MustCtl(t, "rebalance", "apply", "--parallel", "8", "--grace", "500ms")
	applied := time.Since(began)
	freezes := freezesOf(t, out)
	if n := len(bucketsOf(t, c, spare)); n != len(plan.Moves) {
		t.Fatalf("SET %s owns %d buckets after the apply, the plan moved %d", spare, n, len(plan.Moves))
	}
	began = time.Now()
	out = c.MustCtl(t, "set", "drain", spare, "--parallel", "8", "--grace", "500ms")
	drained := time.Since(began)
	freezes = append(freezes, freezesOf(t, out)...)
	if n := len(bucketsOf(t, c, spare)); n != 0 {
		t.Fatalf("SET %s owns %d buckets after the drain", spare, n)
	}
	close(stop)
	wg.Wait()
	waitOutbox(t, c)
	if out, err := c.Ctl("set", "remove", spare); err != nil {
		t.Fatalf("set remove %s: %v\n%s", spare, err, out)
	}

	slices.Sort(freezes)
	p := func(q float64) int { return freezes[min(len(freezes)-1, int(q*float64(len(freezes)-1)+0.5))] }
	t.Logf("moved %d buckets to %s in %v and back in %v under %d opens; freeze p50 %d ms, p99 %d ms, max %d ms",
		len(plan.Moves), spare, applied.Round(time.Millisecond), drained.Round(time.Millisecond), l.n.Load(), p(0.5), p(0.99), p(1))
	if len(freezes) != 2*len(plan.Moves) {
		t.Errorf("%d freezes reported for %d moves", len(freezes), 2*len(plan.Moves))
	}
	for i, e := range l.errors {
		if i == 5 {
			t.Errorf("... %d client errors in all", len(l.errors))
			break
		}
		t.Errorf("a client saw: %s", e)
	}
	if len(l.acks) < 100 {
		t.Errorf("only %d opens acknowledged during the rebalance", len(l.acks))
	}
	lost := 0
	for _, a := range l.acks {
		owner := ownerOf(t, c, a.id.Bucket())
		if got := sharesOn(t, c, owner, a.id)[a.user]; got != a.amount {
			lost++
			if lost <= 5 {
				t.Errorf("user %s was answered %d fen of %s; SET %s holds %d", a.user, a.amount, a.id, owner, got)
			}
		}
	}
	for id, shares := range before {
		sameShares(t, "a packet sold out before the rebalance", sharesOn(t, c, ownerOf(t, c, id.Bucket()), id), shares)
	}
	c.CheckInvariants(t)
	t.Logf("%d acknowledged opens checked, %d lost", len(l.acks), lost)
}

// freezesOf reads the freezes of the moves from apply's JSON lines.
func freezesOf(t testing.TB, out string) []int {
	fs, _ := movesOf(t, out)
	return fs
}

// movesOf reads the freezes of the moves and the rows they copied from
// apply's JSON lines, and logs where the time of the slowest tenth went.
func movesOf(t testing.TB, out string) ([]int, int64) {
	t.Helper()
	var fs []int
	var rows int64
	var parts []map[string]int64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e struct {
			Event    string           `json:"event"`
			FreezeMS int              `json:"freeze_ms"`
			Parts    map[string]int64 `json:"freeze_parts_ms"`
			Rows     int64            `json:"rows_copied"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Event == "moved" {
			fs = append(fs, e.FreezeMS)
			rows += e.Rows
			if e.Parts != nil {
				e.Parts["total"] = int64(e.FreezeMS)
				parts = append(parts, e.Parts)
			}
		}
	}
	if len(fs) == 0 {
		t.Fatalf("no move reported:\n%s", out)
	}
	slices.SortFunc(parts, func(a, b map[string]int64) int { return int(b["total"] - a["total"]) })
	sum := map[string]int64{}
	slow := parts[:max(1, len(parts)/10)]
	for _, p := range slow {
		for k, v := range p {
			sum[k] += v
		}
	}
	t.Logf("the slowest %d freezes, mean ms: total %d = fence %d + delta %d + verify %d + handover %d", len(slow),
		sum["total"]/int64(len(slow)), sum["fence"]/int64(len(slow)), sum["delta"]/int64(len(slow)),
		sum["verify"]/int64(len(slow)), sum["handover"]/int64(len(slow)))
	return fs, rows
}
