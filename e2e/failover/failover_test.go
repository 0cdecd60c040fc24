package failover_test

import (
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
	"github.com/hongbao-dev/hongbao/router"
)

// TestClusterKillServerDuringOpens: SIGKILL of a SET server while opens of
// ~30 packets are in flight on it. Clients retrying 503/5xx all get a final
// answer within 30 s, every answer agrees with MySQL (an "opened" is
// durable with its amount), nobody holds two shares, every invariant holds.
func TestClusterKillServerDuringOpens(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	setA := c.Sets[0].Name
	victim, victimName := c.Sets[0].Addrs[0], c.Sets[0].Servers[0]
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }
	const count, openers, poolSize = 20, 30, 60

	// Packets of SET a: 20 whose first server is the victim, 10 the other.
	sender := c.RichUser(t)
	var onVictim, onOther []hongbao.PacketID
	for tries := 0; (len(onVictim) < 20 || len(onOther) < 10) && tries < 300; tries++ {
		key, _ := packettest.BucketKey(t, sender, ownedByA)
		id := c.MustSend(t, sender, packettest.SendBody{Total: 2000 + int64(tries), Count: count, Type: "random", Greeting: "kill -9"}, key)
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
		pool[i] = dbtest.FreshUser()
	}

	answers := make([][]packettest.OpenAnswer, len(ids))
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
				a := c.OpenFinal(u, id, packettest.RetryAny5xx, 30*time.Second)
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
	c.Kill(clustertest.Server, victimName)
	killedAt := time.Since(began)
	if atKill > total/2 {
		t.Errorf("the kill came late: %d of %d opens were already answered", atKill, total)
	}
	wg.Wait()
	elapsed := time.Since(began)

	var slowest time.Duration
	totalOpened := 0
	for i, id := range ids {
		p := c.CheckPacket(t, topo, id)
		if p == nil {
			continue
		}
		totalOpened += packettest.CheckAnswers(t, p, answers[i])
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

	c.Restart(clustertest.Server, victimName)
	// The restarted server serves again: a fresh packet of SET a that ranks
	// it first can be sent and opened.
	for tries := 0; tries < 100; tries++ {
		key, _ := packettest.BucketKey(t, sender, ownedByA)
		id := c.MustSend(t, sender, packettest.SendBody{Total: 100, Count: 1, Type: "random"}, key)
		if _, ranked := router.Route(topo, id, nil); ranked[0] != victim {
			continue
		}
		a := c.OpenFinal(dbtest.FreshUser(), id, packettest.RetryAny5xx, 10*time.Second)
		if kind, err := clustertest.Classify(a.R); err != nil || kind != hongbao.Opened {
			t.Errorf("open after the restart: %v", a.R)
		}
		break
	}
}
