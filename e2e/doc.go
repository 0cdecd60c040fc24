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
//   - ctltest: what the tests driving hbctl share: packets sent into
//     chosen buckets, their shares as each SET's MySQL holds them, the
//     rebalance journal as hbctl shows it, a load of sends and opens timed
//     through a fault, and the mover run in the test's process with knobs
//     that kill or pause it at a step.
//
// The end-to-end tests, split by subject, each start whole clusters:
// e2e/packets (sends and opens through the router: idempotency,
// signatures, coalescing, abuse limits, invalid requests), e2e/failover (a
// server killed during opens, a bucket moved under load, hbctl set and
// core failover and rejoin of replicated MariaDB groups), e2e/watch (the
// failover watchdog, hbctl set watch and core watch), e2e/rebalance
// (bucket moves and rebalances: killed or paused at each step, under load,
// with archived packets, after a failover, the bucket lease; and
// BenchmarkRebalance), e2e/verify (hbctl verify, the money audit, on a
// live cluster: during handovers, orphans, the packets it names),
// e2e/archive (the hbarchive binary and archived packets' openers),
// e2e/crash (an hbserver killed, drained by SIGTERM, or cut off from the
// meta database), e2e/metrics (what Prometheus sees of a loaded cluster),
// e2e/replication (reads from a SET's replica), e2e/liveness (a host that
// vanishes without closing its connections: its sessions, locks and waits
// end within seconds), e2e/face (the red-packet
// page and the operator dashboard in a real browser) and e2e/dev (the dev
// cluster of `make up` and its supervisor). Beside the commands stay only
// their own tests that start no cluster: flag parsing, usage and printing.
// Split in packages, they run in parallel under `go test ./...`.
//
// Every test that needs MariaDB, memcached, a cluster or Chromium skips
// under `go test -short` (dbtest.Need); `make test` runs them all.
package e2e
