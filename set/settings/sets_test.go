package settings

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
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
	meta, err := topology.OpenMeta(ctx, metaDSN, nil, true)
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

// TestSetFromTheMetaDatabase: a process started for a SET finds it in the
// meta database when there is one, even a SET added at run time that the
// configuration file does not list (with what the file adds: admin
// listeners, an archive DSN the meta database lacks); a SET the meta
// database does not hold is refused, whatever the file says.
func TestSetFromTheMetaDatabase(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_test_")
	metaDSN := cfg.FormatDSN()
	meta, err := topology.OpenMeta(ctx, metaDSN, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`")
		meta.Close()
	})
	if _, err := topology.Init(ctx, meta, []topology.Set{
		{Name: "a", Servers: []string{"h1:1"}, MySQLDSN: "dsn-a", Memcached: []string{"m1:1"}},
	}); err != nil {
		t.Fatal(err)
	}
	// As hbctl set add does: a SET with no buckets, recorded in the meta
	// database only.
	if _, err := topology.AddSet(ctx, meta, topology.Set{Name: "c", Servers: []string{"h3:1", "h4:1"}, MySQLDSN: "dsn-c",
		Memcached: []string{"m3:1"}, ArchiveDSN: "cold-c"}); err != nil {
		t.Fatal(err)
	}
	c := configs.Defaults()
	c.MetaDSN = metaDSN
	c.Sets = []configs.Set{
		{Name: "a", MySQLDSN: "old-dsn-a", ArchiveDSN: "cold-a", Admin: []string{"h1:9"}},
		{Name: "b", MySQLDSN: "dsn-b"},
		{Name: "c", MySQLDSN: "old-dsn-c", ArchiveDSN: "old-cold-c"},
	}
	for _, tc := range []struct {
		meta, name string
		want       configs.Set
		err        string
	}{
		{meta: metaDSN, name: "a", want: configs.Set{Name: "a", Servers: []string{"h1:1"}, MySQLDSN: "dsn-a", Memcached: []string{"m1:1"},
			ArchiveDSN: "cold-a", Admin: []string{"h1:9"}}},
		{meta: metaDSN, name: "c", want: configs.Set{Name: "c", Servers: []string{"h3:1", "h4:1"}, MySQLDSN: "dsn-c", Memcached: []string{"m3:1"},
			ArchiveDSN: "cold-c"}},
		{meta: metaDSN, name: "b", err: `no SET named "b" in the meta database`},
		{meta: "", name: "b", want: configs.Set{Name: "b", MySQLDSN: "dsn-b"}},
		{meta: "", name: "d", err: `no SET named "d" in the configuration`},
	} {
		c.MetaDSN = tc.meta
		if tc.meta == "" {
			c.Sets = c.Sets[:2] // a file without c
		}
		got, err := Set(ctx, c, tc.name)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Set(%q), meta %v: %+v, %v; want an error saying %s", tc.name, tc.meta != "", got, err, tc.err)
			}
		case err != nil || got.Name != tc.want.Name || got.MySQLDSN != tc.want.MySQLDSN || got.ArchiveDSN != tc.want.ArchiveDSN ||
			!slices.Equal(got.Servers, tc.want.Servers) || !slices.Equal(got.Memcached, tc.want.Memcached) || !slices.Equal(got.Admin, tc.want.Admin):
			t.Errorf("Set(%q), meta %v: %+v, %v; want %+v", tc.name, tc.meta != "", got, err, tc.want)
		}
	}
}
