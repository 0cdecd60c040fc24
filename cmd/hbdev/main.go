// Command hbdev runs the dev cluster's processes for scripts/dev.sh (make
// run, make up, make down, make test): it writes MariaDB's command line
// (replication.Server, the options the test harnesses use too), and
// supervises the project's binaries with pid files under .run/, as
// scripts/dev.sh did in bash. dev.sh keeps installing packages and the
// order of the cluster's steps; every process it starts, checks or stops
// goes through hbdev.
//
//	hbdev mariadbd-args -datadir DIR -socket SOCK -port N [-server-id N -primary] ...
//	hbdev install-datadir DIR (a fresh MariaDB data directory: replication.InstallDataDir)
//	hbdev start -run DIR KIND NAME CMD...    a supervised process in the background
//	hbdev supervise -run DIR KIND NAME CMD...  the supervisor itself (start runs it)
//	hbdev restart-with -run DIR KIND NAME [ARG...]  restart it with ARGs added (none: as started)
//	hbdev alive PIDFILE                        exit 0 when its process runs
//	hbdev running PIDFILE PORT                 alive and listening on PORT here
//	hbdev stop PIDFILE...                      TERM, then KILL, until gone
//	hbdev down -run DIR                        stop the dev cluster (make down)
//	hbdev wait-http URL                        until URL answers 2xx (10 s)
//	hbdev hosts-up -run DIR -json FILE ...      make up HOSTS=1's hosts, hosts.json, config
//	hbdev hosts-env HOSTS.JSON                  each process's address and namespace, for bash
//	hbdev hosts-roles HOSTS.JSON RUN            the MariaDBs' roles into hosts.json
//	hbdev hosts-down HOSTS.JSON                 remove the hosts (make down)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hongbao-dev/hongbao/store/replication"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "mariadbd-args":
		err = mariadbdArgs(args)
	case "install-datadir":
		if len(args) != 1 {
			usage()
		}
		err = replication.InstallDataDir(args[0])
	case "start":
		err = start(args)
	case "supervise":
		err = supervise(args)
	case "restart-with":
		err = restartWith(args)
	case "alive":
		if len(args) != 1 {
			usage()
		}
		if !alive(args[0]) {
			os.Exit(1)
		}
	case "running":
		if len(args) != 2 {
			usage()
		}
		if !running(args[0], args[1]) {
			os.Exit(1)
		}
	case "stop":
		for _, f := range args {
			stop(f)
		}
	case "down":
		err = down(args)
	case "wait-http":
		if len(args) != 1 {
			usage()
		}
		err = waitHTTP(args[0])
	case "hosts-up":
		err = hostsUp(context.Background(), args)
	case "hosts-env":
		err = hostsEnv(args)
	case "hosts-roles":
		err = hostsRoles(args)
	case "hosts-down":
		err = hostsDown(context.Background(), args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hbdev "+cmd+":", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: hbdev mariadbd-args|install-datadir|start|supervise|restart-with|alive|running|stop|down|wait-http|hosts-up|hosts-env|hosts-roles|hosts-down ... (see go doc ./cmd/hbdev)")
	os.Exit(2)
}
