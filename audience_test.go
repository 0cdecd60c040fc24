package hongbao

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewAudience(t *testing.T) {
	tests := []struct {
		name  string
		users []UserID
		want  Audience
		code  string
	}{
		{"one user: an exclusive packet", []UserID{43}, Audience{43}, ""},
		{"sorted", []UserID{45, 43, 44}, Audience{43, 44, 45}, ""},
		{"empty", []UserID{}, nil, "empty_audience"},
		{"duplicate", []UserID{43, 44, 43}, nil, "duplicate_audience_user"},
		{"zero user", []UserID{43, 0}, nil, "invalid_audience_user"},
		{"negative user", []UserID{-4}, nil, "invalid_audience_user"},
	}
	for _, tt := range tests {
		got, err := NewAudience(tt.users)
		if Code(err) != tt.code && !(tt.code == "" && err == nil) {
			t.Errorf("%s: NewAudience(%v) = %v, %v; want code %q", tt.name, tt.users, got, err, tt.code)
			continue
		}
		if tt.code == "" && !slices.Equal(got, tt.want) {
			t.Errorf("%s: NewAudience(%v) = %v, want %v", tt.name, tt.users, got, tt.want)
		}
	}
}

func TestAudienceAdmits(t *testing.T) {
	var none Audience
	a := Audience{3, 43, 44, 900}
	for _, tt := range []struct {
		a    Audience
		u    UserID
		want bool
	}{
		{none, 1, true}, {none, 43, true},
		{a, 43, true}, {a, 3, true}, {a, 900, true},
		{a, 1, false}, {a, 45, false}, {a, 901, false},
		{Audience{}, 43, false}, // named but empty: nobody (never sent so)
	} {
		if got := tt.a.Admits(tt.u); got != tt.want {
			t.Errorf("%v.Admits(%d) = %v, want %v", tt.a, tt.u, got, tt.want)
		}
	}
}

func TestAudienceString(t *testing.T) {
	for _, tt := range []struct {
		a Audience
		s string
	}{{nil, ""}, {Audience{43}, "43"}, {Audience{43, 44, 9223372036854775807}, "43,44,9223372036854775807"}} {
		if got := tt.a.String(); got != tt.s {
			t.Errorf("%v.String() = %q, want %q", tt.a, got, tt.s)
		}
		back, err := ParseAudience(tt.s)
		if err != nil || !slices.Equal(back, tt.a) || (back == nil) != (tt.a == nil) {
			t.Errorf("ParseAudience(%q) = %v, %v; want %v", tt.s, back, err, tt.a)
		}
	}
	for _, bad := range []string{"44,43", "43,43", "x", "43,", "0", ",43"} {
		if a, err := ParseAudience(bad); err == nil {
			t.Errorf("ParseAudience(%q) = %v, want an error", bad, a)
		}
	}
}

func TestValidateAudience(t *testing.T) {
	l := DefaultLimits()
	group := make(Audience, 500)
	for i := range group {
		group[i] = UserID(i + 1)
	}
	tests := []struct {
		name  string
		r     SendRequest
		code  string
		field string
	}{
		{"exclusive", SendRequest{Total: 888, Count: 1, Type: Random, Audience: Audience{43}}, "", ""},
		{"count == audience", SendRequest{Total: 300, Count: 3, Type: Fixed, Audience: Audience{43, 44, 45}}, "", ""},
		{"a group's 500", SendRequest{Total: 10000, Count: 100, Type: Random, Audience: group}, "", ""},
		{"count over audience", SendRequest{Total: 400, Count: 4, Type: Random, Audience: Audience{43, 44, 45}}, "count_over_audience", "count"},
		{"501 users", SendRequest{Total: 100, Count: 1, Type: Random, Audience: append(slices.Clone(group), 501)}, "audience_over_limit", "audience.users"},
		{"no audience: as before", SendRequest{Total: 100, Count: 100, Type: Random}, "", ""},
	}
	for _, tt := range tests {
		err := l.Validate(tt.r)
		var ie *InvalidError
		switch {
		case tt.code == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tt.name, err)
		case tt.code != "" && (!errors.As(err, &ie) || ie.Code != tt.code || ie.Field != tt.field):
			t.Errorf("%s: Validate = %v, want %s on %s", tt.name, err, tt.code, tt.field)
		}
	}
}

// TestDrawOpensAudience: a stranger is refused whatever the packet's
// state, takes nothing, and leaves the members' draws as they would be.
func TestDrawOpensAudience(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p := Packet{Type: Fixed, Total: 200, Count: 2, RemainingAmount: 200, RemainingCount: 2, ExpiresAt: now.Add(time.Hour),
		Funding: Funded, Audience: Audience{43, 44}}
	have := map[UserID]int64{}
	out, fresh := DrawOpens(&p, have, []UserID{45, 43, 45, 44, 46}, now, func(int64) int64 { return 0 })
	var got []string
	for _, o := range out {
		if o.Err != nil {
			got = append(got, Code(o.Err))
		} else {
			got = append(got, o.Result.Status)
		}
	}
	want := []string{"not_in_audience", Opened, "not_in_audience", Opened, "not_in_audience"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if len(fresh) != 2 || p.RemainingCount != 0 || p.RemainingAmount != 0 || have[43] != 100 || have[44] != 100 {
		t.Errorf("fresh %v, packet %+v, have %v; want the two members' 100 fen each", fresh, p, have)
	}
	// Sold out now: a stranger still hears not_in_audience, not sold_out.
	out, _ = DrawOpens(&p, have, []UserID{47}, now, nil)
	if !errors.Is(out[0].Err, ErrNotInAudience) {
		t.Errorf("stranger on a sold-out packet: %v, want not_in_audience", out[0].Err)
	}
}

func TestMaxNextShare(t *testing.T) {
	for _, tt := range []struct {
		p    Packet
		want int64
	}{
		{Packet{Type: Random, Total: 1000, Count: 10, RemainingAmount: 1000, RemainingCount: 10}, 991},
		{Packet{Type: Random, Total: 1000, Count: 10, RemainingAmount: 37, RemainingCount: 1}, 37},
		{Packet{Type: Fixed, Total: 1000, Count: 10, RemainingAmount: 300, RemainingCount: 3}, 100},
		{Packet{Type: Random, Total: 1000, Count: 10, RemainingAmount: 0, RemainingCount: 0}, 0},
	} {
		if got := tt.p.MaxNextShare(); got != tt.want {
			t.Errorf("MaxNextShare(%+v) = %d, want %d", tt.p, got, tt.want)
		}
	}
}
