package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// The faults that fail a SET over: a dead primary, a cut replica link,
// and bringing the old primary back as a replica.

// failsOver reports whether a kind of fault fails a SET over (its SET is
// then one failoverSet picks).
func failsOver(kind string) bool {
	return kind == failover || kind == linkCut || kind == replicaThenPrimary
}

// killsMariaDB reports whether a kind of fault may kill a MariaDB (-9,
// or its host's power): MariaDB 10.11 killed among CREATE TABLEs may not
// recover at all ("Missing FILE_CREATE, FILE_DELETE or FILE_MODIFY before
// FILE_CHECKPOINT for tablespace ...", the error of MariaDB's MDEV-40728
// and MDEV-41152 on FILE_CREATE recovery, fixed upstream after 10.11.14):
// a fault of MariaDB's own DDL recovery, not one hongbao can answer (a
// make test chaos run met it while the new cluster created its day
// tables).
func killsMariaDB(kind string) bool {
	return kind == killMariaDB || kind == powerLoss || kind == setPowerLoss
}

// failoverSet picks a SET that can be failed over (one with replicas
// whose MariaDB holds neither the meta nor the wallet database: those stay
// on their server), or says why none can; set when none is picked.
func (d *dev) failoverSet(set configs.Set) (configs.Set, string) {
	if !d.replica {
		return set, "the configuration names no replicas"
	}
	var ok []configs.Set
	for _, s := range d.sets {
		if len(s.Replicas) > 0 && !sameServer(s.MySQLDSN, d.cfg.MetaDSN) && !sameServer(s.MySQLDSN, d.cfg.WalletDSN) {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return set, "every SET with replicas holds the meta or wallet database"
	}
	return ok[d.rng.IntN(len(ok))], ""
}

// failover kills SET set's primary MariaDB (as the meta database names
// it) and fails over with hbctl set failover, which promotes its replica;
// then the killed server comes back as the new primary's replica
// (restartAsReplica).
//
// The dev cluster has one replica per SET: by default its writes would
// stall from the failover until a replica follows the new primary, and a
// reseed's dump of a primary whose commits wait for an acknowledgement
// may wait behind them. So a SET with one replica fails over with
// --accept-single-copy (what TestFailoverSingleReplica tests apart):
// acknowledged on one machine until the rejoin, while no other fault hits
// (faults come one at a time). Recovered when rejoin succeeded and the
// router is ready.
func (d *dev) failover(ctx context.Context, set configs.Set) (time.Duration, error) {
	name, _ := d.primary(ctx, set)
	_, t0, err := d.kill("mariadb-" + name)
	if err != nil {
		return 0, err
	}
	if err := d.failoverCmd(ctx, set); err != nil {
		return time.Since(t0), err
	}
	return d.restartAsReplica(ctx, set, name, t0)
}

// killPrimary kills SET set's primary MariaDB and waits until it answers
// again (the supervisor starts it). A restart slower than the watcher's
// --after (MariaDB's crash recovery on a loaded machine) meets the
// watcher's failover: the SET's replica is its primary then, and the old
// one waits, read-only, for what an operator does next, while the new
// one's commits wait for a replica. So that is done, as after a failover
// of the operator's own: the old primary comes back as the new one's
// replica (restartAsReplica), and the recovery counts it.
func (d *dev) killPrimary(ctx context.Context, set configs.Set) (string, time.Duration, error) {
	name, dsn := d.primary(ctx, set)
	target := "MariaDB " + name
	took, err := d.killInfra(ctx, "mariadb-"+name, func() error { return pingSQL(ctx, dsn) })
	if err != nil || !d.replica {
		return target, took, err
	}
	time.Sleep(2 * time.Second) // a failover the watcher decided as the restart ended: done by now
	if now, _ := d.primary(ctx, set); now != name {
		fmt.Fprintf(d.notes, "%s  %s: the watcher failed over to %s while %s restarted; rejoining %s as an operator would\n",
			time.Now().Format("15:04:05"), set.Name, now, name, name)
		target += fmt.Sprintf(" (the watcher failed over to %s)", now)
		if _, _, err := d.kill("mariadb-" + name); err != nil {
			return target, took, err
		}
		more, err := d.restartAsReplica(ctx, set, name, time.Now())
		return target, took + more, err
	}
	return target, took, nil
}

// cutAndFailover is issue #23's first check as a fault: SET set's replicas
// stop receiving from its primary (STOP SLAVE IO_THREAD) while the load
// goes on, so its commits wait for an acknowledgement nobody sends; 2-5 s
// later the operator fails it over to a replica while the old primary
// still runs. Nothing that waited may be read or paid anywhere: the
// run's checks (every acknowledged answer kept, money conserved, verify)
// say so. The old primary is then killed and comes back as a replica
// (restartAsReplica).
func (d *dev) cutAndFailover(ctx context.Context, set configs.Set) (time.Duration, error) {
	name, dsn := d.primary(ctx, set)
	replicas, err := d.replicasOf(ctx, set, dsn)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	for _, r := range replicas {
		if err := d.asAdmin(ctx, r, "STOP SLAVE IO_THREAD"); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Duration(2000+d.rng.IntN(3000)) * time.Millisecond)
	if err := d.failoverCmd(ctx, set); err != nil {
		return time.Since(t0), err
	}
	if _, _, err := d.kill("mariadb-" + name); err != nil {
		return time.Since(t0), err
	}
	return d.restartAsReplica(ctx, set, name, t0)
}

// failoverCmd runs hbctl set failover on set (--accept-single-copy when it
// has one replica).
func (d *dev) failoverCmd(ctx context.Context, set configs.Set) error {
	args := []string{"set", "failover", set.Name, "-config", d.config}
	if len(set.Replicas) == 1 {
		args = append(args, "--accept-single-copy")
	}
	if out, err := d.hbctl(ctx, args...); err != nil {
		return fmt.Errorf("hbctl set failover %s: %w\n%s", set.Name, err, out)
	}
	return nil
}

// restartAsReplica starts the killed old primary name of set again as a
// replica (scripts/dev.sh's .new-replica mark: read-only, a semi-sync
// replica whose crash recovery drops what no replica acknowledged) and
// rejoins it with hbctl set rejoin. When rejoin refuses it (errant
// transactions: DDL in its binary log, e.g. of schema ensure or the
// archiver, which crash recovery cannot undo) it is thrown away and seeded
// again from the new primary (scripts/dev.sh reseed), as an operator
// would, and rejoined. Recovered (the time since t0) when the router is
// ready after it.
func (d *dev) restartAsReplica(ctx context.Context, set configs.Set, name string, t0 time.Time) (time.Duration, error) {
	mark := filepath.Join(d.run, "mariadb-"+name+".new-replica")
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		return time.Since(t0), err
	}
	if out, err := d.devsh(ctx, "infra"); err != nil {
		return time.Since(t0), fmt.Errorf("scripts/dev.sh infra after the failover of %s: %w\n%s", set.Name, err, out)
	}
	if err := d.rejoin(ctx, set, name); err != nil {
		return time.Since(t0), err
	}
	if err := os.Remove(mark); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return time.Since(t0), err
	}
	return until(ctx, t0, func() error { return httpOK("http://" + d.cfg.Router.Listen + "/readyz") })
}

// replicasOf returns SET set's replicas as the meta database names them,
// primary aside.
func (d *dev) replicasOf(ctx context.Context, set configs.Set, primary string) ([]string, error) {
	t, err := d.topology(ctx)
	if err != nil {
		return nil, err
	}
	s, ok := t.Set(set.Name)
	if !ok {
		return nil, fmt.Errorf("no SET %s in the topology", set.Name)
	}
	var out []string
	for _, r := range s.Replicas {
		if !sameServer(r, primary) {
			out = append(out, r)
		}
	}
	return out, nil
}

// topology is the topology as the meta database holds it now.
func (d *dev) topology(ctx context.Context) (*topology.Map, error) {
	meta, err := topology.OpenMeta(ctx, d.cfg.MetaDSN, d.cfg.CoreMembers(), false)
	if err != nil {
		return nil, err
	}
	defer meta.Close()
	return topology.Load(ctx, meta)
}

// asAdmin runs stmt on dsn's server as the operator (replication's admin
// account), within 5 s.
func (d *dev) asAdmin(ctx context.Context, dsn, stmt string) error {
	admin, err := replication.WithUser(dsn, d.cfg.Replication.AdminUser, d.cfg.Replication.AdminPassword)
	if err != nil {
		return err
	}
	db, err := sqldb.Open(admin, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := db.ExecContext(c, stmt); err != nil {
		return fmt.Errorf("%s on %s: %w", stmt, sqldb.Addr(dsn), err)
	}
	return nil
}

// rejoin runs hbctl set rejoin until it succeeds (at most 90 s); when it
// refuses the old primary old for errant transactions, old is seeded
// again from the SET's new primary (scripts/dev.sh reseed) and rejoined.
func (d *dev) rejoin(ctx context.Context, set configs.Set, old string) error {
	errant, err := d.tryRejoin(ctx, set)
	if err != nil || errant == "" {
		return err
	}
	primary, _ := d.primary(ctx, set)
	fmt.Fprintf(d.notes, "%s  %s: rejoin of %s refused, rebuilding it from %s: %s\n", time.Now().Format("15:04:05"), set.Name, old, primary, errant)
	if out, err := d.devsh(ctx, "reseed", old, primary); err != nil {
		return fmt.Errorf("scripts/dev.sh reseed %s %s: %w\n%s", old, primary, err, out)
	}
	if errant, err = d.tryRejoin(ctx, set); errant != "" {
		return fmt.Errorf("%s still has errant transactions after its reseed: %s", old, errant)
	}
	return err
}

// tryRejoin runs hbctl set rejoin until it succeeds or refuses for errant
// transactions (errant: its refusal), at most 90 s.
func (d *dev) tryRejoin(ctx context.Context, set configs.Set) (errant string, err error) {
	_, err = until(ctx, time.Now(), func() error {
		out, err := d.hbctl(ctx, "set", "rejoin", set.Name, "-config", d.config)
		if err != nil && strings.Contains(string(out), "errant") {
			errant = strings.TrimSpace(string(out))
			return nil
		}
		if err != nil {
			return fmt.Errorf("hbctl set rejoin %s: %w\n%s", set.Name, err, out)
		}
		return nil
	})
	return errant, err
}

// hbctl runs the dev cluster's hbctl.
func (d *dev) hbctl(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, filepath.Join(d.bin, "hbctl"), args...).CombinedOutput()
}

// primary returns scripts/dev.sh's name of SET set's primary MariaDB
// (mariadb-NAME) and its DSN, as the meta database names it (after a
// failover, one of its replicas); the configuration's when the meta
// database does not answer.
func (d *dev) primary(ctx context.Context, set configs.Set) (name, dsn string) {
	dsn = set.MySQLDSN
	if d.cfg.MetaDSN != "" {
		if db, err := sqldb.Open(d.cfg.MetaDSN, 1); err == nil {
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			var cur string
			if db.QueryRowContext(c, "SELECT mysql_dsn FROM sets WHERE name = ?", set.Name).Scan(&cur) == nil {
				dsn = cur
			}
			cancel()
			db.Close()
		}
	}
	for i, r := range set.Replicas {
		if sameServer(dsn, r) {
			if i == 0 {
				return set.Name + "-replica", dsn
			}
			return fmt.Sprintf("%s-replica%d", set.Name, i+1), dsn
		}
	}
	return set.Name, dsn
}

// sameServer reports whether two DSNs reach the same address.
func sameServer(a, b string) bool {
	ca, err1 := mysql.ParseDSN(a)
	cb, err2 := mysql.ParseDSN(b)
	return err1 == nil && err2 == nil && ca.Addr == cb.Addr
}
