package clustertest

import (
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/store/audit"
)

// CheckInvariants runs the money audit behind hbctl verify (store/audit)
// in process on the cluster, as the cluster's configuration names its
// SETs and wallet (settings.RunAudit, as the router's dashboard does), and fails the test with every violation it finds (or its error).
// Run it on a quiet cluster (outbox drained). It returns the report.
func (c *Cluster) CheckInvariants(t testing.TB) *audit.Report {
	t.Helper()
	cfg, err := configs.Load(c.Config, Environ())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := settings.RunAudit(t.Context(), cfg, audit.Options{}, time.Now)
	if err != nil {
		t.Errorf("audit: %v", err)
		return rep
	}
	if bad := rep.Violations(); len(bad) > 0 {
		t.Errorf("audit: %d violation(s):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return rep
}
