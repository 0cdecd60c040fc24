package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// packet is the clients' own record of one packet: what its send was
// acknowledged with and every open acknowledged with an amount.
type packet struct {
	id       hongbao.PacketID
	sender   hongbao.UserID
	total    int64
	count    int
	activity bool
	sentAt   time.Time // when its send was acknowledged (the fault it ran under)

	mu     sync.Mutex
	opens  map[hongbao.UserID]int64     // acknowledged opens: opened or already_opened, with the amount
	openAt map[hongbao.UserID]time.Time // when each open was acknowledged
	over   bool                         // a client was told sold_out or expired
}

// load is the clients, their record and their counters.
type load struct {
	base   string
	signer *hongbao.Signer
	hc     *http.Client
	users  hongbao.UserID // the run's first user ID: clients are users+1..users+n
	maxCnt int            // the largest activity packet the limits allow

	mu      sync.Mutex
	packets []*packet // every acknowledged send
	live    []*packet // small packets clients may still open (the latest)
	hot     []*packet // activity packets clients may still open (the latest)
	pending []func(ctx context.Context) bool

	acked, unanswered, retries atomic.Int64
	sends, activity, opens     atomic.Int64
	statuses                   sync.Map // "500 internal" -> *atomic.Int64
	conflictAmounts            atomic.Int64
	// lastWrite is, per bucket, when a write to it (a send answered 201,
	// an open answered 200) was last acknowledged, in Unix nanoseconds:
	// a fault's recovery is the time until its SET's writes are
	// acknowledged again.
	lastWrite [hongbao.Buckets]atomic.Int64
}

// wrote notes an acknowledged write to bucket b.
func (l *load) wrote(b hongbao.Bucket) { l.lastWrite[b].Store(time.Now().UnixNano()) }

// wroteSince reports whether a write to one of buckets was acknowledged
// after t.
func (l *load) wroteSince(buckets []hongbao.Bucket, t time.Time) error {
	for _, b := range buckets {
		if l.lastWrite[b].Load() > t.UnixNano() {
			return nil
		}
	}
	return fmt.Errorf("no write to its %d buckets acknowledged since %s", len(buckets), t.Format("15:04:05.000"))
}

// answer is one HTTP answer (status 0: none came).
type answer struct {
	status int
	code   string
	body   []byte
}

// do sends one request as user.
func (l *load) do(ctx context.Context, user hongbao.UserID, method, path, body, key string) answer {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.base+path, rd)
	if err != nil {
		return answer{}
	}
	req.Header.Set("Authorization", "Bearer "+l.signer.Sign(user, time.Now().Add(24*time.Hour)))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return answer{code: noAnswer(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{code: noAnswer(err)}
	}
	a := answer{status: resp.StatusCode, body: b}
	if resp.StatusCode >= 300 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		a.code = p.Code
	}
	return a
}

// noAnswer says why no answer came: the client's timeout (10 s), or the
// connection refused or broken (nothing listening, a process killed).
func noAnswer(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "connection refused or broken"
}

// count counts an answer by status and code.
func (l *load) count(a answer) {
	k := "no answer (" + a.code + ")"
	if a.status != 0 {
		k = strconv.Itoa(a.status) + " " + a.code
	}
	v, _ := l.statuses.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// final reports whether a is an answer a client acts on (not a reason to
// ask again): anything but no answer, 5xx, 429 and 421.
func final(a answer) bool {
	return a.status != 0 && a.status < 500 && a.status != http.StatusTooManyRequests && a.status != http.StatusMisdirectedRequest
}

// retry asks until a final answer or until ctx ends; it returns the last.
func (l *load) retry(ctx context.Context, ask func() answer) answer {
	backoff := 50 * time.Millisecond
	for {
		a := ask()
		l.count(a)
		if final(a) {
			l.acked.Add(1)
			return a
		}
		l.retries.Add(1)
		select {
		case <-ctx.Done():
			return a
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// client is one user sending and opening until ctx ends.
func (l *load) client(ctx context.Context, me hongbao.UserID, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(me)))
	opened := map[hongbao.PacketID]bool{}
	for n := 0; ctx.Err() == nil; n++ {
		if rng.IntN(100) < 8 {
			l.send(ctx, me, n, rng)
		} else if p := l.pick(rng); p != nil && !opened[p.id] {
			opened[p.id] = true
			l.open(ctx, me, p)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(50+rng.IntN(400)) * time.Millisecond):
		}
	}
}

// send sends a small packet, or now and then an activity packet of
// hundreds or thousands of shares, with an Idempotency-Key, asking again
// until it is acknowledged.
func (l *load) send(ctx context.Context, me hongbao.UserID, n int, rng *rand.Rand) {
	count, total, typ := 1+rng.IntN(10), int64(0), hongbao.Random
	activity := l.maxCnt > 100 && rng.IntN(100) < 3
	if activity {
		count = 200 + rng.IntN(l.maxCnt-199)
	}
	total = int64(count) * int64(1+rng.IntN(50))
	if rng.IntN(4) == 0 {
		typ = hongbao.Fixed
	}
	key := fmt.Sprintf("chaos-%d-%d", me, n)
	body := fmt.Sprintf(`{"total":%d,"count":%d,"type":%q,"greeting":"chaos"}`, total, count, string(typ))
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	a := l.retry(opCtx, func() answer { return l.do(opCtx, me, http.MethodPost, "/v1/packets", body, key) })
	if !final(a) {
		l.unresolved(func(ctx context.Context) bool {
			return l.sent(me, total, count, activity, l.retry(ctx, func() answer { return l.do(ctx, me, http.MethodPost, "/v1/packets", body, key) }))
		})
		return
	}
	l.sent(me, total, count, activity, a)
}

// sent records an acknowledged send; it reports whether a was final.
func (l *load) sent(me hongbao.UserID, total int64, count int, activity bool, a answer) bool {
	if !final(a) {
		return false
	}
	if a.status != http.StatusCreated {
		return true // e.g. 402: no packet
	}
	var pj api.PacketJSON
	if err := json.Unmarshal(a.body, &pj); err != nil {
		return true
	}
	id, err := hongbao.ParsePacketID(pj.ID)
	if err != nil {
		return true
	}
	p := &packet{id: id, sender: me, total: total, count: count, activity: activity, sentAt: time.Now(),
		opens: map[hongbao.UserID]int64{}, openAt: map[hongbao.UserID]time.Time{}}
	l.wrote(id.Bucket())
	l.sends.Add(1)
	if activity {
		l.activity.Add(1)
	}
	l.mu.Lock()
	l.packets = append(l.packets, p)
	if activity {
		l.hot = append(l.hot, p)
		if len(l.hot) > 8 {
			l.hot = l.hot[1:]
		}
	} else {
		l.live = append(l.live, p)
		if len(l.live) > 400 {
			l.live = l.live[len(l.live)-400:]
		}
	}
	l.mu.Unlock()
	return true
}

// pick returns a packet to open: an activity packet (hot: many clients
// race for its shares) for about half the opens when there is one.
func (l *load) pick(rng *rand.Rand) *packet {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.hot) > 0 && (rng.IntN(2) == 0 || len(l.live) == 0) {
		return l.hot[rng.IntN(len(l.hot))]
	}
	if len(l.live) == 0 {
		return nil
	}
	return l.live[rng.IntN(len(l.live))]
}

// open opens p as me, asking again until it is acknowledged.
func (l *load) open(ctx context.Context, me hongbao.UserID, p *packet) {
	path := "/v1/packets/" + p.id.String() + "/open"
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	a := l.retry(opCtx, func() answer { return l.do(opCtx, me, http.MethodPost, path, "", "") })
	if !final(a) {
		l.unresolved(func(ctx context.Context) bool {
			return l.opened(me, p, l.retry(ctx, func() answer { return l.do(ctx, me, http.MethodPost, path, "", "") }))
		})
		return
	}
	l.opened(me, p, a)
}

// opened records an acknowledged open; it reports whether a was final.
func (l *load) opened(me hongbao.UserID, p *packet, a answer) bool {
	if !final(a) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch a.status {
	case http.StatusOK:
		var o api.OpenJSON
		if json.Unmarshal(a.body, &o) != nil {
			return true
		}
		if old, ok := p.opens[me]; ok && old != o.Amount {
			l.conflictAmounts.Add(1) // two answers with different amounts
		}
		p.opens[me] = o.Amount
		p.openAt[me] = time.Now()
		l.opens.Add(1)
		l.wrote(p.id.Bucket())
	case http.StatusConflict, http.StatusGone:
		p.over = true
	}
	return true
}

// unresolved keeps an operation that got no final answer in time: it is
// asked again once the faults are over, so that every operation ends with
// an answer the check can hold the system to.
func (l *load) unresolved(f func(ctx context.Context) bool) {
	l.unanswered.Add(1)
	l.mu.Lock()
	l.pending = append(l.pending, f)
	l.mu.Unlock()
}

// resolve asks every unresolved operation again (the cluster healthy); it
// returns how many still got no final answer.
func (l *load) resolve(ctx context.Context) int {
	l.mu.Lock()
	ps := l.pending
	l.pending = nil
	l.mu.Unlock()
	var left atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, f := range ps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if !f(c) {
				left.Add(1)
			}
		})
	}
	wg.Wait()
	return int(left.Load())
}
