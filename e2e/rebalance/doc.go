// Package rebalance holds the whole-cluster tests of bucket moves and
// rebalances as hbctl runs them: a move killed or paused at each of its
// steps (the mover run in the test's process with knobs), a move that
// loses its journal step or follows a failover, a big bucket, archived
// packets moving with their bucket, the bucket lease, a rebalance under a
// crowd of clients; and BenchmarkRebalance (`make bench-rebalance`).
// Each test starts its own cluster of real binaries (e2e/harness/clustertest)
// and shares e2e/harness/ctltest's helpers.
package rebalance
