// Package router is the stateless entry point: it verifies user tokens,
// mints packet IDs, and sends every request of a packet to the SET owning
// the packet's bucket and, inside it, to one server chosen by rendezvous
// hashing, so all opens of one packet meet in one queue.
package router

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// Route returns the SET owning packet id in t and its servers in the order
// to try them.
func Route(t *topology.Map, id hongbao.PacketID, healthy func(string) bool) (*topology.Set, []string) {
	owner := t.Owner(id.Bucket())
	return owner, Rank(owner.Servers, uint64(id), healthy)
}

// score is the rendezvous weight of server for key.
func score(server string, key uint64) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(server) // xxhash writes never fail
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], key)
	_, _ = d.Write(b[:])
	return d.Sum64()
}

// Rank orders servers for key (a packet ID): the healthy ones by descending
// rendezvous score, then the unhealthy ones the same way (a last resort).
// Removing a server only moves the keys it ranked first.
func Rank(servers []string, key uint64, healthy func(string) bool) []string {
	type ranked struct {
		addr  string
		up    bool
		score uint64
	}
	rs := make([]ranked, len(servers))
	for i, s := range servers {
		rs[i] = ranked{s, healthy == nil || healthy(s), score(s, key)}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.up != b.up {
			if a.up {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.score, a.score)
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.addr
	}
	return out
}
