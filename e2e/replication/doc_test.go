// Package replication_test holds hongbao's end-to-end tests of a whole
// cluster reading from replicas: nobody reads what no replica acknowledged.
package replication_test
