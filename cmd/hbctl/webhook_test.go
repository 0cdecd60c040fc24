package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api/webhook"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/webhooks"
	"github.com/hongbao-dev/hongbao/store"
)

// TestWebhookReplayDelivers: on a real SET MySQL, an event kept as failed
// is listed by hbctl webhook list --state failed; hbctl webhook replay
// --id makes it pending again, due now with its attempts reset; the
// deliverer then POSTs it (signed) and removes it.
func TestWebhookReplayDelivers(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 4)
	set := dbtest.UniqueName("wh")
	bucket := hongbao.Bucket(rand.IntN(hongbao.Buckets))
	dbtest.Own(t, db, set, []hongbao.Bucket{bucket})
	st := store.New(db, set, dbtest.Shanghai(t), time.Now, rand.Int64N).WithEvents()
	id, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Req: hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Fixed},
		Expiry: time.Hour, Funding: hongbao.Funded}); err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(ctx, store.EventFilter{Packet: id})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events of %s: %v %v", id, evs, err)
	}
	ev := evs[0]
	ev.Attempts, ev.Failed, ev.LastError, ev.NextAt = 17, true, "endpoint answered 503", time.Now().Add(time.Hour)
	if err := st.EventRetry(ctx, ev); err != nil {
		t.Fatal(err)
	}

	cfg := setConfig(t, set, dbtest.DSN(t, "a"))
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := cmdWebhook(ctx, &env{stdout: &out, stderr: &out}, append(args, "--config", cfg, "--set", set)); err != nil {
			t.Fatalf("hbctl webhook %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := run("list", "--state", "failed"); !regexp.MustCompile(ev.ID + `\s+failed\s+17\s.*endpoint answered 503`).MatchString(out) {
		t.Fatalf("list --state failed:\n%s", out)
	}
	if out := run("replay", "--id", ev.ID); !strings.Contains(out, "SET "+set+": 1 failed events pending again") {
		t.Fatalf("replay: %q", out)
	}
	if out := run("list", "--state", "failed"); strings.Contains(out, ev.ID) {
		t.Fatalf("still failed after the replay:\n%s", out)
	}
	if out := run("list", "--state", "pending"); !regexp.MustCompile(ev.ID + `\s+pending\s+0\s`).MatchString(out) {
		t.Fatalf("not pending with 0 attempts after the replay:\n%s", out)
	}

	var mu sync.Mutex
	var got []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte("replay-test-secret-0123"), r.Header.Get(webhook.Header), b, time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer recv.Close()
	d := webhooks.New(st, recv.Client(), []string{recv.URL}, []byte("replay-test-secret-0123"), time.Now, zaptest.NewLogger(t))
	if n, err := d.Round(ctx); err != nil || n != 1 {
		t.Fatalf("delivery round: %d events, %v; want 1", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], `"id":"`+ev.ID+`"`) || !strings.Contains(got[0], `"total":300`) {
		t.Fatalf("received %v, want the replayed %s", got, ev.ID)
	}
	if left, err := st.Events(ctx, store.EventFilter{Packet: id}); err != nil || len(left) != 0 {
		t.Fatalf("events left after delivery: %v %v", left, err)
	}
}

// setConfig writes a configuration (configs/dev.yaml's settings, without
// its meta database, core group and SETs) naming one SET, set, on the
// MySQL at dsn, and returns its path.
func setConfig(t *testing.T, set, dsn string) string {
	t.Helper()
	raw := regexp.MustCompile(`(?m)^meta_dsn:.*$`).ReplaceAll(devConfig(t), nil)
	raw = append(raw, fmt.Sprintf("\nsets:\n  - name: %s\n    servers: [127.0.0.1:1]\n    mysql_dsn: %q\n    memcached: [127.0.0.1:1]\n", set, dsn)...)
	path := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// devConfig returns configs/dev.yaml up to its core group (so without its
// core group, replication settings and SETs).
func devConfig(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../configs/dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte("core:\n  replicas:"))
	if i < 0 {
		t.Fatal("configs/dev.yaml has no core section")
	}
	return raw[:i:i]
}
