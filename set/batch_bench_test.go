package set_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkServerPing is the server's cost of a ping (the no-op behind
// the router), over real HTTP from this process: alone, one signed
// exchange each, against 64 sub-requests in one batch. ns/op and
// allocations are per ping, client side included.
func BenchmarkServerPing(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := h.do(request{method: http.MethodPost, path: "/v1/ping", user: 42}); r.Status != http.StatusOK {
				b.Fatal(r)
			}
		}
	})
	b.Run("batch64", func(b *testing.B) {
		items := make([]api.BatchItem, 64)
		for i := range items {
			items[i] = api.BatchItem{Method: http.MethodPost, Target: "/v1/ping", User: hongbao.UserID(42 + i), RequestID: "0123456789abcdef"}
		}
		raw := api.AppendBatch(nil, items)
		b.ReportAllocs()
		for i := 0; i < b.N; i += len(items) {
			req, err := http.NewRequest(http.MethodPost, h.url+api.BatchPath, bytes.NewReader(raw))
			if err != nil {
				b.Fatal(err)
			}
			h.auth.SignBatch(req, raw)
			resp, err := h.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("%d %v", resp.StatusCode, err)
			}
			if _, err := api.DecodeAnswers(body, len(items)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkServerOpenBatch is the server's cost of the opens of a hot
// packet as the router sends them: batches of 25 opens of one packet by
// new users, over real HTTP from this process, on one P as the dev
// cluster runs its servers, logging at info to a file. It reports this
// process's CPU (server and client; MySQL and memcached are other
// processes) per open.
func BenchmarkServerOpenBatch(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	lim := hongbao.DefaultLimits()
	lim.MaxCount = 1000
	h := newHarness(b, harnessOpts{Limits: lim, Log: fileLogger(b)})
	const per = 25
	var id hongbao.PacketID
	left := 0
	var cpu time.Duration
	opens := 0
	for b.Loop() {
		if left < per {
			id, left = h.mustSend(b, dbtest.FreshUser(), 8000, 400, "random"), 400
		}
		items := make([]api.BatchItem, per)
		for i, u := range distinctUsers(per) {
			items[i] = openItem(u, id)
		}
		raw := api.AppendBatch(nil, items)
		before := processCPU(b)
		answers := h.postBatch(b, raw, nil, true, per).Answers
		cpu += processCPU(b) - before
		left -= per
		opens += per
		for _, a := range answers {
			if a.Status != http.StatusOK {
				b.Fatalf("open: %d %s", a.Status, a.Body)
			}
		}
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(opens), "cpu-us/open")
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fileLogger is a logger as a benchmarked process's: JSON to a file,
// warnings and above, and the money lines at info (configs.MoneyCore).
func fileLogger(b *testing.B) *zap.Logger {
	f, err := os.Create(filepath.Join(b.TempDir(), "server.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(f), zapcore.InfoLevel)
	return zap.New(configs.MoneyCore(core, zapcore.WarnLevel))
}
