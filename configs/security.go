package configs

import (
	"errors"
	"fmt"
	"time"
)

// RouterLimits are the router's abuse limits. Each router counts on its own.
type RouterLimits struct {
	// MaxPerAddress caps the requests of one client address in flight at
	// once (0: no cap). Clients behind one NAT share it.
	MaxPerAddress int `yaml:"max_per_address"`
	// MaxStreams caps the requests in flight on one HTTP/2 connection; an
	// HTTP/1.1 connection carries one at a time anyway.
	MaxStreams int `yaml:"max_streams_per_conn"`
	// MaxUsers bounds the users each rate limiter tracks (memory).
	MaxUsers int `yaml:"rate_users"`
	// Per-user token buckets, per route.
	Open Rate `yaml:"open"`
	Grab Rate `yaml:"grab"`
	Send Rate `yaml:"send"`
}

// Rate is a per-user token bucket: PerSecond requests a second sustained,
// Burst at once. PerSecond 0 is no limit.
type Rate struct {
	PerSecond int `yaml:"per_second"`
	Burst     int `yaml:"burst"`
}

// Every is the time between two tokens (0: no limit).
func (r Rate) Every() time.Duration {
	if r.PerSecond <= 0 {
		return 0
	}
	return time.Second / time.Duration(r.PerSecond)
}

// defaultRouterLimits are generous for a person and tight for a script:
// opening and grabbing are what a crowd does in bursts, sending is rarer.
func defaultRouterLimits() RouterLimits {
	return RouterLimits{MaxPerAddress: 256, MaxStreams: 32, MaxUsers: 1 << 18,
		Open: Rate{PerSecond: 10, Burst: 20}, Grab: Rate{PerSecond: 20, Burst: 40}, Send: Rate{PerSecond: 2, Burst: 10}}
}

func (l RouterLimits) check() error {
	var errs []error
	if l.MaxPerAddress < 0 || l.MaxStreams < 0 || l.MaxUsers < 0 {
		errs = append(errs, errors.New("router: max_per_address, max_streams_per_conn and rate_users must not be negative"))
	}
	for name, r := range map[string]Rate{"open": l.Open, "grab": l.Grab, "send": l.Send} {
		if r.PerSecond < 0 || r.Burst < 0 || r.PerSecond > 0 && r.Burst < 1 {
			errs = append(errs, fmt.Errorf("router.%s: per_second must not be negative, and burst at least 1 when limited", name))
		}
	}
	return errors.Join(errs...)
}
