package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
)

// mariadbdArgs prints the options of a dev MariaDB (replication.Server),
// one a line, for dev.sh to start mariadbd with.
func mariadbdArgs(args []string) error {
	fs := flag.NewFlagSet("mariadbd-args", flag.ContinueOnError)
	var s replication.Server
	var id int
	var primary bool
	var timeout string
	fs.StringVar(&s.DataDir, "datadir", "", "data directory")
	fs.StringVar(&s.Socket, "socket", "", "Unix socket")
	fs.IntVar(&s.Port, "port", 0, "TCP port")
	fs.StringVar(&s.Bind, "bind", "", "address to listen on (default 127.0.0.1; a host's own with make up HOSTS=1)")
	fs.StringVar(&s.PidFile, "pid-file", "", "pid file")
	fs.StringVar(&s.LogError, "log-error", "", "error log")
	fs.StringVar(&s.TmpDir, "tmpdir", "", "directory of its temporary files (default MariaDB's, /tmp)")
	fs.StringVar(&s.User, "user", "", `--user ("root" when run as root)`)
	fs.StringVar(&s.BufferPool, "buffer-pool", "1G", "innodb_buffer_pool_size")
	fs.StringVar(&s.RedoLog, "redo-log", "512M", "innodb_log_file_size")
	fs.BoolVar(&s.ThreadPool, "thread-pool", false, "pool-of-threads (never on a replicated member)")
	fs.IntVar(&id, "server-id", 0, "a member of a replicated database with this server ID (0: a lone server)")
	fs.BoolVar(&primary, "primary", false, "the member is its database's primary (else a read-only replica)")
	fs.StringVar(&timeout, "semi-sync-timeout", "0", "rpl_semi_sync_master_timeout as a Go duration (0: wait forever)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.DataDir == "" || s.Socket == "" || s.Port == 0 || s.LogError == "" {
		return fmt.Errorf("-datadir, -socket, -port and -log-error are required")
	}
	if id > 0 {
		d, err := parseTimeout(timeout)
		if err != nil {
			return err
		}
		s.Member = &replication.Member{ServerID: id, Primary: primary, SemiSyncTimeout: d}
	}
	for _, a := range s.Args() {
		fmt.Println(a)
	}
	return nil
}

// parseTimeout reads a semi-sync timeout: a Go duration, "0" or "" for
// waiting forever (the config's replication.semi_sync_timeout).
func parseTimeout(v string) (time.Duration, error) {
	if v == "" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("semi-sync timeout: want e.g. 500ms or 10s, got %q", v)
	}
	return d, nil
}
