package replication_test

import (
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// newLag is the Lag of g's first replica, as hbserver makes it.
func newLag(t *testing.T, g *dbtest.Group, max time.Duration) *replication.Lag {
	return replication.NewLag(dbtest.Open(t, g.Primary.AppDSN(), 2), dbtest.Open(t, g.Replicas[0].AppDSN(), 4), max)
}
