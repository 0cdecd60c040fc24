package cache_test

import (
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestStateCarriesAudience: a packet's state keeps its audience (a group's
// 500 users included), and a packet without one reads back without one.
func TestStateCarriesAudience(t *testing.T) {
	c := newCache(t, dbtest.Memcached(t, "a"))
	group := make(hongbao.Audience, 500)
	for i := range group {
		group[i] = hongbao.UserID(9_000_000_000_000_000_000 + i)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, a := range []hongbao.Audience{nil, {43}, group} {
		id, user := freshPacket(t), dbtest.FreshUser()
		c.SetState(id, hongbao.State{RemainingCount: 1, ExpiresAt: exp, Audience: a})
		got, ok := c.State(id)
		if !ok || !slices.Equal(got.Audience, a) || (got.Audience == nil) != (a == nil) || got.RemainingCount != 1 || !got.ExpiresAt.Equal(exp) {
			t.Errorf("State of a packet for %d users = %+v, %v", len(a), got, ok)
		}
		if _, _, st, ok := c.Lookup(id, user); !ok || !slices.Equal(st.Audience, a) {
			t.Errorf("Lookup of a packet for %d users: audience of %d, %v", len(a), len(st.Audience), ok)
		}
	}
}
