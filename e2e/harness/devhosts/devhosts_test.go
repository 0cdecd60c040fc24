package devhosts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/configs"
)

// fakeFile is hosts.json for Layout with made-up addresses, no namespaces.
func fakeFile() *File {
	f := &File{Net: "t"}
	for i, p := range Layout() {
		f.Hosts = append(f.Hosts, Host{Host: p.Key(), NetNS: "t-" + p.Key(), Addr: fmt.Sprintf("10.1.0.%d", i+2)})
	}
	return f
}

// TestRewriteDevConfig: every address of configs/dev.yaml belongs to a
// process of Layout, on its host, and the result still loads.
func TestRewriteDevConfig(t *testing.T) {
	seen := map[int]string{}
	for _, p := range Layout() {
		for _, port := range p.Ports {
			if o, ok := seen[port]; ok {
				t.Fatalf("port %d: %s and %s", port, o, p.Key())
			}
			seen[port] = p.Key()
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "configs", "dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := fakeFile()
	out, err := f.Rewrite(raw)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dev.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	router, _ := f.Addr("router-r1")
	replica, _ := f.Addr("mariadb-a-replica")
	etcd3, _ := f.Addr("etcd-e3")
	if c.Router.Listen != router+":8080" || !strings.Contains(c.Sets[0].Replicas[0], replica+":3317") ||
		c.Etcd.Endpoints[2] != etcd3+":2579" {
		t.Errorf("router %s, SET a's replica %v, etcd %v: not on their hosts", c.Router.Listen, c.Sets[0].Replicas, c.Etcd.Endpoints)
	}
	if _, err := f.Rewrite([]byte("x: 127.0.0.1:1234\n")); err == nil {
		t.Error("an address of no process was rewritten")
	}
	if _, err := f.Rewrite([]byte("x: localhost:8080\n")); err == nil {
		t.Error("localhost was left")
	}
}
