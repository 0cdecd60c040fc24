package face_test

// The dashboard's rebalance panel in the browser: a running rebalance
// journalled in the cluster's meta DB the way hbctl rebalance apply
// records it (no bucket really moves: none of its moves reaches the steps
// at which servers or routers act on the journal).

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/browsertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// journalRebalance records a running rebalance of 10 buckets from SET a
// to SET b, created 11 minutes ago and begun 10 minutes ago: 3 done and 1 published (freezes 180,
// 240, 310 and 205 ms), one each frozen, catching up and copying, one
// failed, two not begun. It returns the failed move's error.
func journalRebalance(t *testing.T, c *clustertest.Cluster) string {
	t.Helper()
	ctx := context.Background()
	meta, err := topology.OpenMeta(ctx, c.MetaDSN, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	clock := time.Now().Add(-10*time.Minute - 70*time.Second)
	j, err := topology.NewJournal(ctx, meta, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	planned := []int64{1200, 900, 1500, 700, 2000, 3000, 4000, 600, 1000, 800}
	var plan []topology.Move
	for i, rows := range planned {
		plan = append(plan, topology.Move{Bucket: hongbao.Bucket(100 + i), From: "a", To: "b", RowsPlanned: rows})
	}
	r, err := j.Create(ctx, "apply", 0, "even out a and b", plan)
	if err != nil {
		t.Fatal(err)
	}
	const failure = "verify: money checksum differs in db_07.t_1_23 (source 1,234,500 fen, target 1,234,400)"
	for i, s := range []struct {
		step     string
		copied   int64
		passes   int
		freezeMS int
	}{
		{topology.Done, 1200, 2, 180}, {topology.Done, 900, 1, 240}, {topology.Done, 1500, 3, 310},
		{topology.Published, 700, 1, 205}, {topology.Frozen, 2000, 3, 0}, {topology.CatchingUp, 3000, 2, 0},
		{topology.Copying, 800, 0, 0}, {topology.Failed, 600, 1, 0},
	} {
		clock = clock.Add(70 * time.Second)
		m := &r.Moves[i]
		m.Step, m.RowsCopied, m.Passes, m.FreezeMS = topology.Copying, 0, 0, 0
		if err := j.Record(ctx, m, 0); err != nil { // begun
			t.Fatal(err)
		}
		clock = clock.Add(5 * time.Second)
		m.Step, m.RowsCopied, m.Passes, m.FreezeMS = s.step, s.copied, s.passes, s.freezeMS
		if s.step == topology.Failed {
			m.Error = failure
		}
		if err := j.Record(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	return failure
}

// checkRebalance reads the rebalance panel and its KPI: the numbers of
// the rebalance journalRebalance recorded, and the moving buckets marked
// on the map.
func checkRebalance(t *testing.T, tab *browsertest.Tab, failure string) {
	t.Helper()
	got := browsertest.Wait[map[string]any](tab, `(() => {
		const q = (s) => document.querySelector(s)?.textContent.trim() || "";
		// A poll whose journal read overran its bound (a loaded host)
		// says "unknown" over the last numbers: wait for one that read it.
		if (q("#rb-buckets") === "" || q("#rb-state") === "" || document.querySelector("#rb-note.err")) return false;
		return {
			kpi: q("#rb-kpi"), state: q("#rb-state"), head: q("#rb-head"), buckets: q("#rb-buckets"), failed: q("#rb-failed-n"),
			rows: q("#rb-rows"), eta: q("#rb-eta"), freeze: q("#rb-freeze"), rate: q("#rb-rate"),
			steps: [...document.querySelectorAll("#rb-steps .step")].map((e) => e.dataset.step + "=" + e.querySelector("b").textContent).join(" "),
			inflight: [...document.querySelectorAll("#rb-inflight tbody tr")].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join("|")).join("; "),
			failedRows: [...document.querySelectorAll("#rb-failed tbody tr")].map((r) => r.dataset.bucket + ": " + r.cells[2].textContent).join("; "),
			mapInflight: [...document.querySelectorAll("#map i.inflight")].map((i) => i.title).join("; "),
			setStates: [...document.querySelectorAll(".set .set-state")].map((e) => e.textContent).join(","),
		};
	})()`)
	want := map[string]string{
		"kpi": "4 / 10", "state": "running", "buckets": "4 / 10", "failed": "1", "rows": "10,700 / 15,700",
		"freeze": "(4 buckets moved): p50 205 ms · p99 310 ms · max 310 ms",
		"steps":  "planned=2 copying=1 catching_up=1 frozen=1 published=1 done=3 failed=1",
		"inflight": "bucket 104|a → b|frozen|2,000 / 2,000; bucket 105|a → b|catching up|3,000 / 3,000; " +
			"bucket 106|a → b|copying|800 / 4,000",
		"failedRows": "107: " + failure,
		"mapInflight": "bucket 104 → SET a (moving to b: frozen); bucket 105 → SET a (moving to b: catching up); " +
			"bucket 106 → SET a (moving to b: copying)",
		"setStates": "active,active",
	}
	for k, w := range want {
		if g, _ := got[k].(string); g != w {
			t.Errorf("rebalance panel %s: %q, want %q", k, g, w)
		}
	}
	// Begun 10 minutes ago (and the seconds this test took since), 4 of
	// 10 buckets done and 1 failed: 0.4 buckets a minute, some 13 minutes
	// to go.
	if eta, _ := got["eta"].(string); !regexp.MustCompile(`^1[2-5] min$`).MatchString(eta) {
		t.Errorf("rebalance ETA %q, want some 13 min", eta)
	}
	if head, _ := got["head"].(string); !regexp.MustCompile(`^#\d+ · apply running · created 1[12] min ago · updated \d+ (s|min) ago · even out a and b$`).MatchString(head) {
		t.Errorf("rebalance heading %q", head)
	}
	if rate, _ := got["rate"].(string); !strings.HasPrefix(rate, "0.4 buckets/min, ") {
		t.Errorf("rebalance rate %q, want 0.4 buckets/min", rate)
	}
}
