package hongbao

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// seqIntn returns the given draws in order: golden tests fix every draw.
func seqIntn(t *testing.T, draws ...int64) func(int64) int64 {
	t.Helper()
	return func(n int64) int64 {
		if len(draws) == 0 {
			t.Fatalf("intn(%d) called more often than the test allows", n)
		}
		d := draws[0]
		draws = draws[1:]
		if d >= n {
			t.Fatalf("draw %d out of [0, %d)", d, n)
		}
		return d
	}
}

// outcomeString renders an outcome for golden comparison.
func outcomeString(o Outcome) string {
	if o.Err != nil {
		var e *Error
		if errors.As(o.Err, &e) {
			return e.Code
		}
		return o.Err.Error()
	}
	return fmt.Sprintf("%s %s %d", o.Result.User, o.Result.Status, o.Result.Amount)
}

func TestDrawOpensGolden(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	live := now.Add(time.Hour)
	tests := []struct {
		name     string
		p        Packet
		have     map[UserID]int64
		users    []UserID
		draws    []int64
		want     []string
		wantLeft [2]int64 // remaining amount, count after
		wantRecs []Record
	}{{
		name: "random: two draws, the last share takes the rest",
		p:    Packet{Type: Random, Total: 1000, Count: 3, RemainingAmount: 1000, RemainingCount: 3, ExpiresAt: live, Funding: Funded},
		// 2*1000/3 = 666: 1+intn(665); then 2*(1000-100)/2 = 900: 1+intn(899); the last takes the rest.
		users: []UserID{7, 8, 9}, draws: []int64{99, 499},
		want:     []string{"7 opened 100", "8 opened 500", "9 opened 400"},
		wantLeft: [2]int64{0, 0},
		wantRecs: []Record{{User: 7, Amount: 100, At: now, Seq: 1}, {User: 8, Amount: 500, At: now, Seq: 2}, {User: 9, Amount: 400, At: now, Seq: 3}},
	}, {
		name:  "a repeated user gets its share back, not a second one; then sold out",
		p:     Packet{Type: Fixed, Total: 300, Count: 3, RemainingAmount: 200, RemainingCount: 2, ExpiresAt: live, Funding: Funded},
		have:  map[UserID]int64{5: 100},
		users: []UserID{5, 6, 6, 7, 8},
		want:  []string{"5 already_opened 100", "6 opened 100", "6 already_opened 100", "7 opened 100", "sold_out"},
		// A fixed packet draws nothing at random.
		wantLeft: [2]int64{0, 0},
		wantRecs: []Record{{User: 6, Amount: 100, At: now, Seq: 2}, {User: 7, Amount: 100, At: now, Seq: 3}},
	}, {
		name:     "expired: an opener keeps its share, a newcomer is refused",
		p:        Packet{Type: Random, Total: 500, Count: 5, RemainingAmount: 400, RemainingCount: 4, ExpiresAt: now, Funding: Funded},
		have:     map[UserID]int64{1: 100},
		users:    []UserID{2, 1},
		want:     []string{"expired", "1 already_opened 100"},
		wantLeft: [2]int64{400, 4},
	}, {
		name:     "closed by the settler: expired",
		p:        Packet{Type: Random, Total: 500, Count: 5, RemainingAmount: 500, RemainingCount: 5, ExpiresAt: live, Closed: true, Funding: Funded},
		users:    []UserID{2},
		want:     []string{"expired"},
		wantLeft: [2]int64{500, 5},
	}, {
		name:     "one fen per share: every draw is 1",
		p:        Packet{Type: Random, Total: 2, Count: 2, RemainingAmount: 2, RemainingCount: 2, ExpiresAt: live, Funding: Funded},
		users:    []UserID{3, 4},
		draws:    []int64{0}, // 2*2/2 = 2: 1+intn(1)
		want:     []string{"3 opened 1", "4 opened 1"},
		wantLeft: [2]int64{0, 0},
		wantRecs: []Record{{User: 3, Amount: 1, At: now, Seq: 1}, {User: 4, Amount: 1, At: now, Seq: 2}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			have := map[UserID]int64{}
			for u, a := range tt.have {
				have[u] = a
			}
			out, recs := DrawOpens(&p, have, tt.users, now, seqIntn(t, tt.draws...))
			if len(out) != len(tt.want) {
				t.Fatalf("%d outcomes, want %d", len(out), len(tt.want))
			}
			for i, o := range out {
				if got := outcomeString(o); got != tt.want[i] {
					t.Errorf("outcome %d = %q, want %q", i, got, tt.want[i])
				}
			}
			if got := [2]int64{p.RemainingAmount, int64(p.RemainingCount)}; got != tt.wantLeft {
				t.Errorf("left (amount, count) = %v, want %v", got, tt.wantLeft)
			}
			if fmt.Sprint(recs) != fmt.Sprint(tt.wantRecs) {
				t.Errorf("records = %v, want %v", recs, tt.wantRecs)
			}
			// Money is conserved: what was drawn left the packet.
			var drawn int64
			for _, r := range recs {
				drawn += r.Amount
				if have[r.User] != r.Amount {
					t.Errorf("have[%s] = %d, want the drawn %d", r.User, have[r.User], r.Amount)
				}
			}
			if drawn != tt.p.RemainingAmount-p.RemainingAmount {
				t.Errorf("drawn %d fen, packet lost %d", drawn, tt.p.RemainingAmount-p.RemainingAmount)
			}
		})
	}
}

// TestDrawOpensAgreesWithSplit: opening a packet one user at a time through
// DrawOpens draws exactly Split's shares with the same randomness.
func TestDrawOpensAgreesWithSplit(t *testing.T) {
	for _, typ := range []Type{Random, Fixed} {
		for _, c := range []struct {
			total int64
			count int
		}{{1, 1}, {100, 100}, {1000, 7}, {20000, 100}, {99, 3}} {
			if typ == Fixed && c.total%int64(c.count) != 0 {
				continue
			}
			src := func(seed uint64) func(int64) int64 {
				x := seed
				return func(n int64) int64 { x = x*6364136223846793005 + 1442695040888963407; return int64(x>>33) % n }
			}
			want := Split(typ, c.total, c.count, src(42))
			p := Packet{Type: typ, Total: c.total, Count: c.count, RemainingAmount: c.total, RemainingCount: c.count,
				ExpiresAt: time.Now().Add(time.Hour), Funding: Funded}
			users := make([]UserID, c.count+1)
			for i := range users {
				users[i] = UserID(i + 1)
			}
			out, _ := DrawOpens(&p, map[UserID]int64{}, users, time.Now(), src(42))
			for i, w := range want {
				if out[i].Err != nil || out[i].Result.Amount != w {
					t.Fatalf("%s %d/%d: share %d = %v, want %d", typ, c.total, c.count, i, outcomeString(out[i]), w)
				}
			}
			if !errors.Is(out[c.count].Err, ErrSoldOut) {
				t.Errorf("%s %d/%d: open after the last share = %v, want sold_out", typ, c.total, c.count, outcomeString(out[c.count]))
			}
		}
	}
}

func TestSnapshotUsable(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	base := Packet{Count: 3, RemainingCount: 1, RemainingAmount: 50, ExpiresAt: now.Add(time.Minute), Funding: Funded}
	two := map[UserID]int64{1: 10, 2: 40}
	tests := []struct {
		name string
		k    *Snapshot
		want bool
	}{
		{"nil", nil, false},
		{"live, funded, every opener", &Snapshot{Packet: base, Openers: two}, true},
		{"an opener missing", &Snapshot{Packet: base, Openers: map[UserID]int64{1: 10}}, false},
		{"pending funding", &Snapshot{Packet: func() Packet { p := base; p.Funding = Pending; return p }(), Openers: two}, false},
		{"expired", &Snapshot{Packet: func() Packet { p := base; p.ExpiresAt = now; return p }(), Openers: two}, false},
		{"closed", &Snapshot{Packet: func() Packet { p := base; p.Closed = true; return p }(), Openers: two}, false},
		{"sold out", &Snapshot{Packet: func() Packet { p := base; p.RemainingCount = 0; return p }(), Openers: map[UserID]int64{1: 10, 2: 40, 3: 50}}, false},
	}
	for _, tt := range tests {
		if got := tt.k.Usable(now); got != tt.want {
			t.Errorf("%s: Usable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
