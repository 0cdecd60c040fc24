// Package packets_test holds hongbao's end-to-end tests of sends and opens
// through the router of a whole cluster: idempotency, coalescing, the
// internal API's signatures, bad input and abuse limits.
package packets_test
