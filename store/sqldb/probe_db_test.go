package sqldb_test

import (
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestProbeMember: one probe reads read_only and the failover epoch on a
// server that never failed over (no hb_core database: epoch 0), one that
// was stamped, and one turned read_only; a server that does not answer is
// an error, never a writable member.
func TestProbeMember(t *testing.T) {
	m := dbtest.StartMariaDB(t)
	db := dbtest.Open(t, m.DSN, 2)
	ctx := t.Context()
	steps := []struct {
		name string
		do   func() error
		want sqldb.Probe
	}{
		{"never failed over", func() error { return nil }, sqldb.Probe{Writable: true, Epoch: 0}},
		{"stamped at epoch 7", func() error { return sqldb.StampEpoch(ctx, db, 7, "10.0.0.7:3306") }, sqldb.Probe{Writable: true, Epoch: 7}},
		{"stamped again at epoch 9", func() error { return sqldb.StampEpoch(ctx, db, 9, "10.0.0.9:3306") }, sqldb.Probe{Writable: true, Epoch: 9}},
		{"fenced", func() error { _, err := db.ExecContext(ctx, "SET GLOBAL read_only = 1"); return err }, sqldb.Probe{Writable: false, Epoch: 9}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := sqldb.ProbeMember(ctx, db); got != s.want {
			t.Errorf("%s: probe = %+v, want %+v", s.name, got, s.want)
		}
	}
	m.Stop()
	if got := sqldb.ProbeMember(ctx, db); got.Err == nil || got.Writable {
		t.Errorf("a stopped server: probe = %+v, want an error and not writable", got)
	}
}
