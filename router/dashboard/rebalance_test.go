package dashboard_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/router/dashboard"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// fabricated is a running rebalance of 12 buckets created at t0, its first
// move begun at t0+60s: 4 done and 2 published (the target serves 6), one
// each copying, catching up and frozen, one failed, two not begun (one read
// back from the journal as 1970-01-01, one as the zero time).
func fabricated(t0 time.Time) *topology.Rebalance {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mv := func(b int, step string, planned, copied int64, passes, freeze int, started, updated time.Time) topology.Move {
		return topology.Move{Rebalance: 7, Bucket: hongbao.Bucket(b), From: "a", To: "c", Step: step, RowsPlanned: planned,
			RowsCopied: copied, Passes: passes, FreezeMS: freeze, StartedAt: started, UpdatedAt: updated}
	}
	failed := mv(19, topology.Failed, 600, 600, 1, 0, at(300), at(320))
	failed.Error = "verify: money checksum differs in t_y_01"
	return &topology.Rebalance{ID: 7, Kind: "apply", State: topology.Running, Note: "3 SETs", CreatedAt: t0, UpdatedAt: t0,
		Moves: []topology.Move{
			mv(10, topology.Done, 1000, 1000, 2, 120, at(70), at(200)),
			mv(11, topology.Done, 2000, 2100, 3, 80, at(60), at(210)),
			mv(12, topology.Done, 500, 500, 1, 300, at(90), at(220)),
			mv(13, topology.Published, 100, 100, 1, 95, at(100), at(230)),
			mv(14, topology.Done, 400, 400, 1, 410, at(110), at(240)),
			mv(15, topology.Published, 700, 700, 2, 150, at(120), at(250)),
			mv(16, topology.Copying, 5000, 1200, 0, 0, at(500), at(655)),
			mv(17, topology.CatchingUp, 3000, 3000, 2, 0, at(400), at(650)),
			mv(18, topology.Frozen, 800, 800, 3, 0, at(450), at(640)),
			failed,
			mv(20, topology.Planned, 900, 0, 0, 0, time.Unix(0, 0).UTC(), t0),
			mv(21, topology.Planned, 900, 0, 0, 0, time.Time{}, t0),
		}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Progress of a fabricated rebalance: exact counts, the step counts in
// the steps' order, nearest-rank freeze percentiles of the 6 buckets the
// target serves, rates over the 600 s since the first move began, and the
// ETA of the 5 buckets left.
func TestProgress(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	p := dashboard.Progress(fabricated(t0), t0.Add(660*time.Second))
	if p.ID != 7 || p.Kind != "apply" || p.State != "running" || p.Note != "3 SETs" || !p.CreatedAt.Equal(t0) {
		t.Errorf("header: %+v", p)
	}
	if p.Buckets != 12 || p.BucketsDone != 6 || p.BucketsFailed != 1 || p.RowsPlanned != 15900 || p.RowsCopied != 10400 {
		t.Errorf("buckets %d done %d failed %d, rows %d / %d; want 12, 6, 1, 10400 / 15900",
			p.Buckets, p.BucketsDone, p.BucketsFailed, p.RowsCopied, p.RowsPlanned)
	}
	wantSteps := []dashboard.StepCount{{Step: "planned", Buckets: 2}, {Step: "copying", Buckets: 1}, {Step: "catching_up", Buckets: 1},
		{Step: "frozen", Buckets: 1}, {Step: "published", Buckets: 2}, {Step: "done", Buckets: 4}, {Step: "failed", Buckets: 1}}
	if !reflect.DeepEqual(p.Steps, wantSteps) {
		t.Errorf("steps %+v\nwant %+v", p.Steps, wantSteps)
	}
	if want := (dashboard.Freeze{Buckets: 6, P50MS: 120, P99MS: 410, MaxMS: 410}); p.Freeze != want {
		t.Errorf("freeze %+v, want %+v (of 80 95 120 150 300 410)", p.Freeze, want)
	}
	if len(p.InFlight) != 3 || p.InFlight[0].Bucket != 16 || p.InFlight[1].Bucket != 17 || p.InFlight[2].Bucket != 18 {
		t.Fatalf("in flight: %+v, want buckets 16, 17, 18", p.InFlight)
	}
	if m := p.InFlight[0]; m.From != "a" || m.To != "c" || m.Step != "copying" || m.RowsCopied != 1200 || m.RowsPlanned != 5000 ||
		m.StartedAt == nil || !m.StartedAt.Equal(t0.Add(500*time.Second)) {
		t.Errorf("bucket 16 in flight: %+v", m)
	}
	if m := p.InFlight[2]; m.Step != "frozen" || m.Passes != 3 {
		t.Errorf("bucket 18 in flight: %+v", m)
	}
	if len(p.Failed) != 1 || p.Failed[0].Bucket != 19 || p.Failed[0].Error != "verify: money checksum differs in t_y_01" {
		t.Errorf("failed: %+v", p.Failed)
	}
	if !p.UpdatedAt.Equal(t0.Add(655 * time.Second)) {
		t.Errorf("updated %v, want the latest move's, t0+655s", p.UpdatedAt)
	}
	if !near(p.ElapsedS, 600) || !near(p.BucketsPerMin, 0.6) || !near(p.RowsPerS, 10400.0/600) {
		t.Errorf("elapsed %v s, %v buckets/min, %v rows/s; want 600, 0.6, %v", p.ElapsedS, p.BucketsPerMin, p.RowsPerS, 10400.0/600)
	}
	if p.ETAS == nil || !near(*p.ETAS, 500) {
		t.Errorf("ETA %v, want 500 s (5 buckets left at 0.6 a minute)", p.ETAS)
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil || back["eta_s"] != 500.0 || back["buckets_done"] != 6.0 {
		t.Errorf("JSON %s: %v", js, err)
	}
}

// A finished rebalance has no ETA and its elapsed time ends at its last
// update; one not begun has no rate; the lists are capped, the counts not.
func TestProgressEnds(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	r := fabricated(t0)
	r.State = topology.Stopped
	p := dashboard.Progress(r, t0.Add(time.Hour))
	if p.ETAS != nil || !near(p.ElapsedS, 595) {
		t.Errorf("failed rebalance: ETA %v, elapsed %v; want none, 595 s (t0+60 to t0+655)", p.ETAS, p.ElapsedS)
	}

	var moves []topology.Move
	for b := range 40 {
		moves = append(moves, topology.Move{Bucket: hongbao.Bucket(b), Step: topology.Copying, StartedAt: t0})
	}
	p = dashboard.Progress(&topology.Rebalance{ID: 1, State: topology.Running, CreatedAt: t0, Moves: moves}, t0.Add(time.Minute))
	if len(p.InFlight) != 32 || !reflect.DeepEqual(p.Steps, []dashboard.StepCount{{Step: "copying", Buckets: 40}}) {
		t.Errorf("40 copying: %d listed, steps %+v; want 32 listed, 40 counted", len(p.InFlight), p.Steps)
	}
	if p.ETAS != nil || p.BucketsPerMin != 0 || p.Freeze != (dashboard.Freeze{}) {
		t.Errorf("nothing done yet: ETA %v, %v buckets/min, freeze %+v; want none", p.ETAS, p.BucketsPerMin, p.Freeze)
	}
	if dashboard.Progress(nil, t0) != nil {
		t.Error("Progress(nil) is not nil")
	}
}

// A meta DB that accepts connections and never answers: the status comes
// back in time, with the SETs and an error for the rebalance.
func TestRebalanceMetaDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept() // and silence: no MySQL greeting
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	meta, err := sqldb.Open("hongbao:hongbao@tcp("+ln.Addr().String()+")/hb_meta", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	m := topology.Spread(1, []topology.Set{{Name: "a"}, {Name: "b"}})
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 }, Meta: meta})
	start := time.Now()
	rec := httptest.NewRecorder()
	b.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard/status", nil))
	var st dashboard.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
		t.Fatalf("status: %d %v %s", rec.Code, err, rec.Body.String())
	}
	if took := time.Since(start); took > 5*time.Second { // the journal read gives up at 0.7 s; room for a loaded machine
		t.Errorf("the status took %v with the meta DB silent, want about 0.7 s", took)
	}
	if st.Rebalance != nil || st.RebalanceError == "" || len(st.Sets) != 2 || st.Sets[0].Buckets != 500 {
		t.Errorf("meta DB down: rebalance %+v, error %q, %d SETs; want none, an error, the 2 SETs", st.Rebalance, st.RebalanceError, len(st.Sets))
	}
	t.Logf("rebalance_error: %s", st.RebalanceError)
}

// freshMeta creates a meta database of its own on test SET a's MariaDB,
// dropped when the test ends.
func freshMeta(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_dash_meta_")
	db, err := topology.OpenMeta(context.Background(), cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE `" + cfg.DBName + "`")
		db.Close()
	})
	return db
}

// TestRebalanceJournal: a rebalance journalled in a real meta MariaDB (the
// way hbctl rebalance apply records it) is what /dashboard/status reports,
// and each SET's state comes from the topology.
func TestRebalanceJournal(t *testing.T) {
	ctx := context.Background()
	meta := freshMeta(t)
	if _, err := topology.Init(ctx, meta, []topology.Set{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.SetState(ctx, meta, "b", topology.Draining, 0); err != nil {
		t.Fatal(err)
	}
	m, err := topology.Load(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clock := t0
	now := func() time.Time { return clock }
	b := dashboard.New(dashboard.Deps{Topology: func() *topology.Map { return m }, Moves: func() int64 { return 0 }, Meta: meta, Now: now})
	h := b.Handler(http.NotFoundHandler())
	status := func() dashboard.Status {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard/status", nil))
		var st dashboard.Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
			t.Fatalf("status: %d %v %s", rec.Code, err, rec.Body.String())
		}
		return st
	}
	st := status()
	if st.Rebalance != nil || st.RebalanceNote != "no rebalance yet" || st.RebalanceError != "" {
		t.Errorf("empty journal: %+v, note %q, error %q; want none, \"no rebalance yet\"", st.Rebalance, st.RebalanceNote, st.RebalanceError)
	}
	if st.Sets[0].State != "active" || st.Sets[1].State != "draining" || st.Sets[1].Buckets != 500 || st.Sets[0].Weight != 1 {
		t.Errorf("SETs: %+v", st.Sets)
	}

	j, err := topology.NewJournal(ctx, meta, now)
	if err != nil {
		t.Fatal(err)
	}
	var plan []topology.Move
	for i, bk := range []int{500, 501, 502, 503} {
		plan = append(plan, topology.Move{Bucket: hongbao.Bucket(bk), From: "b", To: "a", RowsPlanned: int64(100 * (i + 1))})
	}
	r, err := j.Create(ctx, "drain", 0, "drain b", plan)
	if err != nil {
		t.Fatal(err)
	}
	record := func(s int, i int, step string, copied int64, passes, freeze int) {
		t.Helper()
		clock = t0.Add(time.Duration(s) * time.Second)
		mv := &r.Moves[i]
		mv.Step, mv.RowsCopied, mv.Passes, mv.FreezeMS = step, copied, passes, freeze
		if err := j.Record(ctx, mv, 0); err != nil {
			t.Fatal(err)
		}
	}
	record(10, 0, topology.Copying, 0, 0, 0)
	record(30, 0, topology.Done, 100, 2, 40)
	record(40, 1, topology.Published, 200, 1, 60)
	record(50, 2, topology.CatchingUp, 150, 1, 0)
	clock = t0.Add(70 * time.Second)

	st = status()
	p := st.Rebalance
	if p == nil {
		t.Fatalf("no rebalance reported: note %q, error %q", st.RebalanceNote, st.RebalanceError)
	}
	if p.ID != r.ID || p.Kind != "drain" || p.State != "running" || p.Note != "drain b" || !p.CreatedAt.Equal(t0) || !p.UpdatedAt.Equal(t0.Add(50*time.Second)) {
		t.Errorf("rebalance %d %s %s %q created %v updated %v; want %d drain running, t0, t0+50s", p.ID, p.Kind, p.State, p.Note, p.CreatedAt, p.UpdatedAt, r.ID)
	}
	if p.Buckets != 4 || p.BucketsDone != 2 || p.BucketsFailed != 0 || p.RowsPlanned != 1000 || p.RowsCopied != 450 {
		t.Errorf("buckets %d/%d failed %d rows %d/%d; want 2/4, 0, 450/1000", p.BucketsDone, p.Buckets, p.BucketsFailed, p.RowsCopied, p.RowsPlanned)
	}
	wantSteps := []dashboard.StepCount{{Step: "planned", Buckets: 1}, {Step: "catching_up", Buckets: 1}, {Step: "published", Buckets: 1}, {Step: "done", Buckets: 1}}
	if !reflect.DeepEqual(p.Steps, wantSteps) {
		t.Errorf("steps %+v, want %+v", p.Steps, wantSteps)
	}
	if p.Freeze != (dashboard.Freeze{Buckets: 2, P50MS: 40, P99MS: 60, MaxMS: 60}) {
		t.Errorf("freeze %+v, want p50 40, p99 60, max 60 of 2", p.Freeze)
	}
	if len(p.InFlight) != 1 || p.InFlight[0].Bucket != 502 || p.InFlight[0].From != "b" || p.InFlight[0].To != "a" ||
		p.InFlight[0].Step != "catching_up" || p.InFlight[0].RowsCopied != 150 || p.InFlight[0].RowsPlanned != 300 ||
		p.InFlight[0].StartedAt == nil || !p.InFlight[0].StartedAt.Equal(t0.Add(50*time.Second)) {
		t.Errorf("in flight: %+v, want bucket 502 b -> a catching up, 150 of 300 rows, begun at t0+50s", p.InFlight)
	}
	// Begun at t0+10s (bucket 500's first step), 60 s ago: 2 buckets a
	// minute, 7.5 rows a second, 2 buckets left.
	if !near(p.ElapsedS, 60) || !near(p.BucketsPerMin, 2) || !near(p.RowsPerS, 7.5) || p.ETAS == nil || !near(*p.ETAS, 60) {
		t.Errorf("elapsed %v, %v buckets/min, %v rows/s, ETA %v; want 60, 2, 7.5, 60", p.ElapsedS, p.BucketsPerMin, p.RowsPerS, p.ETAS)
	}

	// It fails: the next status says so, with the move's error.
	clock = t0.Add(80 * time.Second)
	mv := &r.Moves[2]
	mv.Step, mv.Error = topology.Failed, "verify: rows differ in db_02.t_1_05"
	if err := j.Record(ctx, mv, 0); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(ctx, r.ID, topology.Stopped, ""); err != nil {
		t.Fatal(err)
	}
	clock = t0.Add(90 * time.Second)
	p = status().Rebalance
	if p == nil || p.State != "failed" || p.BucketsFailed != 1 || len(p.Failed) != 1 || p.Failed[0].Error != mv.Error || p.ETAS != nil || len(p.InFlight) != 0 {
		t.Errorf("after the failure: %+v", p)
	}
}
