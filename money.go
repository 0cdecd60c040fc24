package hongbao

import (
	"fmt"
	"time"
	"unicode"
)

// Type is the way a packet's total is split into shares.
type Type string

// Packet types.
const (
	// Random is WeChat's lucky packet: each share is drawn by double-mean.
	Random Type = "random"
	// Fixed gives every opener the same amount.
	Fixed Type = "fixed"
)

// Valid reports whether t is a known type.
func (t Type) Valid() bool { return t == Random || t == Fixed }

// Limits bound what a sender may create. Amounts are in fen.
type Limits struct {
	MaxTotal    int64         // largest packet total
	MaxCount    int           // most shares
	MaxShare    int64         // largest amount one share may reach (0: no limit beyond MaxTotal)
	Expiry      time.Duration // life of a packet
	MaxGreeting int           // longest greeting in bytes
	MaxAudience int           // most users an audience may name
}

// DefaultLimits follow WeChat: 200 CNY, 100 shares, 24 hours.
func DefaultLimits() Limits {
	return Limits{MaxTotal: 20000, MaxCount: 100, MaxShare: 20000, Expiry: 24 * time.Hour, MaxGreeting: 200,
		MaxAudience: DefaultMaxAudience}
}

// Draw returns the amount of the next share of a packet that has remaining
// fen left for count shares. Random draws uniformly from
// [1, 2*remaining/count) (double-mean) and the last share takes the rest, so
// every share is at least 1 fen and the shares sum to the total. intn(n)
// must return a uniform value in [0, n).
//
// It panics only on a broken caller invariant (remaining < count), which the
// store's checks make impossible.
func Draw(t Type, remaining int64, count int, intn func(n int64) int64) int64 {
	n := int64(count)
	if n <= 0 || remaining < n {
		panic(fmt.Sprintf("hongbao.Draw: %d fen for %d shares", remaining, count))
	}
	if n == 1 {
		return remaining
	}
	if t == Fixed {
		return remaining / n
	}
	upper := 2 * remaining / n // exclusive; >= 2 because remaining >= n
	return 1 + intn(upper-1)
}

// Split draws every share of a packet at once, in opening order. It is the
// reference the store's one-share-at-a-time draws must agree with.
func Split(t Type, total int64, count int, intn func(n int64) int64) []int64 {
	shares := make([]int64, count)
	for i := range shares {
		shares[i] = Draw(t, total, count-i, intn)
		total -= shares[i]
	}
	return shares
}

// SendRequest is what a sender asks for.
type SendRequest struct {
	Total    int64
	Count    int
	Type     Type
	Greeting string
	Audience Audience // who may open it; nil: anyone
}

// Validate checks a request against the limits. Every share must be able to
// hold at least 1 fen and no share may exceed MaxShare; a fixed packet must
// split evenly, because rounding either way would make one share differ.
func (l Limits) Validate(r SendRequest) error {
	bad := func(code, field, msg string) error { return &InvalidError{code, field, msg} }
	switch {
	case !r.Type.Valid():
		return bad("invalid_type", "type", `must be "random" or "fixed"`)
	case r.Total <= 0:
		return bad("invalid_total", "total", "must be a positive integer number of fen")
	case r.Count <= 0:
		return bad("invalid_count", "count", "must be a positive integer")
	case r.Total > l.MaxTotal:
		return bad("total_over_limit", "total", fmt.Sprintf("must be at most %d fen", l.MaxTotal))
	case r.Count > l.MaxCount:
		return bad("count_over_limit", "count", fmt.Sprintf("must be at most %d", l.MaxCount))
	case r.Total < int64(r.Count):
		return bad("total_below_count", "total", "every share needs at least 1 fen")
	case r.Type == Fixed && r.Total%int64(r.Count) != 0:
		return bad("fixed_not_divisible", "total", "a fixed packet's total must divide evenly by count")
	case len(r.Greeting) > l.MaxGreeting:
		return bad("greeting_too_long", "greeting", fmt.Sprintf("must be at most %d bytes", l.MaxGreeting))
	case !displayable(r.Greeting):
		return bad("invalid_greeting", "greeting", "must hold no control characters (but line breaks) and no Unicode non-characters")
	case len(r.Audience) > l.MaxAudience:
		return bad("audience_over_limit", "audience.users", fmt.Sprintf("must name at most %d users", l.MaxAudience))
	case r.Audience != nil && r.Count > len(r.Audience):
		// A share nobody may open would stay in the packet until expiry.
		return bad("count_over_audience", "count", fmt.Sprintf("must be at most the audience's %d users", len(r.Audience)))
	}
	if l.MaxShare > 0 && maxShare(r) > l.MaxShare {
		return bad("share_over_limit", "total", fmt.Sprintf("a share could exceed %d fen", l.MaxShare))
	}
	return nil
}

// displayable reports whether a greeting is text every opener's screen
// shows as sent: no control characters (a NUL, an escape sequence for a
// terminal, a bidirectional override), which the page, a log or a chat
// client would render, cut or act on, and no Unicode non-characters
// (U+FFFE, U+FFFF, U+FDD0-U+FDEF and the last two of every plane), which
// are not text. A line break is a greeting's own.
func displayable(g string) bool {
	for _, r := range g {
		switch {
		case r == '\n':
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
			return false
		case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE:
			return false
		}
	}
	return true
}

// maxShare is the largest amount one share of r can reach.
func maxShare(r SendRequest) int64 {
	if r.Type == Fixed || r.Count == 1 {
		return r.Total / int64(r.Count)
	}
	// The last share takes the rest, which can approach total-(count-1).
	return r.Total - int64(r.Count-1)
}
