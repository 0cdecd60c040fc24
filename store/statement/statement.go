// Package statement builds the wallet's statements: the daily one a
// finance team loads (every ledger entry of a day, per-kind totals, the
// opening and closing balance of every user it touches, checked against
// the SETs' records of the same money), written atomically as CSV or
// JSON; and a user's own monthly one (GET /v1/me/statement).
package statement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Ledger is the wallet as of one moment (wallet.Snapshot).
type Ledger interface {
	Between(ctx context.Context, from, to time.Time, user hongbao.UserID, limit int) ([]hongbao.Entry, error)
	SumsBefore(ctx context.Context, users []hongbao.UserID, t time.Time) (map[hongbao.UserID]int64, error)
	KindSums(ctx context.Context, from, to time.Time, user hongbao.UserID) (map[string]sqldb.KindSum, error)
	Entries(ctx context.Context, keys []string) (map[string]hongbao.Entry, error)
}

var _ Ledger = (*wallet.Snapshot)(nil)

// Records is the SETs' side of the money: a packet with its shares as the
// SET that holds it (live or archived) records it (ErrNotFound when no
// SET has it), and the moves the SETs' records date in a period with the
// keys of the outbox rows not delivered yet (store.Store.MoneyBetween).
type Records interface {
	Packet(ctx context.Context, id hongbao.PacketID) (*hongbao.Packet, []hongbao.Record, error)
	MoneyBetween(ctx context.Context, from, to, since time.Time) (moves []hongbao.Entry, inFlight map[string]bool, unreadable []error, err error)
}

// SETMoney is the SETs' moves of a day (debits of funded packets, credits
// of shares, refunds of closed packets) and the keys of their outbox rows
// not delivered yet, read before the wallet's snapshot the statement
// reads (ReadSETs), so a move delivered meanwhile is in that snapshot.
type SETMoney struct {
	Moves    []hongbao.Entry
	InFlight map[string]bool
	// Unreadable names the outbox rows whose credits do not read: each
	// is a problem of the statement, and a move missing from the ledger
	// may be in one of them.
	Unreadable []error
}

// ReadSETs reads the SETs' moves of [from, to), of packets sent at most
// expiry (the longest a packet lives) before from. Call it before taking
// the wallet's snapshot given to Daily.
func ReadSETs(ctx context.Context, recs Records, from, to time.Time, expiry time.Duration) (*SETMoney, error) {
	moves, inFlight, unreadable, err := recs.MoneyBetween(ctx, from, to, from.Add(-expiry))
	if err != nil {
		return nil, fmt.Errorf("statement: the SETs' moves: %w", err)
	}
	return &SETMoney{Moves: moves, InFlight: inFlight, Unreadable: unreadable}, nil
}

// Total is the count and sum of one kind's entries.
type Total struct {
	N   int   `json:"n"`
	Sum int64 `json:"sum"`
}

// Balance is a user's balance at the start and at the end of the period.
type Balance struct {
	User    hongbao.UserID
	Opening int64
	Closing int64
}

// Statement is the ledger of one period.
type Statement struct {
	Day      string // YYYY-MM-DD (daily) or YYYY-MM (monthly)
	From, To time.Time
	Entries  []hongbao.Entry
	Totals   map[string]Total // by ledger kind
	Balances []Balance        // by user ID
	// SETs are the totals of send, open and refund as the SETs' records
	// count the same entries (a debit is the packet's total, a credit its
	// opener's share, a refund what the closed packet had left); they
	// equal Totals' when both sides agree. InFlight are the SETs' moves of
	// the day not in the ledger because their outbox rows were not
	// delivered yet (a later day's entries). Problems names each entry
	// whose record disagrees or is missing, and each move of the SETs'
	// records of the day that the ledger lacks.
	SETs     map[string]Total
	InFlight map[string]Total
	Problems []Problem
}

// Problem is one disagreement between the ledger and the SETs' records:
// the ledger key concerned, its amount (the ledger's, or the SETs' when
// the ledger lacks it) and what disagrees. An outbox row whose credits do
// not read is a problem of no key: its detail names the row.
type Problem struct {
	Key    string
	Amount int64
	Detail string
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.Detail
	}
	return fmt.Sprintf("%s (%d fen): %s", p.Key, p.Amount, p.Detail)
}

// ErrDisagree is returned (with the statement) when the SETs' records do
// not count the day's money as the ledger does.
var ErrDisagree = errors.New("statement: the SETs' records disagree with the ledger")

// ParseDay parses a --day value (YYYY-MM-DD) as that day in loc.
func ParseDay(s string, loc *time.Location) (from, to time.Time, err error) {
	d, err := time.ParseInLocation(time.DateOnly, s, loc)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%q is not a day YYYY-MM-DD", s)
	}
	return d, d.AddDate(0, 0, 1), nil
}

// ParseMonth parses a month (YYYY-MM) as that month in loc.
func ParseMonth(s string, loc *time.Location) (from, to time.Time, err error) {
	m, err := time.ParseInLocation("2006-01", s, loc)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%q is not a month YYYY-MM", s)
	}
	return m, m.AddDate(0, 1, 0), nil
}

// Daily builds the statement of [from, to) named day from the ledger l
// and checks both ways: each entry that moved money between a SET and the
// wallet against recs, and each of the SETs' moves of the day (money,
// read by ReadSETs before l's snapshot) against the ledger. It returns
// ErrDisagree with the statement when they disagree.
func Daily(ctx context.Context, l Ledger, recs Records, money *SETMoney, day string, from, to time.Time) (*Statement, error) {
	st, err := build(ctx, l, day, from, to)
	if err != nil {
		return nil, err
	}
	if err := st.check(ctx, recs); err != nil {
		return nil, err
	}
	if err := st.checkSETs(ctx, l, money); err != nil {
		return nil, err
	}
	if len(st.Problems) > 0 {
		return st, fmt.Errorf("%w: %d entries (%s)", ErrDisagree, len(st.Problems), st.Problems[0])
	}
	return st, nil
}

// Monthly builds user's statement of [from, to) named month, listing at
// most limit entries (the totals and balances count them all, summed by
// MySQL); more reports entries left out.
func Monthly(ctx context.Context, l Ledger, user hongbao.UserID, month string, from, to time.Time, limit int) (st *Statement, more bool, err error) {
	es, err := l.Between(ctx, from, to, user, limit+1)
	if err != nil {
		return nil, false, err
	}
	if more = len(es) > limit; more {
		es = es[:limit]
	}
	sums, err := l.KindSums(ctx, from, to, user)
	if err != nil {
		return nil, false, err
	}
	opening, err := l.SumsBefore(ctx, []hongbao.UserID{user}, from)
	if err != nil {
		return nil, false, err
	}
	st = &Statement{Day: month, From: from, To: to, Entries: es, Totals: map[string]Total{}}
	closing := opening[user]
	for k, v := range sums {
		st.Totals[k] = Total{N: v.N, Sum: v.Sum}
		closing += v.Sum
	}
	st.Balances = []Balance{{User: user, Opening: opening[user], Closing: closing}}
	return st, more, nil
}

// build reads every entry of the period and the balances of the users
// they touch.
func build(ctx context.Context, l Ledger, name string, from, to time.Time) (*Statement, error) {
	es, err := l.Between(ctx, from, to, 0, 0)
	if err != nil {
		return nil, err
	}
	st := &Statement{Day: name, From: from, To: to, Entries: es, Totals: totals(es)}
	day := map[hongbao.UserID]int64{}
	for _, e := range es {
		day[e.User] += e.Amount
	}
	users := make([]hongbao.UserID, 0, len(day))
	for u := range day {
		users = append(users, u)
	}
	slices.Sort(users)
	opening, err := l.SumsBefore(ctx, users, from)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		st.Balances = append(st.Balances, Balance{User: u, Opening: opening[u], Closing: opening[u] + day[u]})
	}
	return st, nil
}

func totals(es []hongbao.Entry) map[string]Total {
	out := map[string]Total{}
	for _, e := range es {
		t := out[e.Kind]
		t.N++
		t.Sum += e.Amount
		out[e.Kind] = t
	}
	return out
}
