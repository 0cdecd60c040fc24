// Package e2e is the home of hongbao's whole-system tests and of the
// harnesses every test shares: no other top-level folder holds tests that
// start whole clusters of binaries.
//
// The harnesses, in e2e/harness, are named for what they start:
//
//   - dbtest: the test MariaDB and memcached that `make test` runs, private
//     ones for a test that needs its own (replicated groups included), and
//     SQL to check a SET's tables. Package-level tests use it too.
//   - clustertest: a whole cluster of the real binaries for one test,
//     each with its admin listener, and a real Prometheus scraping them.
//   - browsertest: Debian's headless Chromium, driven through chromedp.
//   - archivetest: a SET with days of packets to archive.
//   - packettest: a cluster with the packets' requests through the router
//     (send, open, detail, with their retries) and the checks of a
//     packet's rows on its SET.
//
// The end-to-end tests, split by subject, each start whole clusters:
// e2e/packets (sends and opens through the router: idempotency,
// signatures, coalescing, abuse limits, invalid requests), e2e/failover (a
// server killed during opens, a bucket moved under load), e2e/metrics
// (what Prometheus sees of a loaded cluster), e2e/replication (reads from
// a SET's replica), e2e/liveness (a host that vanishes without closing
// its connections: its sessions, locks and waits end within seconds), e2e/face (the red-packet page and the operator
// dashboard in a real browser) and e2e/dev (the dev cluster of `make up`
// and its supervisor). cmd/hbctl's and cmd/hbserver's whole-cluster tests
// stay beside their commands, which they drive.
//
// Every test that needs MariaDB, memcached, a cluster or Chromium skips
// under `go test -short` (dbtest.Need); `make test` runs them all.
package e2e
