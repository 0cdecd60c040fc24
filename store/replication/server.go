package replication

import (
	"strconv"
	"time"
)

// Server is a MariaDB server of hongbao's, as the dev cluster
// (scripts/dev.sh through cmd/hbdev) and the test harnesses (dbtest) start
// one: where its files are, how much memory it takes and, for a member of
// a replicated database, its role. Args is its command line: the one
// place MariaDB's server options are written down.
type Server struct {
	DataDir string // --datadir; a member's binary log is DataDir/binlog
	Socket  string // --socket
	Port    int    // TCP port, on Bind
	// Bind is the address it listens on: "" for 127.0.0.1 (one host);
	// a host's own address when the cluster's hosts are apart (make up
	// HOSTS=1), where replicas and clients reach it from other hosts.
	Bind     string
	PidFile  string // "" for MariaDB's default
	TmpDir   string // "" for MariaDB's default
	LogError string // the error log
	// User is --user: "root" when started as root (mariadbd refuses to
	// run as root without it), "" otherwise.
	User string
	// BufferPool and RedoLog size InnoDB (innodb_buffer_pool_size,
	// innodb_log_file_size), e.g. "1G" and "512M".
	BufferPool, RedoLog string
	// ThreadPool serves connections from a pool of threads
	// (pool-of-threads) rather than a thread per connection. A member of
	// a replicated database never has one (see Args).
	ThreadPool bool
	// Member makes it a member of a replicated database (ServerArgs);
	// nil: a lone server, without a binary log.
	Member *Member
}

// Member is a server's place in a replicated database.
type Member struct {
	ServerID int
	// Primary: a semi-sync master, writable; otherwise a semi-sync
	// replica, read-only.
	Primary bool
	// SemiSyncTimeout is rpl_semi_sync_master_timeout (0 waits forever).
	SemiSyncTimeout time.Duration
}

// Args returns the server's mariadbd options.
//
// Durable commits (the redo log flushed at every commit, doublewrite on):
// an open answered "opened" must survive a crash. The open path is point
// reads and writes by primary key: the optimizer need not read column
// statistics for every statement. The table caches hold a SET's day
// tables (2,000 a day for 1,000 buckets): with MariaDB's defaults (2,000
// open, 400 definitions) a crowd over every bucket waits in "Opening
// tables".
//
// A member of a replicated database has a thread per connection, no
// thread pool: a semi-sync primary's committing threads wait for the
// replica's acknowledgement; when they fill the pool's workers (a kill -9
// and restart under load: every client reconnects and commits), the
// replica's own reconnection waits for a worker to authenticate it, never
// gets one, and the server wedges for good (seen in the chaos run).
func (s Server) Args() []string {
	bind := s.Bind
	if bind == "" {
		bind = "127.0.0.1"
	}
	args := []string{"--no-defaults", "--datadir=" + s.DataDir, "--socket=" + s.Socket,
		"--port=" + strconv.Itoa(s.Port), "--bind-address=" + bind}
	if s.PidFile != "" {
		args = append(args, "--pid-file="+s.PidFile)
	}
	if s.TmpDir != "" {
		args = append(args, "--tmpdir="+s.TmpDir)
	}
	if s.User != "" {
		args = append(args, "--user="+s.User)
	}
	args = append(args, "--skip-name-resolve")
	threads := "one-thread-per-connection"
	if m := s.Member; m != nil {
		for _, a := range ServerArgs(m.ServerID, m.SemiSyncTimeout, m.Primary) {
			if a == "--log-bin" {
				a = "--log-bin=" + s.DataDir + "/binlog"
			}
			args = append(args, a)
		}
		args = append(args, ReadOnlyArg(!m.Primary))
	} else {
		args = append(args, "--skip-log-bin")
		if s.ThreadPool {
			threads = "pool-of-threads"
		}
	}
	return append(args, "--thread-handling="+threads,
		"--use-stat-tables=never", "--optimizer-use-condition-selectivity=1",
		"--innodb-buffer-pool-size="+s.BufferPool, "--innodb-log-file-size="+s.RedoLog,
		"--innodb-flush-log-at-trx-commit=1",
		"--max-connections=2000", "--table-open-cache=20000", "--table-definition-cache=20000",
		"--open-files-limit=65535", "--log-error="+s.LogError)
}

// ReadOnlyArg is the option that makes a server read-only (a replica: the
// application's account cannot write through it) or not.
func ReadOnlyArg(readOnly bool) string {
	if readOnly {
		return "--read-only=1"
	}
	return "--read-only=0"
}
