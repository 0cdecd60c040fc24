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
