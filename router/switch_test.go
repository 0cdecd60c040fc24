package router

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// fakeServer answers 421 wrong_set while wrong says so, else 200, and
// counts the requests of each kind.
type fakeServer struct {
	*httptest.Server
	wrong         func() bool
	misdirected   atomic.Int64
	served        atomic.Int64
	firstServedAt atomic.Int64 // unix nanos
}

func newFakeServer(t *testing.T, wrong func() bool) *fakeServer {
	f := &fakeServer{wrong: wrong}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.wrong() {
			f.misdirected.Add(1)
			api.WriteProblem(w, hongbao.ErrWrongSet, "")
			return
		}
		f.served.Add(1)
		f.firstServedAt.CompareAndSwap(0, time.Now().UnixNano())
		api.WriteJSON(w, http.StatusOK, map[string]string{"status": "opened"})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) addr() string { return strings.TrimPrefix(f.URL, "http://") }

// switchRouter returns a router following a fresh meta database in which
// SET a (server sa) owns buckets 0..499 and SET b (server sb) the others.
// The router's watcher does not poll: it sees a change only when a 421
// makes it refresh.
func switchRouter(t *testing.T, sa, sb *fakeServer) (*Router, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	meta := freshMeta(t, "hb_meta_switch_")
	if _, err := topology.Init(ctx, meta, []topology.Set{
		{Name: "a", Servers: []string{sa.addr()}, MySQLDSN: "-"},
		{Name: "b", Servers: []string{sb.addr()}, MySQLDSN: "-"},
	}); err != nil {
		t.Fatal(err)
	}
	w, err := topology.NewWatcher(ctx, meta, time.Hour, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return New(Deps{Topology: w, Health: NewHealth(http.DefaultClient, time.Second, zap.NewNop()),
		Internal: api.NewInternal([]byte("router-switch-test-secret-0123456789"), time.Now), Client: NewClient(4),
		Now: time.Now, Log: zap.NewNop()}), meta
}

// TestForwardFollowsABucketSwitch: a request caught in a bucket's switch
// is answered by the new owner, with latency instead of an error: the
// source answers 421 until the move is published (300 ms), the target
// answers 421 for 150 ms more (its servers have not seen the new version
// yet), then 200. A bucket that does not switch within the window gets 503
// unavailable after about 3 s; a client that leaves ends the retries.
func TestForwardFollowsABucketSwitch(t *testing.T) {
	t.Parallel()
	const bucket = hongbao.Bucket(7) // SET a's in the initial spread
	id, err := hongbao.NewPacketID(time.Now(), bucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	var publishedAt atomic.Int64
	sa := newFakeServer(t, func() bool { return true }) // SET a gave the bucket up
	// SET b has not seen the new version for 150 ms, and answers at least
	// one 421 whenever the router's first attempt comes (a loaded machine
	// may delay it past those 150 ms).
	var bRefused atomic.Int64
	sb := newFakeServer(t, func() bool {
		p := publishedAt.Load()
		late := p == 0 || time.Since(time.Unix(0, p)) < 150*time.Millisecond || bRefused.Load() == 0
		if late {
			bRefused.Add(1)
		}
		return late
	})
	rt, meta := switchRouter(t, sa, sb)
	open := func(ctx context.Context) (*response, error, time.Duration) {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/packets/"+id.String()+"/open", nil)
		start := time.Now()
		resp, err := rt.forward(r, 42, id, nil, nil)
		return resp, err, time.Since(start)
	}

	t.Run("switch", func(t *testing.T) {
		// Room for the move's transaction and the refresh on a loaded
		// machine: what is tested here is following the switch, not the
		// window (the next case).
		rt.switchWindow = 30 * time.Second
		defer func() { rt.switchWindow = switchWindow }()
		go func() {
			time.Sleep(300 * time.Millisecond)
			if _, err := topology.MoveBucket(context.Background(), meta, bucket, "b"); err != nil {
				t.Error(err)
			}
			publishedAt.Store(time.Now().UnixNano())
		}()
		resp, err, took := open(context.Background())
		if err != nil || resp.status != http.StatusOK {
			t.Fatalf("open during the switch: %+v, %v after %v; want 200 from SET b", resp, err, took)
		}
		if sa.misdirected.Load() < 3 || sb.misdirected.Load() < 1 || sb.served.Load() != 1 {
			t.Errorf("SET a answered 421 %d times, SET b 421 %d times and 200 %d times; want a several, b at least once, then one 200",
				sa.misdirected.Load(), sb.misdirected.Load(), sb.served.Load())
		}
		// Served only once SET b took the bucket. How soon after is the
		// backoff's (200 ms at most) on a quiet machine, and bounded by
		// the switch window (3 s, or the answer is 503, checked above) on
		// any: not asserted in time, which a loaded machine stretches.
		if lag := time.Unix(0, sb.firstServedAt.Load()).Sub(time.Unix(0, publishedAt.Load())); lag < 150*time.Millisecond {
			t.Errorf("served %v after the publish, before SET b took the bucket (150 ms)", lag)
		}
		t.Logf("open took %v (about 450 ms on a quiet machine)", took)
	})

	t.Run("no switch", func(t *testing.T) {
		// The bucket is SET b's now; SET b refuses it from now on.
		publishedAt.Store(time.Now().Add(time.Hour).UnixNano())
		before := sb.misdirected.Load()
		resp, err, took := open(context.Background())
		if !errors.Is(err, hongbao.ErrUnavailable) || resp != nil {
			t.Fatalf("open of a bucket refused everywhere: %+v, %v; want unavailable", resp, err)
		}
		// Bounds that a loaded machine does not break: no giving up
		// before the window, no retrying long past it, and no more
		// attempts than the backoff allows (about 17 on a quiet machine:
		// fewer when each takes longer).
		if took < switchWindow-300*time.Millisecond || took > switchWindow+5*time.Second {
			t.Errorf("gave up after %v, want about %v", took, switchWindow)
		}
		if n := sb.misdirected.Load() - before; n < 2 || n > 25 {
			t.Errorf("%d attempts in the switch window, want 25, 50, 100 then 200 ms apart (about 17)", n)
		}
	})

	t.Run("client gone", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err, took := open(ctx)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
			t.Errorf("open whose client left at 200 ms: %v after %v; want the client's error at once", err, took)
		}
	})
}

// freshMeta creates a meta database of its own (named from prefix) on test
// SET a's MariaDB, dropped when the test ends.
func freshMeta(t *testing.T, prefix string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName(prefix)
	meta, err := topology.OpenMeta(context.Background(), cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`")
		meta.Close()
	})
	return meta
}
