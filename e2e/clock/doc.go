// Package clock holds the end-to-end tests of hosts whose clocks are off
// by minutes (each process's -clock-offset, set through
// clustertest.Options.ClockOffsets and Cluster.Skew): a packet's expiry
// written by a sending server ahead and read by an opening server behind,
// a settler ahead whose sweeper meets sends still under way, a router
// skewed beyond the internal signatures' window. Each checks the money to
// the fen: the cases of docs/REPLICATION.md's clocks table.
package clock
