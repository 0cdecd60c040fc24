package hongbao

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Audience is who may open a packet: its users in ascending order, each
// once. The zero Audience (nil) admits everyone, as a packet sent without
// one always has; a packet's audience never changes after the send, so any
// copy of it (in memory, in memcached) is as good as the row's.
type Audience []UserID

// DefaultMaxAudience is the longest audience a send may name: the size of
// a WeChat group.
const DefaultMaxAudience = 500

// ErrNotInAudience refuses a grab or an open by a user the packet's sender
// did not name.
var ErrNotInAudience = &Error{"not_in_audience", "the packet is for other users"}

// Admits reports whether u may open a packet of audience a: always for
// none, else when u is in it (a binary search: a group's audience is at
// most a few hundred users).
func (a Audience) Admits(u UserID) bool {
	if a == nil {
		return true
	}
	_, ok := slices.BinarySearch(a, u)
	return ok
}

// NewAudience checks the users a send names and returns them as an
// Audience: at least one, each a valid user ID once (Limits.Validate
// bounds its size). An empty list is refused rather than read as
// "everyone": the sender meant someone.
func NewAudience(users []UserID) (Audience, error) {
	bad := func(code, msg string) error { return &InvalidError{code, "audience.users", msg} }
	if len(users) == 0 {
		return nil, bad("empty_audience", "must name at least one user")
	}
	a := slices.Clone(users)
	slices.Sort(a)
	for i, u := range a {
		if u <= 0 {
			return nil, bad("invalid_audience_user", "every user must be a positive user id")
		}
		if i > 0 && a[i-1] == u {
			return nil, bad("duplicate_audience_user", fmt.Sprintf("user %s is named twice", u))
		}
	}
	return a, nil
}

// String is the audience as stored (and cached): decimal user IDs in
// ascending order, comma-separated; "" for none.
func (a Audience) String() string {
	var b strings.Builder
	for i, u := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(u), 10))
	}
	return b.String()
}

// ParseAudience reads what String wrote; "" is no audience (nil).
func ParseAudience(s string) (Audience, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	a := make(Audience, len(parts))
	for i, p := range parts {
		u, err := ParseUserID(p)
		if err != nil || (i > 0 && u <= a[i-1]) {
			return nil, fmt.Errorf("audience %q: not ascending user ids", s)
		}
		a[i] = u
	}
	return a, nil
}
