package settings

import (
	"context"
	"slices"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/store/dbtest"
)

// TestSetsFromTheMetaDatabase: with a meta database, the SETs are its
// SETs, whatever the configuration file still says; a SET the file names
// keeps its archive DSN.
func TestSetsFromTheMetaDatabase(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_test_")
	metaDSN := cfg.FormatDSN()
	meta, err := topology.OpenMeta(ctx, metaDSN, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`")
		meta.Close()
	})
	if _, err := topology.Init(ctx, meta, []topology.Set{
		{Name: "a", Servers: []string{"h1:1"}, MySQLDSN: "dsn-a", Memcached: []string{"m1:1"}},
		{Name: "c", Servers: []string{"h3:1"}, MySQLDSN: "dsn-c", Memcached: []string{"m3:1"}},
	}); err != nil {
		t.Fatal(err)
	}
	c := configs.Defaults()
	c.MetaDSN = metaDSN
	c.Sets = []configs.Set{ // an old file: b is gone, c is missing, a's address is stale
		{Name: "a", MySQLDSN: "old-dsn-a", ArchiveDSN: "cold-a"},
		{Name: "b", MySQLDSN: "dsn-b"},
	}
	got, err := Sets(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []configs.Set{
		{Name: "a", Servers: []string{"h1:1"}, MySQLDSN: "dsn-a", Memcached: []string{"m1:1"}, ArchiveDSN: "cold-a"},
		{Name: "c", Servers: []string{"h3:1"}, MySQLDSN: "dsn-c", Memcached: []string{"m3:1"}},
	}
	if !slices.EqualFunc(got, want, func(x, y configs.Set) bool {
		return x.Name == y.Name && x.MySQLDSN == y.MySQLDSN && x.ArchiveDSN == y.ArchiveDSN &&
			slices.Equal(x.Servers, y.Servers) && slices.Equal(x.Memcached, y.Memcached)
	}) {
		t.Errorf("Sets = %+v, want %+v", got, want)
	}
	if got[1].Cold() != "dsn-c" {
		t.Errorf("SET c's archive %q, want its own MySQL", got[1].Cold())
	}

	c.MetaDSN = ""
	if got, _ := Sets(ctx, c); len(got) != 2 || got[1].Name != "b" {
		t.Errorf("without a meta database: %+v, want the file's SETs", got)
	}
}
