package main

import (
	"flag"
	"path/filepath"
	"strings"
)

// down stops the dev cluster whose pid files are in -run, in the order
// that leaves nothing restarting what was stopped: the supervisors first
// (each stops its process), then any process left without one and the
// background schema ensure, then etcd, then memcached and MariaDB. The test
// instances (*-test-*) are left alone: they belong to make test.
func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	run := fs.String("run", ".run", "directory of the pid files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, group := range [][]string{
		{"sup-router-*.pid", "sup-server-*.pid", "sup-settler-*.pid", "sup-watch-*.pid"},
		{"router-*.pid", "server-*.pid", "settler-*.pid", "watch-*.pid", "ensure.pid"},
		// etcd after hbwatch, whose leases it holds
		{"sup-etcd-*.pid", "etcd-*.pid"},
		{"memcached-*.pid", "mariadb-*.pid"},
	} {
		for _, glob := range group {
			files, err := filepath.Glob(filepath.Join(*run, glob))
			if err != nil {
				return err
			}
			for _, f := range files {
				if strings.Contains(filepath.Base(f), "-test-") {
					continue
				}
				stop(f)
			}
		}
	}
	return nil
}
