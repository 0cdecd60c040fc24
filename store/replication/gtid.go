package replication

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GTID is one MariaDB global transaction ID: domain-server-sequence.
type GTID struct {
	Domain, Server uint32
	Seq            uint64
}

func (g GTID) String() string { return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq) }

// State is a binary log's GTID state: the last sequence number written per
// domain and server (@@gtid_binlog_state, "0-1-120,0-2-135").
type State map[[2]uint32]uint64

// String formats s as MariaDB does: "domain-server-seq" comma-separated,
// in domain then server order.
func (s State) String() string {
	keys := make([][2]uint32, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]uint32) int {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		return int(a[1]) - int(b[1])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = GTID{k[0], k[1], s[k]}.String()
	}
	return strings.Join(parts, ",")
}

// ParseState parses a comma-separated GTID list.
func ParseState(s string) (State, error) {
	st := State{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("replication: GTID %q: want domain-server-seq", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("replication: GTID %q: not numbers", part)
		}
		k := [2]uint32{uint32(d), uint32(sv)}
		st[k] = max(st[k], seq)
	}
	return st, nil
}

// Errant returns, as ranges, the transactions the server with state mine
// wrote that the server with state theirs never received: for each
// domain and server, the sequence numbers after theirs up to mine. Under
// gtid_strict_mode a server that was the only writer of a domain wrote
// every sequence number in between, so the ranges are exact. Empty: mine
// is contained in theirs and mine may replicate from theirs.
func Errant(mine, theirs State) []Range {
	var out []Range
	for k, seq := range mine {
		if have := theirs[k]; seq > have {
			out = append(out, Range{From: GTID{k[0], k[1], have + 1}, To: GTID{k[0], k[1], seq}})
		}
	}
	slices.SortFunc(out, func(a, b Range) int {
		if a.From.Domain != b.From.Domain {
			return int(a.From.Domain) - int(b.From.Domain)
		}
		return int(a.From.Server) - int(b.From.Server)
	})
	return out
}

// Behind reports whether position a lacks transactions position b has:
// in some domain b's last sequence number is higher (under
// gtid_strict_mode sequence numbers grow in a domain whoever writes them).
func Behind(a, b State) bool {
	top := func(s State) map[uint32]uint64 {
		m := map[uint32]uint64{}
		for k, seq := range s {
			m[k[0]] = max(m[k[0]], seq)
		}
		return m
	}
	ta := top(a)
	for d, seq := range top(b) {
		if seq > ta[d] {
			return true
		}
	}
	return false
}

// Range is the transactions From..To of one domain and server.
type Range struct{ From, To GTID }

// Count is the number of transactions in r.
func (r Range) Count() uint64 { return r.To.Seq - r.From.Seq + 1 }

func (r Range) String() string {
	if r.From == r.To {
		return r.From.String()
	}
	return r.From.String() + ".." + r.To.String()
}

// List names every transaction of rs, at most limit of them, then "..."
// and how many more.
func List(rs []Range, limit int) string {
	var names []string
	var total uint64
	for _, r := range rs {
		total += r.Count()
		for s := r.From.Seq; s <= r.To.Seq && len(names) < limit; s++ {
			names = append(names, GTID{r.From.Domain, r.From.Server, s}.String())
		}
	}
	out := strings.Join(names, ", ")
	if total > uint64(len(names)) {
		out += fmt.Sprintf(", ... (%d in all)", total)
	}
	return out
}
