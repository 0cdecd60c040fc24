package replication

import "testing"

func TestErrant(t *testing.T) {
	for _, c := range []struct {
		mine, theirs, want string
	}{
		{"0-1-10", "0-1-10", ""},
		{"0-1-10", "0-1-10,0-2-15", ""},
		{"0-1-12", "0-1-10,0-2-15", "0-1-11, 0-1-12"},
		{"0-1-11,0-2-3", "0-1-10,0-2-15", "0-1-11"},
		{"0-1-40", "", "0-1-1, 0-1-2, 0-1-3, ... (40 in all)"},
		{"", "0-1-4", ""},
	} {
		mine, err := ParseState(c.mine)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := ParseState(c.theirs)
		if err != nil {
			t.Fatal(err)
		}
		if got := List(Errant(mine, theirs), 3); got != c.want {
			t.Errorf("Errant(%s, %s) = %q; want %q", c.mine, c.theirs, got, c.want)
		}
	}
	if _, err := ParseState("0-1"); err == nil {
		t.Error("ParseState(0-1): no error")
	}
}

func TestBehind(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"0-1-10", "0-1-10", false},
		{"0-1-9", "0-1-10", true},
		{"0-1-10", "0-1-9", false},
		{"0-2-12", "0-1-11", false}, // after a failover another server writes on
		{"0-1-11", "0-2-12", true},
		{"0-1-11", "0-1-11,1-1-1", true},
		{"", "", false},
		{"", "0-1-1", true},
	} {
		a, err := ParseState(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseState(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := Behind(a, b); got != c.want {
			t.Errorf("Behind(%q, %q) = %v; want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestLaterPerDomain(t *testing.T) {
	for _, c := range []struct {
		slave, binlog string
		want          string
		later         bool
	}{
		{"0-1-21", "0-1-22", "0-1-22", true},                // a DDL's record lost in a crash
		{"0-1-22", "0-1-22", "0-1-22", false},               // in step
		{"0-1-30", "0-2-12", "0-1-30", false},               // its own old writes as a primary, long replicated past
		{"", "0-1-5", "0-1-5", true},                        // never recorded anything
		{"0-1-5", "", "0-1-5", false},                       // no binary log yet
		{"0-1-7,1-3-9", "0-2-8,1-3-4", "0-2-8,1-3-9", true}, // per domain
	} {
		a, err := ParseState(c.slave)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseState(c.binlog)
		if err != nil {
			t.Fatal(err)
		}
		got, later := laterPerDomain(a, b)
		if got.String() != c.want || later != c.later {
			t.Errorf("laterPerDomain(%q, %q) = %q, %v; want %q, %v", c.slave, c.binlog, got, later, c.want, c.later)
		}
	}
}
