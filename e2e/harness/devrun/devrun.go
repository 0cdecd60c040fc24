// Package devrun reads the run directory of the dev cluster (scripts/dev.sh's
// .run, HB_DEV_RUN): its pid files and whether their processes still run,
// for the tools that drive the cluster from outside (hbbench, hbchaos).
package devrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Pid reads the pid file run/NAME.pid.
func Pid(run, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(run, name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Alive reports whether process pid runs: it exists and is not a zombie
// that nobody reaped.
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	return err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go runs on.
const clockTicks = 100

// CPUTime is the user + system CPU time process pid has used so far.
func CPUTime(pid int) (time.Duration, error) {
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

// WaitEnsure waits, up to limit, until the cluster's background creation
// of day tables (scripts/dev.sh up starts `hbctl schema ensure`,
// run/ensure.pid) has ended, calling waiting once if it has to wait: its
// thousands of CREATE TABLEs load MariaDB, and a primary killed among
// them holds DDL no replica acknowledged, so that it is rebuilt rather
// than rejoined after a failover. It reports whether the creation ended
// (or none ran).
func WaitEnsure(ctx context.Context, run string, limit time.Duration, waiting func()) bool {
	pid, err := Pid(run, "ensure")
	if err != nil {
		return true
	}
	for t0 := time.Now(); Alive(pid); time.Sleep(time.Second) {
		if time.Since(t0) >= limit || ctx.Err() != nil {
			return false
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
	}
	return true
}
