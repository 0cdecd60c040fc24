package router

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/set/topology"
)

var batchSecret = []byte("router-batch-test-secret-0123456789")

// batchMode is how a batchFake treats a batch.
type batchMode int

const (
	answerAll  batchMode = iota // every item answered by answer
	killMidway                  // read the batch, then drop the connection: a server killed mid-batch
	truncate                    // answer 200 with half the answers' bytes
	noEndpoint                  // 404: a server without the batch endpoint
)

// batchFake is a SET server speaking the batch protocol: it checks the
// batch's signature over the whole body, as a real server does, and
// answers each item with answer (or fails the batch as mode says). Single
// requests are answered by answer too.
type batchFake struct {
	*httptest.Server
	name    string
	mode    atomic.Int32
	answer  func(it api.BatchItem) (int, string)
	items   atomic.Int64 // sub-requests received in batches
	batches atomic.Int64
	singles atomic.Int64
}

func newBatchFake(t *testing.T, name string, answer func(api.BatchItem) (int, string)) *batchFake {
	f := &batchFake{name: name, answer: answer}
	auth := api.NewInternal(batchSecret, time.Now)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.BatchPath {
			f.singles.Add(1)
			status, body := f.answer(api.BatchItem{Method: r.Method, Target: r.URL.RequestURI()})
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		if batchMode(f.mode.Load()) == noEndpoint {
			api.WriteProblem(w, &hongbao.Error{Code: "not_found", Message: "no such endpoint"}, "")
			return
		}
		raw, _ := io.ReadAll(r.Body)
		if _, err := auth.VerifyBatch(r, f.addr(), raw); err != nil {
			api.WriteProblem(w, err, "")
			return
		}
		items, err := api.DecodeBatch(raw)
		if err != nil {
			api.WriteProblem(w, err, "")
			return
		}
		f.batches.Add(1)
		f.items.Add(int64(len(items)))
		answers := make([]api.BatchAnswer, len(items))
		for i, it := range items {
			status, body := f.answer(it)
			answers[i] = api.BatchAnswer{Status: status, Body: []byte(body),
				Header: []api.Header{{Name: "Content-Type", Value: contentType(status)}}}
		}
		out := api.AppendAnswers(nil, answers)
		switch batchMode(f.mode.Load()) {
		case killMidway:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case truncate: // cut inside the first answer: no answer is whole
			out = out[:len(api.AppendAnswersStart(nil))+3]
		}
		_, _ = w.Write(out)
	}))
	t.Cleanup(f.Close)
	return f
}

func contentType(status int) string {
	if status >= 400 {
		return "application/problem+json"
	}
	return "application/json"
}

func (f *batchFake) addr() string { return strings.TrimPrefix(f.URL, "http://") }

// opened answers an open from server name.
func opened(name string) func(api.BatchItem) (int, string) {
	return func(it api.BatchItem) (int, string) {
		return 200, fmt.Sprintf(`{"status":"opened","amount":1,"server":%q,"user":"%d"}`, name, it.User)
	}
}

// batchRouter returns a coalescing router over a fresh meta database in
// which SET a (servers a) owns buckets 0..499 and SET b (servers b) the
// others; its watcher refreshes only when a 421 asks.
func batchRouter(t *testing.T, a, b []*batchFake) (*Router, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	meta := freshMeta(t, "hb_meta_batch_")
	addrs := func(fs []*batchFake) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.addr())
		}
		return out
	}
	if _, err := topology.Init(ctx, meta, []topology.Set{
		{Name: "a", Servers: addrs(a), MySQLDSN: "-"}, {Name: "b", Servers: addrs(b), MySQLDSN: "-"},
	}); err != nil {
		t.Fatal(err)
	}
	w, err := topology.NewWatcher(ctx, meta, time.Hour, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Deps{Topology: w, Health: NewHealth(http.DefaultClient, time.Second, zap.NewNop()),
		Internal: api.NewInternal(batchSecret, time.Now), Client: testClient(t), Now: time.Now, Log: zap.NewNop(),
		Timeout: 5 * time.Second, Coalescing: Coalescing{Batch: 16, InFlight: 1}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return rt, meta
}

// testClient is a keep-alive client like NewClient's, with the default
// dial timeout (30 s) instead of its 1 s: on a machine loaded by other
// work, loopback dials take longer, and these tests are not about dials.
func testClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// openConcurrently forwards n opens of packets at once, user i opening
// ids[i%len(ids)], and returns their answers (body, or error text).
func openConcurrently(rt *Router, ids []hongbao.PacketID, n int) []string {
	out := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := ids[i%len(ids)]
			r := httptest.NewRequest(http.MethodPost, "/v1/packets/"+id.String()+"/open", nil)
			resp, err := rt.forward(r, hongbao.UserID(i+1), id, nil, nil)
			switch {
			case err != nil:
				out[i] = "error: " + err.Error()
			default:
				out[i] = fmt.Sprintf("%d %s", resp.status, resp.body)
			}
		})
	}
	wg.Wait()
	return out
}

// idsRankedFirst returns packet IDs of SET a's bucket 7 whose first server
// is first.
func idsRankedFirst(t *testing.T, rt *Router, first string, n int) []hongbao.PacketID {
	var ids []hongbao.PacketID
	for seq := 1; len(ids) < n && seq < 4096; seq++ {
		id, err := hongbao.NewPacketID(time.Now(), 7, seq)
		if err != nil {
			t.Fatal(err)
		}
		if _, servers := Route(rt.topo.Current(), id, nil); servers[0] == first {
			ids = append(ids, id)
		}
	}
	if len(ids) < n {
		t.Fatalf("%d packet IDs rank %s first", len(ids), first)
	}
	return ids
}

// TestBatchServerFailsMidBatch: when the first server of a packet fails a
// batch (killed after reading it, or a truncated answer), no sub-request
// is answered from it: each is retried on the SET's next server, as a
// failed single exchange would be, so no client hears "opened" for a
// share the failed server may not have written.
func TestBatchServerFailsMidBatch(t *testing.T) {
	for _, mode := range []batchMode{killMidway, truncate} {
		t.Run(fmt.Sprint(map[batchMode]string{killMidway: "killed", truncate: "truncated"}[mode]), func(t *testing.T) {
			a1 := newBatchFake(t, "a1", opened("a1"))
			a2 := newBatchFake(t, "a2", opened("a2"))
			b1 := newBatchFake(t, "b1", opened("b1"))
			a1.mode.Store(int32(mode))
			rt, _ := batchRouter(t, []*batchFake{a1, a2}, []*batchFake{b1})
			ids := idsRankedFirst(t, rt, a1.addr(), 4)
			const n = 200
			answers := openConcurrently(rt, ids, n)
			for i, a := range answers {
				if !strings.HasPrefix(a, "200 ") || !strings.Contains(a, `"server":"a2"`) || !strings.Contains(a, fmt.Sprintf(`"user":"%d"`, i+1)) {
					t.Errorf("user %d: %s; want opened by a2, the next server", i+1, a)
				}
			}
			if a1.items.Load() == 0 || a2.items.Load() != n || a2.batches.Load() >= n {
				t.Errorf("a1 got %d items; a2 %d items in %d batches; want a1 some, a2 all %d in fewer batches",
					a1.items.Load(), a2.items.Load(), a2.batches.Load(), n)
			}
		})
	}
}

// TestBatchFollowsASwitch: opens coalesced into batches during a bucket's
// switch: SET a answers every sub-request 421 until the move is published,
// and every open is retried on SET b within the switch window.
func TestBatchFollowsASwitch(t *testing.T) {
	const bucket = hongbao.Bucket(7)
	var moved atomic.Bool
	a1 := newBatchFake(t, "a1", func(it api.BatchItem) (int, string) {
		return 421, `{"status":421,"code":"wrong_set"}`
	})
	b1 := newBatchFake(t, "b1", func(it api.BatchItem) (int, string) {
		if !moved.Load() {
			return 421, `{"status":421,"code":"wrong_set"}`
		}
		return opened("b1")(it)
	})
	rt, meta := batchRouter(t, []*batchFake{a1}, []*batchFake{b1})
	var ids []hongbao.PacketID
	for seq := range 8 {
		id, err := hongbao.NewPacketID(time.Now(), bucket, seq+1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	const n = 150
	// The switch once SET a refused every open (however long a loaded
	// machine takes to send them), and room to follow it.
	rt.switchWindow = 30 * time.Second
	go func() {
		for deadline := time.Now().Add(30 * time.Second); a1.items.Load() < n && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := topology.MoveBucket(context.Background(), meta, bucket, "b"); err != nil {
			t.Error(err)
		}
		moved.Store(true)
	}()
	for i, a := range openConcurrently(rt, ids, n) {
		if !strings.HasPrefix(a, "200 ") || !strings.Contains(a, `"server":"b1"`) {
			t.Errorf("user %d: %s; want opened by SET b after the switch", i+1, a)
		}
	}
	if a1.items.Load() < n || a1.batches.Load() >= a1.items.Load() {
		t.Errorf("SET a: %d sub-requests in %d batches; want every open refused there, in batches", a1.items.Load(), a1.batches.Load())
	}
}

// TestBatchFallsBackToSingle: a server without the batch endpoint (older
// than its router) is sent single requests, and answers them.
func TestBatchFallsBackToSingle(t *testing.T) {
	a1 := newBatchFake(t, "a1", opened("a1"))
	a1.mode.Store(int32(noEndpoint))
	b1 := newBatchFake(t, "b1", opened("b1"))
	rt, _ := batchRouter(t, []*batchFake{a1}, []*batchFake{b1})
	ids := idsRankedFirst(t, rt, a1.addr(), 2)
	for i, a := range openConcurrently(rt, ids, 30) {
		if !strings.HasPrefix(a, "200 ") || !strings.Contains(a, `"server":"a1"`) {
			t.Errorf("open %d: %s", i, a)
		}
	}
	if a1.singles.Load() != 30 {
		t.Errorf("%d single requests, want 30", a1.singles.Load())
	}
}

// TestBatchRefusedWhole: a batch refused as a whole (here: busy) gives
// every sub-request that answer with its Retry-After, as if each had been
// refused alone.
func TestBatchRefusedWhole(t *testing.T) {
	a1 := newBatchFake(t, "a1", opened("a1"))
	b1 := newBatchFake(t, "b1", opened("b1"))
	rt, _ := batchRouter(t, []*batchFake{a1}, []*batchFake{b1})
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteProblem(w, hongbao.ErrBusy, "")
	}))
	defer busy.Close()
	r := httptest.NewRequest(http.MethodPost, "/v1/ping", nil)
	resp, err := rt.tryBatched(r, strings.TrimPrefix(busy.URL, "http://"), 9, nil, nil)
	if err != nil || resp.status != http.StatusServiceUnavailable || resp.code != "busy" || resp.header.Get("Retry-After") == "" {
		t.Fatalf("answer %+v, %v; want 503 busy with Retry-After", resp, err)
	}
	var buf bytes.Buffer
	buf.Write(resp.body)
	if !strings.Contains(buf.String(), `"busy"`) {
		t.Fatalf("body %s", buf.String())
	}
}
