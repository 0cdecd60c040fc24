package topology_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// freshMeta is an empty meta database of its own on the test MariaDB.
func freshMeta(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_init_")
	meta, err := topology.OpenMeta(context.Background(), cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`")
		meta.Close()
	})
	return meta
}

const (
	dsnP  = "hongbao:hongbao@tcp(127.0.0.1:3316)/"
	dsnR  = "hongbao:hongbao@tcp(127.0.0.1:3317)/"
	dsnR2 = "hongbao:hongbao@tcp(127.0.0.1:3318)/"
)

// TestInitKeepsAFailover (issue 23, finding 8): after a failover the
// meta database names the promoted replica as the SET's MySQL; topology
// init (make up runs it at every start) keeps it, whatever the
// configuration file's replica list says, and says so (once per init). Before, a file
// whose replicas differed from the meta database's (a replica added to
// the file, or the old primary not listed) put the old primary back:
// servers and settlers would have written to a server that is no longer
// the primary.
func TestInitKeepsAFailover(t *testing.T) {
	ctx := context.Background()
	meta := freshMeta(t)
	file := []topology.Set{{Name: "a", Servers: []string{"s1"}, MySQLDSN: dsnP, Replicas: []string{dsnR}}}
	if _, err := topology.Init(ctx, meta, file); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Failover(ctx, meta, "a", dsnP, dsnR, []string{dsnP}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		replicas []string
	}{
		{"the same members", []string{dsnR}},
		{"a replica added to the file", []string{dsnR, dsnR2}},
		{"the file without replicas", nil},
	} {
		file[0].Replicas = tc.replicas
		var said []string
		m, err := topology.InitNoting(ctx, meta, file, func(s string) { said = append(said, s) })
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.Set("a")
		if s.MySQLDSN != dsnR || !slices.Equal(s.Replicas, []string{dsnP}) {
			t.Errorf("%s: init made SET a's MySQL %s, replicas %v; want the failover's: %s, [%s]", tc.name, s.MySQLDSN, s.Replicas, dsnR, dsnP)
		}
		if len(said) != 1 || !strings.Contains(said[0], "SET a") || !strings.Contains(said[0], "127.0.0.1:3317") ||
			!strings.Contains(said[0], "hbctl set failover") {
			t.Errorf("%s: init said %q; want one note naming SET a, the kept primary 127.0.0.1:3317 and what to run", tc.name, said)
		}
	}

	// Without a failover the file's replica list is taken (an operator
	// adding a replica), the primary being the same.
	meta2 := freshMeta(t)
	file[0].Replicas = []string{dsnR}
	if _, err := topology.Init(ctx, meta2, file); err != nil {
		t.Fatal(err)
	}
	file[0].Replicas = []string{dsnR, dsnR2}
	m, err := topology.Init(ctx, meta2, file)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Set("a"); s.MySQLDSN != dsnP || !slices.Equal(s.Replicas, []string{dsnR, dsnR2}) {
		t.Errorf("no failover, a replica added to the file: MySQL %s, replicas %v; want %s, [%s %s]", s.MySQLDSN, s.Replicas, dsnP, dsnR, dsnR2)
	}
}
