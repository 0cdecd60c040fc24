package hongbao

import (
	"testing"
	"time"
)

func TestStatusAt(t *testing.T) {
	exp := time.Date(2025, 4, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		remaining int
		closed    bool
		now       time.Time
		want      Status
	}{
		{"fresh", 10, false, exp.Add(-24 * time.Hour), Active},
		{"last instant", 1, false, exp.Add(-time.Nanosecond), Active},
		{"at expiry", 1, false, exp, Expired},
		{"after expiry", 3, false, exp.Add(time.Hour), Expired},
		{"closed early", 3, true, exp.Add(-time.Hour), Expired},
		{"sold out", 0, false, exp.Add(-time.Hour), SoldOut},
		// Sold out wins over expiry: nothing is left to refund.
		{"sold out after expiry", 0, false, exp.Add(time.Hour), SoldOut},
		{"sold out and closed", 0, true, exp.Add(time.Hour), SoldOut},
	}
	for _, tt := range tests {
		p := &Packet{Count: 10, RemainingCount: tt.remaining, Closed: tt.closed, ExpiresAt: exp}
		if got := p.StatusAt(tt.now); got != tt.want {
			t.Errorf("%s: StatusAt = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStatusStrings(t *testing.T) {
	if Active != "active" || SoldOut != "sold_out" || Expired != "expired" {
		t.Errorf("statuses = %q %q %q, want active sold_out expired", Active, SoldOut, Expired)
	}
	if Opened != "opened" || AlreadyOpened != "already_opened" {
		t.Errorf("open outcomes = %q %q", Opened, AlreadyOpened)
	}
}

func TestBest(t *testing.T) {
	rec := func(user UserID, amount int64, seq int) Record {
		return Record{User: user, Amount: amount, Seq: seq}
	}
	tests := []struct {
		name    string
		records []Record
		want    UserID
		ok      bool
	}{
		{"none", nil, 0, false},
		{"empty", []Record{}, 0, false},
		{"one", []Record{rec(5, 100, 1)}, 5, true},
		{"largest first", []Record{rec(1, 500, 1), rec(2, 300, 2), rec(3, 200, 3)}, 1, true},
		{"largest last", []Record{rec(1, 100, 1), rec(2, 300, 2), rec(3, 600, 3)}, 3, true},
		{"largest middle", []Record{rec(1, 100, 1), rec(2, 800, 2), rec(3, 100, 3)}, 2, true},
		{"tie: earliest seq", []Record{rec(1, 100, 1), rec(2, 400, 2), rec(3, 400, 3), rec(4, 100, 4)}, 2, true},
		// Records need not arrive in opening order: ties go to the lowest Seq.
		{"tie, unsorted", []Record{rec(3, 400, 3), rec(1, 100, 1), rec(2, 400, 2)}, 2, true},
		{"tie, unsorted, earliest last", []Record{rec(9, 50, 9), rec(3, 50, 3), rec(7, 50, 7), rec(1, 50, 1)}, 1, true},
		{"all equal (fixed)", []Record{rec(4, 100, 1), rec(5, 100, 2), rec(6, 100, 3)}, 4, true},
	}
	for _, tt := range tests {
		got, ok := Best(tt.records)
		if ok != tt.ok || got.User != tt.want {
			t.Errorf("%s: Best = %+v, %v; want user %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok {
			for _, r := range tt.records {
				if r.Amount > got.Amount {
					t.Errorf("%s: Best amount %d below record %+v", tt.name, got.Amount, r)
				}
			}
		}
	}
}
