package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/etcdtest"
)

const ttl = 2 * time.Second

// dial is a Client on c, closed when the test ends.
func dial(t *testing.T, c *etcdtest.Cluster) *Client {
	t.Helper()
	cl, err := Dial(context.Background(), c.Endpoints(), Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestOneHolder: of many actors racing for one group's key, on clients of
// their own, exactly one holds it; the others are told who does.
func TestOneHolder(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	const actors = 8
	var (
		mu    sync.Mutex
		held  []string
		busy  int
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range actors {
		cl := dial(t, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			who := fmt.Sprintf("actor-%d", i)
			_, err := cl.TryAcquire(ctx, "set/b", who)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				held = append(held, who)
			case errors.Is(err, ErrBusy):
				busy++
			default:
				t.Errorf("%s: %v", who, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(held) != 1 || busy != actors-1 {
		t.Fatalf("held by %v, %d refused; want exactly one holder and %d refused", held, busy, actors-1)
	}
	_, err := dial(t, c).TryAcquire(ctx, "set/b", "late")
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), held[0]) {
		t.Errorf("a late actor is told %v; want ErrBusy naming %s", err, held[0])
	}
	// Another group's key is independent.
	if _, err := dial(t, c).TryAcquire(ctx, "set/c", "other"); err != nil {
		t.Errorf("set/c: %v", err)
	}
}

// TestReleaseHandsOver: a waiting actor takes the key as soon as the
// holder releases it, and the old holder's Check says it lost it.
func TestReleaseHandsOver(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	a, err := dial(t, c).TryAcquire(ctx, "core", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx); err != nil {
		t.Fatalf("the holder's own check: %v", err)
	}
	got := make(chan error, 1)
	b := dial(t, c)
	var hb *Held
	go func() {
		var err error
		hb, err = b.Acquire(ctx, "core", "b")
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("b took a held key: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := hb.Check(ctx); err != nil {
		t.Errorf("b's check: %v", err)
	}
	if err := a.Check(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("a's check after release: %v, want ErrLost", err)
	}
}

// TestDeadHolderExpires: a holder that dies without releasing (its client
// gone, as a killed process's) keeps the key until its TTL, then loses it.
func TestDeadHolderExpires(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	dead, err := Dial(ctx, c.Endpoints(), Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.TryAcquire(ctx, "bucket/17", "dead"); err != nil {
		t.Fatal(err)
	}
	_ = dead.Close()
	b := dial(t, c)
	if _, err := b.TryAcquire(ctx, "bucket/17", "b"); !errors.Is(err, ErrBusy) {
		t.Fatalf("right after the holder died: %v, want ErrBusy (its lease still runs)", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*ttl)
	defer cancel()
	h, err := b.Acquire(wctx, "bucket/17", "b")
	if err != nil {
		t.Fatalf("the dead holder's key never expired: %v", err)
	}
	if err := h.Check(ctx); err != nil {
		t.Error(err)
	}
}

// TestPausedHolderCannotAct: a holder whose keep-alive stalled past the
// TTL (paused, cut off) and who believes it still holds the key is told
// ErrLost by Check, from the quorum, once someone else took it.
func TestPausedHolderCannotAct(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	a, err := dial(t, c).TryAcquire(ctx, "set/b", "a")
	if err != nil {
		t.Fatal(err)
	}
	a.cancel() // the keep-alive stalls
	<-a.Lost()
	wctx, cancel := context.WithTimeout(ctx, 5*ttl)
	defer cancel()
	if _, err := dial(t, c).Acquire(wctx, "set/b", "b"); err != nil {
		t.Fatal(err)
	}
	// a wakes up not knowing: its local signal has not fired.
	awake := &Held{c: a.c, key: a.key, holder: a.holder, id: a.id, cancel: func() {}, lost: make(chan struct{})}
	if err := awake.Check(ctx); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "no longer") {
		t.Errorf("a paused holder's check: %v, want ErrLost from the quorum", err)
	}
}

// TestQuorum: with one member of three dead the key is taken and checked
// as before; with two dead no check passes (a holder on the minority side
// stops), and once the quorum is back the holder's key is still its own.
func TestQuorum(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	m := c.Members()
	c.Kill(m[0])
	h, err := dial(t, c).TryAcquire(ctx, "set/b", "a")
	if err != nil {
		t.Fatalf("with one member down: %v", err)
	}
	c.Kill(m[1])
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := h.Check(qctx); !errors.Is(err, ErrLost) {
		t.Fatalf("with the quorum lost: %v, want ErrLost", err)
	}
	c.Restart(m[1])
	c.Restart(m[0])
	c.WaitHealthy(30 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := h.Check(ctx)
		if err == nil {
			break
		}
		select {
		case <-h.Lost(): // expired while the quorum was gone: as good an answer
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the quorum came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQuorumGoneAnswersInTime: with every member down, taking, checking
// and revoking a key answer ErrUnreachable within the client's call
// timeout instead of waiting for etcd forever (an operator's hbctl replica
// start once hung so, with etcd not started), even under a context with
// no deadline.
func TestQuorumGoneAnswersInTime(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	cl, err := Dial(ctx, c.Endpoints(), Options{TTL: ttl, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	h, err := cl.TryAcquire(ctx, "set/b", "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members() {
		c.Kill(m)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"TryAcquire", func() error { _, err := cl.TryAcquire(ctx, "set/c", "a"); return err }},
		{"Check", func() error { return h.Check(ctx) }},
		{"Revoke", func() error { _, err := cl.Revoke(ctx, "set/b"); return err }},
	}
	for _, tc := range calls {
		began := time.Now()
		err := tc.call()
		took := time.Since(began)
		if !errors.Is(err, ErrUnreachable) {
			t.Errorf("%s with no etcd: %v, want ErrUnreachable", tc.name, err)
		}
		if took > 3*time.Second {
			t.Errorf("%s with no etcd took %v, want about the 1 s call timeout", tc.name, took)
		}
	}
}
