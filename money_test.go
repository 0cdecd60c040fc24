package hongbao

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkRandomSplit checks the double-mean invariants of a random split:
// every share >= 1, draw i < 2*remaining_i/remaining_count_i (integer
// division, the exclusive upper bound of DESIGN.md) except the last, which
// takes the rest exactly, and the shares sum to total.
func checkRandomSplit(t *testing.T, total int64, count int, shares []int64) {
	t.Helper()
	if len(shares) != count {
		t.Fatalf("Split(%d, %d): %d shares, want %d", total, count, len(shares), count)
	}
	remaining := total
	for i, s := range shares {
		left := int64(count - i)
		if s < 1 {
			t.Fatalf("Split(%d, %d): share %d = %d, below 1 fen", total, count, i, s)
		}
		if left == 1 {
			if s != remaining {
				t.Fatalf("Split(%d, %d): last share = %d, want the rest %d", total, count, s, remaining)
			}
		} else if upper := 2 * remaining / left; s >= upper {
			t.Fatalf("Split(%d, %d): share %d = %d, not below 2*%d/%d = %d", total, count, i, s, remaining, left, upper)
		}
		// Enough must remain for every later share to get 1 fen.
		if remaining-s < left-1 {
			t.Fatalf("Split(%d, %d): share %d = %d leaves %d fen for %d shares", total, count, i, s, remaining-s, left-1)
		}
		remaining -= s
	}
	if remaining != 0 {
		t.Fatalf("Split(%d, %d): shares sum to %d, want %d", total, count, total-remaining, total)
	}
}

func checkFixedSplit(t *testing.T, total int64, count int, shares []int64) {
	t.Helper()
	if len(shares) != count {
		t.Fatalf("Split(Fixed, %d, %d): %d shares", total, count, len(shares))
	}
	for i, s := range shares {
		if s != total/int64(count) {
			t.Fatalf("Split(Fixed, %d, %d): share %d = %d, want %d", total, count, i, s, total/int64(count))
		}
	}
}

type splitCase struct {
	total int64
	count int
}

func splitCases() []splitCase {
	return []splitCase{
		{1, 1}, {2, 1}, {20000, 1},
		{2, 2}, {3, 2}, {100, 100}, {101, 100}, {199, 100}, {200, 100},
		{1000, 10}, {10000, 10}, {20000, 100}, {19999, 100}, {20000, 99},
		{2_000_000, 20_000}, {20_000, 20_000}, {2_000_000, 1}, {1 << 40, 1000},
	}
}

func TestSplitRandomProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(0x5eed, 0xf00d))
	cases := splitCases()
	// Plus random (total, count) pairs across the valid range.
	for range 300 {
		count := 1 + r.IntN(200)
		total := int64(count) + r.Int64N(30000)
		cases = append(cases, splitCase{total, count})
	}
	for _, c := range cases {
		reps := 200
		if c.count > 1000 {
			reps = 3
		}
		for range reps {
			checkRandomSplit(t, c.total, c.count, Split(Random, c.total, c.count, r.Int64N))
		}
	}
}

// TestSplitRandomExtremeDraws drives Draw with the smallest and the largest
// values intn may return, the edges of the bound checks.
func TestSplitRandomExtremeDraws(t *testing.T) {
	lowest := func(n int64) int64 { return 0 }
	highest := func(n int64) int64 { return n - 1 }
	for _, c := range splitCases() {
		low := Split(Random, c.total, c.count, lowest)
		checkRandomSplit(t, c.total, c.count, low)
		for i, s := range low[:c.count-1] {
			if s != 1 {
				t.Fatalf("Split(%d, %d) with intn=0: share %d = %d, want 1", c.total, c.count, i, s)
			}
		}
		checkRandomSplit(t, c.total, c.count, Split(Random, c.total, c.count, highest))
	}
	// With the highest draws: 1000/5: upper 400 -> 399, then 601*2/4=300 -> 299, ...
	got := Split(Random, 1000, 5, highest)
	want := []int64{399, 299, 200, 101, 1}
	if !slices.Equal(got, want) {
		t.Errorf("Split(Random, 1000, 5, highest) = %v, want %v", got, want)
	}
}

func TestSplitFixed(t *testing.T) {
	never := func(n int64) int64 { panic("fixed split must not draw") }
	for _, c := range []splitCase{{1, 1}, {100, 100}, {1000, 10}, {20000, 100}, {2_000_000, 20_000}, {20000, 1}, {300, 3}} {
		checkFixedSplit(t, c.total, c.count, Split(Fixed, c.total, c.count, never))
	}
}

func TestDrawPanicsOnBrokenInvariant(t *testing.T) {
	for _, c := range []splitCase{{0, 1}, {1, 2}, {5, 0}, {5, -1}, {-1, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Draw(%d, %d) did not panic", c.total, c.count)
				}
			}()
			Draw(Random, c.total, c.count, rand.Int64N)
		}()
	}
}

func TestSplitRandomMeanPerPosition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const total, count, packets = 10000, 10, 10000
	var sums [count]int64
	for range packets {
		for i, s := range Split(Random, total, count, r.Int64N) {
			sums[i] += s
		}
	}
	const mean = total / count
	for i, s := range sums {
		got := float64(s) / packets
		if got < mean*0.97 || got > mean*1.03 {
			t.Errorf("position %d: mean share %.1f fen, want within 3%% of %d", i, got, mean)
		}
	}
}

// TestSplitGolden pins the draw sequence for a seed, so a change to Draw
// (which would make the store's one-at-a-time draws disagree with
// recorded expectations) shows up.
func TestSplitGolden(t *testing.T) {
	tests := []struct {
		s1, s2 uint64
		total  int64
		count  int
		want   []int64
	}{
		{1, 2, 1000, 5, []int64{307, 213, 251, 182, 47}},
		{20240101, 88, 20000, 10, []int64{1444, 3380, 2257, 1075, 379, 2032, 2588, 130, 1256, 5459}},
	}
	for _, tt := range tests {
		r := rand.New(rand.NewPCG(tt.s1, tt.s2))
		got := Split(Random, tt.total, tt.count, r.Int64N)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Split(Random, %d, %d, seed %d/%d) = %v, want %v", tt.total, tt.count, tt.s1, tt.s2, got, tt.want)
		}
	}
}

// TestDrawAgreesWithSplit: the store draws one share at a time with Draw;
// Split is the reference. Same source, same shares.
func TestDrawAgreesWithSplit(t *testing.T) {
	for _, c := range splitCases()[:14] {
		want := Split(Random, c.total, c.count, rand.New(rand.NewPCG(3, 4)).Int64N)
		r := rand.New(rand.NewPCG(3, 4))
		remaining := c.total
		for i := range c.count {
			s := Draw(Random, remaining, c.count-i, r.Int64N)
			if s != want[i] {
				t.Fatalf("(%d,%d) share %d: Draw = %d, Split = %d", c.total, c.count, i, s, want[i])
			}
			remaining -= s
		}
	}
}

func TestTypeValid(t *testing.T) {
	for _, tt := range []struct {
		t    Type
		want bool
	}{{Random, true}, {Fixed, true}, {"", false}, {"Random", false}, {"lucky", false}} {
		if got := tt.t.Valid(); got != tt.want {
			t.Errorf("Type(%q).Valid() = %v, want %v", tt.t, got, tt.want)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	want := Limits{MaxTotal: 20000, MaxCount: 100, MaxShare: 20000, Expiry: 24 * time.Hour, MaxGreeting: 200, MaxAudience: 500}
	if got := DefaultLimits(); got != want {
		t.Errorf("DefaultLimits() = %+v, want %+v", got, want)
	}
}

func TestLimitsValidate(t *testing.T) {
	def := DefaultLimits()
	// An operator's activity limits: red packet rain with a share cap.
	activity := Limits{MaxTotal: 2_000_000, MaxCount: 20_000, MaxShare: 5000, Expiry: time.Hour, MaxGreeting: 10}
	noShareCap := Limits{MaxTotal: 20000, MaxCount: 100, MaxShare: 0, MaxGreeting: 200}
	tests := []struct {
		name  string
		l     Limits
		r     SendRequest
		code  string // "": valid
		field string
	}{
		{"random ok", def, SendRequest{1000, 10, Random, "恭喜发财", nil}, "", ""},
		{"fixed ok", def, SendRequest{1000, 10, Fixed, "", nil}, "", ""},
		{"max total and count", def, SendRequest{20000, 100, Random, "", nil}, "", ""},
		{"count == total", def, SendRequest{100, 100, Random, "", nil}, "", ""},
		{"one share", def, SendRequest{1, 1, Fixed, "", nil}, "", ""},
		{"greeting at limit", def, SendRequest{100, 1, Random, strings.Repeat("a", 200), nil}, "", ""},
		{"activity ok", activity, SendRequest{2_000_000, 20_000, Fixed, "", nil}, "", ""},
		{"activity random ok", activity, SendRequest{20_000, 20_000, Random, "", nil}, "", ""},
		{"no share cap", noShareCap, SendRequest{20000, 2, Random, "", nil}, "", ""},

		{"empty type", def, SendRequest{1000, 10, "", "", nil}, "invalid_type", "type"},
		{"unknown type", def, SendRequest{1000, 10, "lucky", "", nil}, "invalid_type", "type"},
		{"type checked first", def, SendRequest{-1, -1, "x", "", nil}, "invalid_type", "type"},
		{"zero total", def, SendRequest{0, 10, Random, "", nil}, "invalid_total", "total"},
		{"negative total", def, SendRequest{-100, 10, Random, "", nil}, "invalid_total", "total"},
		{"zero count", def, SendRequest{1000, 0, Random, "", nil}, "invalid_count", "count"},
		{"negative count", def, SendRequest{1000, -1, Fixed, "", nil}, "invalid_count", "count"},
		{"total over limit", def, SendRequest{20001, 10, Random, "", nil}, "total_over_limit", "total"},
		{"count over limit", def, SendRequest{1000, 101, Random, "", nil}, "count_over_limit", "count"},
		{"activity count over", activity, SendRequest{2_000_000, 20_001, Random, "", nil}, "count_over_limit", "count"},
		{"total below count", def, SendRequest{99, 100, Random, "", nil}, "total_below_count", "total"},
		{"total below count fixed", def, SendRequest{1, 2, Fixed, "", nil}, "total_below_count", "total"},
		{"fixed not divisible", def, SendRequest{1001, 10, Fixed, "", nil}, "fixed_not_divisible", "total"},
		{"greeting too long", def, SendRequest{1000, 10, Random, strings.Repeat("a", 201), nil}, "greeting_too_long", "greeting"},
		// 67 three-byte runes: 201 bytes, 67 characters. The limit is bytes.
		{"greeting bytes not runes", def, SendRequest{1000, 10, Random, strings.Repeat("红", 67), nil}, "greeting_too_long", "greeting"},
		{"greeting with a NUL", def, SendRequest{1000, 10, Random, "恭喜\x00发财", nil}, "invalid_greeting", "greeting"},
		{"greeting with an escape", def, SendRequest{1000, 10, Random, "\x1b[2J", nil}, "invalid_greeting", "greeting"},
		{"greeting with a C1 control", def, SendRequest{1000, 10, Random, "a\u0085b", nil}, "invalid_greeting", "greeting"},
		{"greeting with a bidi override", def, SendRequest{1000, 10, Random, "abc\u202edef", nil}, "invalid_greeting", "greeting"},
		{"greeting with U+FFFF", def, SendRequest{1000, 10, Random, "a\uffffb", nil}, "invalid_greeting", "greeting"},
		{"greeting with U+FDD0", def, SendRequest{1000, 10, Random, "a\ufdd0", nil}, "invalid_greeting", "greeting"},
		{"greeting with U+10FFFE", def, SendRequest{1000, 10, Random, "a\U0010fffe", nil}, "invalid_greeting", "greeting"},
		{"greeting with a tab", def, SendRequest{1000, 10, Random, "a\tb", nil}, "invalid_greeting", "greeting"},
		{"greeting on two lines", def, SendRequest{1000, 10, Random, "恭喜发财\n大吉大利", nil}, "", ""},
		{"greeting with emoji and U+FFFD", def, SendRequest{1000, 10, Random, "🧧 红包 \ufffd", nil}, "", ""},
		// Random: the last share can reach total-(count-1) = 9999 > 5000.
		{"share over limit random", activity, SendRequest{10000, 2, Random, "", nil}, "share_over_limit", "total"},
		{"share over limit single", activity, SendRequest{5001, 1, Random, "", nil}, "share_over_limit", "total"},
		{"share over limit fixed", activity, SendRequest{10002, 2, Fixed, "", nil}, "share_over_limit", "total"},
		{"share at limit fixed", activity, SendRequest{10000, 2, Fixed, "", nil}, "", ""},
		{"share at limit random", activity, SendRequest{5001, 2, Random, "", nil}, "", ""},
		{"share over limit by one", activity, SendRequest{5002, 2, Random, "", nil}, "share_over_limit", "total"},
	}
	for _, tt := range tests {
		err := tt.l.Validate(tt.r)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: Validate(%+v) = %v, want nil", tt.name, tt.r, err)
			}
			continue
		}
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("%s: Validate(%+v) = %v, want *InvalidError %s", tt.name, tt.r, err, tt.code)
			continue
		}
		if ie.Code != tt.code || ie.Field != tt.field {
			t.Errorf("%s: Validate(%+v) = code %q field %q, want %q %q", tt.name, tt.r, ie.Code, ie.Field, tt.code, tt.field)
		}
		if Code(err) != tt.code {
			t.Errorf("%s: Code(err) = %q, want %q", tt.name, Code(err), tt.code)
		}
	}
}

// TestValidatedRequestsSplitWithinLimits: whatever Validate accepts splits
// into shares that respect MaxShare, whatever the draws.
func TestValidatedRequestsSplitWithinLimits(t *testing.T) {
	l := Limits{MaxTotal: 50000, MaxCount: 200, MaxShare: 3000, MaxGreeting: 10}
	r := rand.New(rand.NewPCG(99, 100))
	highest := func(n int64) int64 { return n - 1 }
	lowest := func(n int64) int64 { return 0 }
	accepted := 0
	for range 20000 {
		req := SendRequest{Total: 1 + r.Int64N(60000), Count: 1 + r.IntN(250), Type: Random}
		if r.IntN(2) == 0 {
			req.Type = Fixed
		}
		if l.Validate(req) != nil {
			continue
		}
		accepted++
		for _, intn := range []func(int64) int64{r.Int64N, highest, lowest} {
			for i, s := range Split(req.Type, req.Total, req.Count, intn) {
				if s > l.MaxShare {
					t.Fatalf("%+v accepted but share %d = %d exceeds MaxShare %d", req, i, s, l.MaxShare)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no request accepted; the test checks nothing")
	}
}

func TestCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{ErrSoldOut, "sold_out"},
		{errors.Join(errors.New("ctx"), ErrBusy), "busy"},
		{&InvalidError{Code: "invalid_total", Field: "total"}, "invalid_total"},
		{errors.New("boom"), "internal"},
		{nil, "internal"},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// FuzzSplit: for any (total, count) clamped into the valid range and any
// seed, the invariants of both types hold.
func FuzzSplit(f *testing.F) {
	f.Add(int64(1000), 10, uint64(1))
	f.Add(int64(1), 1, uint64(0))
	f.Add(int64(100), 100, uint64(2))
	f.Add(int64(20000), 100, uint64(3))
	f.Add(int64(2_000_000), 20_000, uint64(4))
	f.Add(int64(-5), -5, uint64(5))
	f.Add(int64(1)<<62, 7, uint64(6))
	f.Fuzz(func(t *testing.T, total int64, count int, seed uint64) {
		// Clamp: count in [1, 20000], total in [count, 2^40].
		if count < 0 {
			count = -(count + 1)
		}
		count = count%20000 + 1
		if total < 0 {
			total = -(total + 1)
		}
		total = int64(count) + total%(1<<40)
		r := rand.New(rand.NewPCG(seed, ^seed))
		checkRandomSplit(t, total, count, Split(Random, total, count, r.Int64N))
		fixedTotal := total - total%int64(count)
		checkFixedSplit(t, fixedTotal, count, Split(Fixed, fixedTotal, count, r.Int64N))
	})
}
