package packets_test

import (
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// TestClusterManyPacketsManyOpeners: 200 packets opened at once by 25
// clients each, users overlapping across packets (and some opening one
// packet twice). Every invariant holds, every answer agrees with MySQL, and
// exactly min(count, distinct openers) opens of each packet said "opened".
func TestClusterManyPacketsManyOpeners(t *testing.T) {
	c := packettest.Start(t)
	const packets, attempts, poolSize = 200, 25, 80
	senders := make([]hongbao.UserID, 40) // a sender's debits take turns on its account row
	for i := range senders {
		senders[i] = c.RichUser(t)
	}
	pool := make([]hongbao.UserID, poolSize)
	for i := range pool {
		pool[i] = dbtest.FreshUser()
	}
	ids := make([]hongbao.PacketID, packets)
	bodies := make([]packettest.SendBody, packets)
	for i := range bodies {
		count := 10 + mrand.IntN(16)
		if mrand.IntN(2) == 0 {
			bodies[i] = packettest.SendBody{Total: int64(count * (1 + mrand.IntN(300))), Count: count, Type: "fixed", Greeting: "fixed"}
		} else {
			bodies[i] = packettest.SendBody{Total: int64(count + mrand.IntN(8000)), Count: count, Type: "random", Greeting: "lucky"}
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
			ids[i] = c.MustSend(t, senders[i%len(senders)], bodies[i], "")
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
	answers := make([][]packettest.OpenAnswer, packets)
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
			a := c.OpenFinal(j.user, ids[j.packet], packettest.RetryBusy, 60*time.Second)
			retries.Add(int64(a.Retries))
			mu.Lock()
			answers[j.packet] = append(answers[j.packet], a)
			mu.Unlock()
		}()
	}
	wg.Wait()
	opened := time.Since(began)

	topo := c.Topology(t)
	totalOpened := 0
	for i, id := range ids {
		p := c.CheckPacket(t, topo, id)
		if p == nil {
			continue
		}
		want := min(bodies[i].Count, len(distinct[i]))
		got := packettest.CheckAnswers(t, p, answers[i])
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
		if got := c.Balance(t, u); got != 100_000_000-spent[u] {
			t.Errorf("sender %s: balance %d, want %d", u, got, 100_000_000-spent[u])
		}
	}
	t.Logf("%d packets sent in %v; %d opens (%d answered opened, %d busy retries) in %v",
		packets, sent.Round(time.Millisecond), len(jobs), totalOpened, retries.Load(), opened.Round(time.Millisecond))
}
