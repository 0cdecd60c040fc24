// Package devhosts lays the dev cluster (scripts/dev.sh, cmd/hbdev) out on
// hosts of its own: make up HOSTS=1 puts each process (the router, each
// server and settler, each MariaDB primary and replica, each memcached,
// hbwatch, each etcd member) on a network namespace of its own with its
// own address on one bridge (e2e/harness/hosts), so that nothing can lean
// on 127.0.0.1 unnoticed. It knows which process listens on which port,
// rewrites the dev configuration's addresses to the hosts' and writes
// hosts.json, the map of hosts and processes that tests and make down
// read.
package devhosts

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hongbao-dev/hongbao/e2e/harness/hosts"
)

// Proc is one process of the dev cluster as scripts/dev.sh starts it.
type Proc struct {
	Kind string // router, server, settler, mariadb, memcached, watch, etcd
	ID   string // dev.sh's name: a1, a-replica, core, w1 (its pid file is KIND-ID.pid)
	// Name is hosts.json's: the SET's for a SET's processes, core for the
	// core group's MariaDB, the process's own (r1, w1, e1) otherwise.
	Name  string
	Ports []int // every port it listens on (public, admin, peer)
}

// Key is the process's name among all: KIND-ID, its pid file's stem and
// its host's name.
func (p Proc) Key() string { return p.Kind + "-" + p.ID }

// Layout is every process of the dev cluster and its ports, the ones
// configs/dev.yaml and scripts/dev.sh give it (with HOSTS=1 each is on a
// host of its own, on the same ports).
func Layout() []Proc {
	ps := []Proc{{Kind: "router", ID: "r1", Name: "r1", Ports: []int{8080, 9080}}}
	for i, s := range []string{"a1", "a2", "b1", "b2"} {
		ps = append(ps, Proc{Kind: "server", ID: s, Name: s[:1], Ports: []int{8081 + i, 9081 + i}})
	}
	// SET c's servers came last: their admin ports follow the settlers'.
	ps = append(ps, Proc{Kind: "server", ID: "c1", Name: "c", Ports: []int{8085, 9087}},
		Proc{Kind: "server", ID: "c2", Name: "c", Ports: []int{8086, 9088}})
	for i, s := range []string{"a", "b"} {
		ps = append(ps, Proc{Kind: "settler", ID: s, Name: s, Ports: []int{9085 + i}})
	}
	ps = append(ps, Proc{Kind: "settler", ID: "c", Name: "c", Ports: []int{9089}})
	for i, set := range []string{"core", "a", "b", "c"} {
		port := 3346
		if i > 0 {
			port = 3306 + 10*i
		}
		ps = append(ps, Proc{Kind: "mariadb", ID: set, Name: set, Ports: []int{port}},
			Proc{Kind: "mariadb", ID: set + "-replica", Name: set, Ports: []int{port + 1}})
	}
	for i, s := range []string{"a", "b", "c"} {
		ps = append(ps, Proc{Kind: "memcached", ID: s, Name: s, Ports: []int{11221 + 10*i}})
	}
	ps = append(ps, Proc{Kind: "watch", ID: "w1", Name: "w1", Ports: []int{9090}})
	for i := range 3 {
		id := fmt.Sprintf("e%d", i+1)
		ps = append(ps, Proc{Kind: "etcd", ID: id, Name: id, Ports: []int{2379 + 100*i, 2380 + 100*i}})
	}
	return ps
}

// File is hosts.json: the API's address and each host with its process.
type File struct {
	API    string `json:"api"`    // http://ADDR:PORT, the router's public address
	Net    string `json:"net"`    // the hosts.Net's name (its bridge is hb<net>)
	Prefix string `json:"prefix"` // the bridge's network
	Hosts  []Host `json:"hosts"`
}

// Host is one network namespace and what runs on it.
type Host struct {
	Host      string    `json:"host"`  // the process's key (KIND-ID)
	NetNS     string    `json:"netns"` // ip netns exec NETNS ...
	Addr      string    `json:"addr"`
	Processes []Process `json:"processes"`
}

// Process is one process on a host.
type Process struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Role    string `json:"role,omitempty"` // a MariaDB's: primary or replica, as started
	PidFile string `json:"pid_file"`
}

// Up makes a host per process of Layout on a new hosts.Net of name over
// prefix and returns hosts.json's content for a cluster whose pid files
// are in run. On failure nothing is left behind.
func Up(ctx context.Context, name string, prefix netip.Prefix, run string) (*File, error) {
	n, err := hosts.New(ctx, name, prefix)
	if err != nil {
		return nil, fmt.Errorf("devhosts: %w", err)
	}
	f := &File{Net: name, Prefix: prefix.String()}
	for _, p := range Layout() {
		h, err := n.Add(ctx, p.Key())
		if err != nil {
			_ = n.Close()
			return nil, fmt.Errorf("devhosts: host %s: %w", p.Key(), err)
		}
		f.Hosts = append(f.Hosts, Host{Host: p.Key(), NetNS: h.NS, Addr: h.Addr.String(),
			Processes: []Process{{Kind: p.Kind, Name: p.Name, PidFile: filepath.Join(run, p.Key()+".pid")}}})
		if p.Key() == "router-r1" {
			f.API = "http://" + h.Addr.String() + ":" + strconv.Itoa(p.Ports[0])
		}
	}
	return f, nil
}

// Present: every namespace of f and its bridge still exist here (make up
// again after make up: the hosts are kept). Namespaces whose bridge is
// gone (made from a network namespace that no longer exists) reach
// nothing: they are made again.
func (f *File) Present() bool {
	if _, err := net.InterfaceByName("hb" + f.Net); err != nil {
		return false
	}
	for _, h := range f.Hosts {
		if _, err := os.Stat("/run/netns/" + h.NetNS); err != nil {
			return false
		}
	}
	return len(f.Hosts) > 0
}

// Down removes f's namespaces and bridge (stop their processes first).
func (f *File) Down(ctx context.Context) error {
	var ns []string
	for _, h := range f.Hosts {
		ns = append(ns, h.NetNS)
	}
	return hosts.Remove(ctx, f.Net, ns)
}

// Addr is the address of the host of the process of key (KIND-ID).
func (f *File) Addr(key string) (string, bool) {
	for _, h := range f.Hosts {
		if h.Host == key {
			return h.Addr, true
		}
	}
	return "", false
}

// Roles sets each MariaDB's role from the file dev.sh writes when it
// starts one (run/mariadb-ID.role: primary or replica).
func (f *File) Roles(run string) {
	for i := range f.Hosts {
		for j := range f.Hosts[i].Processes {
			p := &f.Hosts[i].Processes[j]
			if p.Kind != "mariadb" {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(run, f.Hosts[i].Host+".role")); err == nil {
				p.Role = strings.TrimSpace(string(b))
			}
		}
	}
}

// Read reads a hosts.json.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("devhosts: %s: %w", path, err)
	}
	return &f, nil
}

// Write writes f to path atomically.
func (f *File) Write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var loopback = regexp.MustCompile(`127\.0\.0\.1:([0-9]+)`)

// Rewrite returns the configuration cfg (configs/dev.yaml's text) with
// every 127.0.0.1:PORT replaced by the address of the host whose process
// listens on PORT: listeners, admin listeners, DSNs, memcached, etcd.
// A port no process of Layout owns, or a 127.0.0.1 left over, is an
// error: on hosts apart nothing may assume one host.
func (f *File) Rewrite(cfg []byte) ([]byte, error) {
	owner := map[string]string{}
	for _, p := range Layout() {
		a, ok := f.Addr(p.Key())
		if !ok {
			return nil, fmt.Errorf("devhosts: no host for %s", p.Key())
		}
		for _, port := range p.Ports {
			owner[strconv.Itoa(port)] = a
		}
	}
	var bad []string
	out := loopback.ReplaceAllFunc(cfg, func(m []byte) []byte {
		port := string(loopback.FindSubmatch(m)[1])
		a, ok := owner[port]
		if !ok {
			bad = append(bad, string(m))
			return m
		}
		return []byte(a + ":" + port)
	})
	if len(bad) > 0 {
		return nil, fmt.Errorf("devhosts: no process of the dev cluster listens on %s", strings.Join(bad, ", "))
	}
	for i, line := range strings.Split(string(out), "\n") {
		code, _, _ := strings.Cut(line, "#")
		if strings.Contains(code, "127.0.0.1") || strings.Contains(code, "localhost") {
			return nil, fmt.Errorf("devhosts: line %d still names one host: %s", i+1, strings.TrimSpace(line))
		}
	}
	return out, nil
}
