package configs

import "errors"

// Watch tunes hbwatch, the daemon that fails a SET or the core group over
// automatically when its primary is dead (set/failover has the rule);
// hbctl set|core watch take the same as flags.
type Watch struct {
	// Interval is the time between probes of a group.
	Interval Duration `yaml:"interval"`
	// After is how long a primary must be unreachable (and a replica say
	// it lost it) before it is failed over: at least twice Interval.
	After Duration `yaml:"after"`
	// ProbeTimeout bounds one probe of a server (connect, SELECT 1).
	ProbeTimeout Duration `yaml:"probe_timeout"`
	// AcceptSingleCopy lets an automatic failover that leaves the promoted
	// primary without a replica write on one machine (hbctl's
	// --accept-single-copy); false: it waits for a replica.
	AcceptSingleCopy bool `yaml:"accept_single_copy"`
	// Refresh is how often hbwatch reads the topology's SETs again: a SET
	// added or given replicas at run time is watched from then on, without
	// a restart.
	Refresh Duration `yaml:"refresh"`
}

// check validates the watchdog's settings.
func (w Watch) check() error {
	if w.Interval <= 0 || w.ProbeTimeout <= 0 || w.Refresh <= 0 || w.After < 2*w.Interval {
		return errors.New("watch: interval, probe_timeout and refresh must be positive, after at least twice interval")
	}
	return nil
}
