package settings

import (
	"testing"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestPoolsFollowTheSet: each pool a process has is pointed at the DSN the
// topology names for it (the read replica at the first replica), and a
// pool it has not (the settler's archive and replica) is left alone. No
// connection is made: switching only changes what new connections dial.
func TestPoolsFollowTheSet(t *testing.T) {
	open := func(dsn string) *sqldb.Switch {
		t.Helper()
		sw, err := sqldb.OpenSwitch(dsn, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sw.DB().Close() })
		return sw
	}
	const old, primary, cold, r1, r2 = "u@tcp(old:3306)/db", "u@tcp(p:3306)/db", "u@tcp(cold:3306)/db", "u@tcp(r1:3306)/db", "u@tcp(r2:3306)/db"
	s := topology.Set{Name: "a", MySQLDSN: primary, ArchiveDSN: cold, Replicas: []string{r1, r2}}

	all := Pools{Primary: open(old), Archive: open(old), Replica: open(old)}
	all.follow(s, zap.NewNop())
	for _, c := range []struct {
		what string
		sw   *sqldb.Switch
		want string
	}{{"primary", all.Primary, primary}, {"archive", all.Archive, cold}, {"read replica", all.Replica, r1}} {
		if got := c.sw.DSN(); got != c.want {
			t.Errorf("the %s pool dials %s; want %s", c.what, got, c.want)
		}
	}

	settler := Pools{Primary: open(old)}
	settler.follow(s, zap.NewNop()) // must not touch the nil pools
	if got := settler.Primary.DSN(); got != primary {
		t.Errorf("a primary pool alone dials %s; want %s", got, primary)
	}

	if got := ReadReplica(primary, nil); got != primary {
		t.Errorf("ReadReplica without replicas = %s; want the primary %s", got, primary)
	}
}
