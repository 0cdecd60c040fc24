package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/devrun"
)

// proc is one process whose CPU a run charges to the system measured.
type proc struct {
	name string
	pid  int
}

// cpuSample is the CPU time of each process at one moment.
type cpuSample map[string]time.Duration

func sample(ps []proc) cpuSample {
	s := cpuSample{}
	for _, p := range ps {
		if d, err := devrun.CPUTime(p.pid); err == nil {
			s[p.name] = d
		}
	}
	return s
}

// since is the CPU each process used between s0 and s.
func (s cpuSample) since(s0 cpuSample) cpuSample {
	out := cpuSample{}
	for k, v := range s {
		out[k] = v - s0[k]
	}
	return out
}

func (s cpuSample) total() time.Duration {
	var t time.Duration
	for _, v := range s {
		t += v
	}
	return t
}

// split says how much of a core each kind of process used over wall,
// busiest first: "router 41%, server 38%, ...".
func (s cpuSample) split(wall time.Duration) string {
	kinds := map[string]time.Duration{}
	for k, v := range s {
		kind, _, _ := strings.Cut(k, "-")
		kinds[kind] += v
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return int(kinds[b] - kinds[a]) })
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*kinds[k].Seconds()/wall.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// systemProcs lists the dev cluster's processes from the pid files of
// scripts/dev.sh in dir: router, servers, settlers, MariaDB, memcached,
// the watchdog and the etcd members (not the test instances).
func systemProcs(dir string) ([]proc, error) {
	var ps []proc
	for _, kind := range []string{"router", "server", "settler", "mariadb", "memcached", "watch", "etcd"} {
		files, _ := filepath.Glob(filepath.Join(dir, kind+"-*.pid"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".pid")
			if strings.Contains(name, "-test-") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if _, err := devrun.CPUTime(pid); err != nil {
				return nil, fmt.Errorf("%s: process %d: %w", f, pid, err)
			}
			ps = append(ps, proc{name, pid})
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no pid files of the dev cluster in %s (scripts/dev.sh up writes them)", dir)
	}
	return ps, nil
}
