// Package failover provides the failover of a replicated MariaDB group: a
// SET's database, or the core group of the meta and wallet databases. One
// type, Reparenter, does every step for every caller (hbctl set|core
// failover and rejoin, hbctl replica start, the watchdog): fence the old
// primary, stop the replicas receiving, pick the most advanced, promote
// it, publish it, rejoin the rest, start a restarted replica. Beside it,
// the watchdog's rule (when a primary is dead; armed groups) and its loop
// (Watcher, Watch), which hbwatch runs as a daemon.
//
// The name is the operation's: operators ask for "a failover" (hbctl set
// failover), and everything here serves it or decides when to run it.
// store/replication is the layer below, MariaDB's statements with no
// policy; this package is the policy, the order of the steps and why it
// loses no acknowledged write (failover.go, watch.go).
//
// Nothing here prints: results come back as values (Report, CoreMembers,
// MemberStatus) and a Progress knob hands each line to the caller as it
// is made. Tests set knobs in process (Dial, Hook), never the environment.
package failover
