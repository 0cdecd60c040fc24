// Package metrics_test holds hongbao's end-to-end tests of a whole cluster
// scraped by a real Prometheus: every process's admin /metrics and the
// alerting rules.
package metrics_test
