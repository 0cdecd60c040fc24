package replication

import (
	"context"
	"net"
	"strings"
	"time"
)

// resolveTimeout bounds each name lookup of From: a resolver that hangs
// must not hold a watcher's round.
const resolveTimeout = 2 * time.Second

// From reports whether a replica with status s replicates from the server
// at host:port. Its Master_Host is however the replica was set up
// ("localhost", a name, an address) and the configuration may name the
// same server otherwise, so hosts are compared by what they resolve to:
// one address in common is the same server. A host that does not resolve
// matches only its own spelling.
func (s Status) From(ctx context.Context, host string, port int) bool {
	return s.Configured && s.MasterPort == port && SameHost(ctx, s.MasterHost, host)
}

// SameHost reports whether hosts a and b (names or addresses) name one
// machine: equal ignoring case, or resolving to a common address.
func SameHost(ctx context.Context, a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	ia, ib := resolve(ctx, a), resolve(ctx, b)
	for _, x := range ia {
		for _, y := range ib {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}

// resolve is host's addresses (host itself when it is one); none when it
// does not resolve.
func resolve(ctx context.Context, host string) []net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil // unknown: compared by spelling only
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips
}
