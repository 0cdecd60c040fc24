package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go runs on.
const clockTicks = 100

// proc is one process whose CPU a run charges to the system measured.
type proc struct {
	name string
	pid  int
}

// cpuTime is the user + system CPU time pid has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are fixed: utime and stime are the 12th and
	// 13th of them.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// cpuSample is the CPU time of each process at one moment.
type cpuSample map[string]time.Duration

func sample(ps []proc) cpuSample {
	s := cpuSample{}
	for _, p := range ps {
		if d, err := cpuTime(p.pid); err == nil {
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
			if _, err := cpuTime(pid); err != nil {
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
