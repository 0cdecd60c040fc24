package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"

	"github.com/hongbao-dev/hongbao/e2e/harness/devhosts"
)

// hostsUp makes the dev cluster's hosts (make up HOSTS=1; see
// e2e/harness/devhosts), writes -json (hosts.json) and -out, the
// configuration -config with the hosts' addresses. Hosts that exist
// already (make up again) are kept.
func hostsUp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hosts-up", flag.ContinueOnError)
	run := fs.String("run", ".run/hosts", "directory of the pid files")
	file := fs.String("json", ".run/hosts.json", "hosts.json to write")
	name := fs.String("net", "hbd", "the hosts' net: prefix of their namespaces, bridge hb<net> (at most 8 characters)")
	prefix := fs.String("prefix", "10.88.0.0/24", "the bridge's network")
	in := fs.String("config", "configs/dev.yaml", "the one-host configuration")
	out := fs.String("out", ".run/hosts/dev.yaml", "the configuration to write, with the hosts' addresses")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pfx, err := netip.ParsePrefix(*prefix)
	if err != nil {
		return err
	}
	f, err := devhosts.Read(*file)
	if err != nil || !f.Present() {
		if f != nil {
			_ = f.Down(ctx) // a partial set of hosts from an earlier run
		}
		if f, err = devhosts.Up(ctx, *name, pfx, *run); err != nil {
			return err
		}
	}
	f.Roles(*run)
	if err := f.Write(*file); err != nil {
		return err
	}
	cfg, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	cfg, err = f.Rewrite(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, cfg, 0o644)
}

// hostsEnv prints bash assignments of each process's host address and
// namespace (ADDR[KIND-ID]=... NS[KIND-ID]=...), for dev.sh to eval.
func hostsEnv(args []string) error {
	if len(args) != 1 {
		return errors.New("want HOSTS.JSON")
	}
	f, err := devhosts.Read(args[0])
	if err != nil {
		return err
	}
	for _, h := range f.Hosts {
		fmt.Printf("ADDR[%s]=%s NS[%s]=%s\n", h.Host, h.Addr, h.Host, h.NetNS)
	}
	fmt.Printf("API=%s\n", f.API)
	return nil
}

// hostsRoles writes each MariaDB's role, as dev.sh started it, into
// hosts.json.
func hostsRoles(args []string) error {
	if len(args) != 2 {
		return errors.New("want HOSTS.JSON RUN")
	}
	f, err := devhosts.Read(args[0])
	if err != nil {
		return err
	}
	f.Roles(args[1])
	return f.Write(args[0])
}

// hostsDown removes the hosts of hosts.json (their processes stopped
// first by down) and the file.
func hostsDown(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("want HOSTS.JSON")
	}
	f, err := devhosts.Read(args[0])
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Down(ctx); err != nil {
		return err
	}
	return os.Remove(args[0])
}
