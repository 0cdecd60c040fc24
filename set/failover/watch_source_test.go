package failover

import (
	"context"
	"testing"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestWatchSourceByName: a replica set up with its primary's name
// (Master_Host "localhost") while the configuration names the primary by
// address (127.0.0.1), or the other way round, replicates from it: the
// watcher compares resolved addresses, not strings, or it never arms.
// Another port, or a host that resolves elsewhere, is another source.
// Issue 23, finding 8.
func TestWatchSourceByName(t *testing.T) {
	ctx := context.Background()
	running := func(host string, port int) replication.Status {
		return replication.Status{Configured: true, MasterHost: host, MasterPort: port, IORunning: "Yes", SQLRunning: "Yes"}
	}
	tests := []struct {
		primary string
		st      replication.Status
		want    string
	}{
		{"u:p@tcp(127.0.0.1:3316)/", running("127.0.0.1", 3316), replicating},
		{"u:p@tcp(127.0.0.1:3316)/", running("localhost", 3316), replicating},
		{"u:p@tcp(localhost:3316)/", running("127.0.0.1", 3316), replicating},
		{"u:p@tcp(LOCALHOST:3316)/", running("localhost", 3316), replicating},
		{"u:p@tcp(localhost:3316)/", running("127.0.0.1", 3317), elsewhere},
		{"u:p@tcp(127.0.0.1:3316)/", running("127.0.0.2", 3316), elsewhere},
		{"u:p@tcp(127.0.0.1:3316)/", running("no-such-host.invalid", 3316), elsewhere},
		{"u:p@tcp(127.0.0.1:3316)/", replication.Status{}, elsewhere},
	}
	for _, tt := range tests {
		v := viewOf(ctx, tt.primary, "u:p@tcp(10.0.0.9:3306)/", tt.st, nil)
		if v.state != tt.want {
			t.Errorf("primary %s, replica's source %s:%d: %s (%s), want %s", sqldb.Addr(tt.primary), tt.st.MasterHost, tt.st.MasterPort, v.state, v.what, tt.want)
		}
	}
}
