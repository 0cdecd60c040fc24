// Package watch holds the whole-cluster tests of the failover watchdog
// (hbctl set watch, hbctl core watch): a killed primary failed over under
// load, no failover for a primary paused shorter than --after or a watch
// cut off from it, no flapping, the core group's watch. Each test starts
// its own cluster of real binaries with replicated MariaDB groups.
package watch
