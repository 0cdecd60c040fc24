package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

func TestBar(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	b := &Bar{W: &out, Now: func() time.Time { return now }}
	r := &topology.Rebalance{ID: 7}
	b.Event(move.Event{Kind: "start", Rebalance: r, Total: 10, Todo: 10})
	now = now.Add(10 * time.Second)
	b.Event(move.Event{Kind: "pass", Stats: migrate.Stats{Rows: 5000}})
	b.Event(move.Event{Kind: "moved", Move: topology.Move{FreezeMS: 120}})
	b.Event(move.Event{Kind: "moved", Move: topology.Move{FreezeMS: 300}})
	last := out.String()[strings.LastIndex(out.String(), "\r")+1:]
	want := "[######........................] 2/10 buckets  5000 rows  500 rows/s  ETA 40s  freeze p99 300 ms "
	if last != want {
		t.Errorf("bar:\n%q\nwant\n%q", last, want)
	}
}

func TestLines(t *testing.T) {
	var out strings.Builder
	l := &Lines{W: &out}
	r := &topology.Rebalance{ID: 3, State: topology.Finished, Moves: []topology.Move{
		{Step: topology.Done, FreezeMS: 100, RowsCopied: 10}, {Step: topology.Done, FreezeMS: 300, RowsCopied: 5}, {Step: topology.Failed}}}
	l.Event(move.Event{Kind: "moved", Rebalance: r, Move: topology.Move{Bucket: 12, From: "a", To: "c", Step: topology.Done,
		RowsCopied: 10, Passes: 2, FreezeMS: 100}, Took: 1500 * time.Millisecond})
	l.Event(move.Event{Kind: "done", Rebalance: r, Err: errors.New("boom")})
	want := `{"bucket":12,"event":"moved","freeze_ms":100,"from":"a","passes":2,"rebalance":3,"rows_copied":10,"step":"done","to":"c","took_ms":1500}
{"done":2,"error":"boom","event":"done","freeze_ms_max":300,"freeze_ms_p50":300,"freeze_ms_p99":300,"moves":3,"rebalance":3,"rows_copied":15,"state":"done"}
`
	if out.String() != want {
		t.Errorf("lines:\n%s\nwant\n%s", out.String(), want)
	}
}
