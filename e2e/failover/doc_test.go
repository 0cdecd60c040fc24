// Package failover_test holds hongbao's end-to-end tests of whole clusters
// through a failover and a bucket's move: every acknowledged answer kept,
// nothing paid twice.
package failover_test
