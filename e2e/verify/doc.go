// Package verify holds the whole-cluster tests of hbctl verify, the money
// audit, on live clusters: every violation found and named (packets,
// tampered rows), none found while buckets move or hand over, orphaned
// packets refunded and none invented during moves. Each test starts its
// own cluster of real binaries and shares e2e/harness/ctltest's helpers.
package verify
