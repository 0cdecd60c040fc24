package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestPackShares: a packed row's shares read back as the credits packed,
// each under its ledger key, and its sum is theirs.
func TestPackShares(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	recs := []hongbao.Record{{User: 42, Amount: 1}, {User: 1 << 62, Amount: 99_999_999}, {User: 7, Amount: 300}}
	b, sum := packShares(nil, recs)
	if string(b) != "42:1,4611686018427387904:99999999,7:300" || sum != 100_000_300 {
		t.Fatalf("packShares = %q, %d", b, sum)
	}
	const p hongbao.PacketID = 385357294615822336
	es, err := unpackShares(p, at, string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []hongbao.Entry{
		{Key: "open:385357294615822336:42", User: 42, Amount: 1, Kind: hongbao.KindOpen, Packet: p, At: at},
		{Key: "open:385357294615822336:4611686018427387904", User: 1 << 62, Amount: 99_999_999, Kind: hongbao.KindOpen, Packet: p, At: at},
		{Key: "open:385357294615822336:7", User: 7, Amount: 300, Kind: hongbao.KindOpen, Packet: p, At: at},
	}
	if !slices.Equal(es, want) {
		t.Errorf("unpackShares = %+v, want %+v", es, want)
	}
}

// TestUnpackSharesRefuses: what open transactions never write is an error,
// never a credit.
func TestUnpackSharesRefuses(t *testing.T) {
	for _, s := range []string{"", "1", "1:", ":1", "1:0", "0:5", "-1:5", "1:-5", "1:2,", ",1:2", "1:2,,3:4", "a:b", "1:2:3",
		"99999999999999999999:1", "1:99999999999999999999", "1 :2", "1:2 "} {
		if es, err := unpackShares(1, time.Time{}, s); err == nil {
			t.Errorf("unpackShares(%q) = %+v, want an error", s, es)
		}
	}
}

// TestOutboxRowEntries: a packed row whose shares do not add up to its
// amount or count, or that is not a credit of opens, is an error naming
// the row.
func TestOutboxRowEntries(t *testing.T) {
	row := func(kind string, amount int64, n int, shares string) *outboxRow {
		r := &outboxRow{id: 9, entry: hongbao.Entry{Key: "opens:5:1", Kind: kind, Amount: amount, Packet: 5}, n: n}
		r.shares.String, r.shares.Valid = shares, true
		return r
	}
	if es, err := row(hongbao.KindOpen, 5, 2, "1:2,3:3").entries(); err != nil || len(es) != 2 {
		t.Errorf("a good packed row: %+v, %v", es, err)
	}
	for _, r := range []*outboxRow{row(hongbao.KindOpen, 6, 2, "1:2,3:3"), row(hongbao.KindRefund, 5, 2, "1:2,3:3"),
		row(hongbao.KindOpen, 5, 3, "1:2,3:3"), row(hongbao.KindOpen, 5, 2, "1:2;3:3")} {
		if es, err := r.entries(); err == nil || !strings.Contains(err.Error(), "outbox row 9") {
			t.Errorf("row %+v: %+v, %v; want an error naming row 9", r, es, err)
		}
	}
	single := &outboxRow{id: 3, entry: hongbao.Entry{Key: "refund:5", Kind: hongbao.KindRefund, Amount: 40, User: 8, Packet: 5}, n: 1}
	if es, err := single.entries(); err != nil || len(es) != 1 || es[0] != single.entry {
		t.Errorf("a row of one entry: %+v, %v", es, err)
	}
}

// FuzzUnpackShares: whatever a packed row holds, it reads as credits of
// positive users and amounts under their ledger keys, which pack back to
// what reads the same, or as an error.
func FuzzUnpackShares(f *testing.F) {
	for _, s := range []string{"1:2", "42:1,7:300", "1:2,", "+1:2", "01:2", "1:2,3:4,5:6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := unpackShares(77, time.Time{}, s)
		if err != nil {
			return
		}
		recs := make([]hongbao.Record, len(es))
		for i, e := range es {
			if e.User <= 0 || e.Amount <= 0 || e.Key != hongbao.OpenKey(77, e.User) || e.Kind != hongbao.KindOpen || e.Packet != 77 {
				t.Fatalf("unpackShares(%q): entry %+v", s, e)
			}
			recs[i] = hongbao.Record{User: e.User, Amount: e.Amount}
		}
		b, _ := packShares(nil, recs)
		again, err := unpackShares(77, time.Time{}, string(b))
		if err != nil || !slices.Equal(again, es) {
			t.Fatalf("unpackShares(%q) = %+v; packed again %q reads %+v, %v", s, es, b, again, err)
		}
	})
}
