#!/usr/bin/env bash
# Dev and test infrastructure: installs MariaDB and memcached when missing and
# runs private instances (own ports, data under .run/), the SET servers and
# the router. Every process has .run/<kind>-<name>.pid and a log beside it;
# cmd/hbdev (built on first use) starts, supervises and stops them, and
# writes MariaDB's options (store/replication.Server).
#
#   scripts/dev.sh deps        install MariaDB, memcached, Prometheus (promtool) and Chromium if missing
#   scripts/dev.sh up          start the dev cluster in the background (idempotent)
#                              HB_HOSTS=1 (make up HOSTS=1): each process on a host of its own
#   scripts/dev.sh down        stop it, hosts included (idempotent)
#   scripts/dev.sh run         up, print how to use it, stop everything on Ctrl-C
#   scripts/dev.sh bench       the design comparison, then bench-e2e (make bench-compare)
#   scripts/dev.sh bench-e2e   only the end-to-end bench: wrk through the router vs bare HTTP ceilings
#   scripts/dev.sh test [ARGS] start the test instances, run vet, govulncheck and go test -race
#                              (HB_TEST_PKGS="./queue ./set/..." for some packages only)
#   scripts/dev.sh fuzz [TIME] run every fuzz target for TIME (default 20s) each
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin:/usr/local/go/bin"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# HB_DEV_RUN: another directory for the pid files, logs and data (a test's
# private cluster); .run by default.
BASE="${HB_DEV_RUN:-$ROOT/.run}"
RUN="$BASE"
CONFIG="${HB_CONFIG:-$ROOT/configs/dev.yaml}"
# HB_HOSTS=1 (make up HOSTS=1): every process on a host of its own, a
# network namespace with its own address on one bridge (hbdev hosts-up,
# e2e/harness/devhosts), reachable from here. Its data is apart, in
# BASE/hosts (MariaDB's data holds addresses: its primary's, its
# accounts'); the map of hosts is BASE/hosts.json; the configuration,
# CONFIG with the hosts' addresses, BASE/hosts/dev.yaml. ADDR and NS are
# each process's host address and namespace (by KIND-NAME).
HOSTS_JSON="$BASE/hosts.json"
HOSTS=""
[ "${HB_HOSTS:-0}" = 0 ] || HOSTS=1
SRC_CONFIG="$CONFIG"
if [ -n "$HOSTS" ]; then RUN="$BASE/hosts" CONFIG="$BASE/hosts/dev.yaml"; fi
declare -A ADDR=() NS=()
API=http://127.0.0.1:8080
mkdir -p "$RUN"
# HB_DEV_BIN: a directory for the binaries that other runs share (the
# tests' dev clusters: e2e/harness/clustertest's BinDir); RUN/bin points
# there. go build leaves a binary that matches its sources as it is, so
# only the first run of a make test links them.
if [ -n "${HB_DEV_BIN:-}" ] && [ ! -e "$RUN/bin" ]; then mkdir -p "$HB_DEV_BIN" && ln -s "$HB_DEV_BIN" "$RUN/bin"; fi

# addr KIND-NAME: the address of the host a process runs on (127.0.0.1
# on one host).
addr() { echo "${ADDR[$1]:-127.0.0.1}"; }

# on KIND-NAME: the words that run a command on the process's host
# (nothing on one host).
on() { [ -z "${NS[$1]:-}" ] || echo "ip netns exec ${NS[$1]}"; }

as_root_opt() { [ "$(id -u)" = 0 ] && echo "$1" || true; }

deps() {
  local need=()
  command -v mariadbd >/dev/null || need+=(mariadb-server mariadb-client)
  command -v memcached >/dev/null || need+=(memcached)
  command -v etcd >/dev/null || need+=(etcd-server)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "installing ${need[*]} (apt-get)..." >&2
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq "${need[@]}" >"$RUN/apt.log" 2>&1 ||
    { $sudo apt-get update -qq >>"$RUN/apt.log" 2>&1 && $sudo apt-get install -y -qq "${need[@]}" >>"$RUN/apt.log" 2>&1; } ||
    { cat "$RUN/apt.log"; echo "could not install ${need[*]}" >&2; exit 1; }
}

# prometheus_deps: the Debian prometheus package, for promtool (the rules'
# checks) and the test that scrapes a cluster with a real Prometheus.
# Without its recommends: no node exporter is installed along.
prometheus_deps() {
  command -v prometheus >/dev/null && command -v promtool >/dev/null && return 0
  echo "installing prometheus (apt-get)..." >&2
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq --no-install-recommends prometheus >>"$RUN/apt.log" 2>&1 ||
    { $sudo apt-get update -qq >>"$RUN/apt.log" 2>&1 && $sudo apt-get install -y -qq --no-install-recommends prometheus >>"$RUN/apt.log" 2>&1; } ||
    { cat "$RUN/apt.log"; echo "could not install prometheus" >&2; exit 1; }
}

# chromium_deps: Debian's chromium, the headless browser the page's and the
# dashboard's tests drive (e2e/harness/browsertest); no browser is downloaded.
# A small Chinese font (WenQuanYi Micro Hei), so 红包 renders in its screenshots.
chromium_deps() {
  local need=()
  command -v chromium >/dev/null || need+=(chromium)
  [ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || need+=(fonts-wqy-microhei)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "installing ${need[*]} (apt-get)..." >&2
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$RUN/apt.log" 2>&1 ||
    { $sudo apt-get update -qq >>"$RUN/apt.log" 2>&1 && $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$RUN/apt.log" 2>&1; } ||
    { cat "$RUN/apt.log"; echo "could not install ${need[*]}" >&2; exit 1; }
}

# hbdev ARGS: cmd/hbdev, the dev cluster's process supervision and
# MariaDB's options (store/replication.Server, which the test harnesses
# use too), built into $RUN/bin once per run of this script (not exported:
# a dev.sh run under another HB_DEV_RUN builds its own).
HBDEV_BUILT=""
hbdev() {
  if [ -z "$HBDEV_BUILT" ]; then
    mkdir -p "$RUN/bin"
    flock "$RUN/bin/.lock" bash -c "cd '$ROOT' && go build -o '$RUN/bin/hbdev' ./cmd/hbdev" || { echo "could not build cmd/hbdev" >&2; exit 1; }
    HBDEV_BUILT=1
  fi
  "$RUN/bin/hbdev" "$@"
}

# alive PIDFILE: its process runs and is not dying (a process killed with
# kill -9 is waited for until it is gone, up to 30 s: then no).
alive() { hbdev alive "$1"; }

# running PIDFILE PORT: alive and listening on PORT in this network
# namespace; one alive that does not (left in another namespace) is stopped.
running() { hbdev running "$1" "$2"; }

# member_args NAME DIR SERVER_ID: hbdev mariadbd-args's flags of a member of
# a replicated SET database (store/replication.Server and ServerArgs: GTIDs
# in strict mode, every applied transaction logged again, semi-sync waiting
# AFTER_SYNC, rpl_semi_sync_master_timeout from
# HB_REPLICATION_SEMI_SYNC_TIMEOUT, the config's
# replication.semi_sync_timeout, unset or 0 waiting forever, the default
# for money). Its role is in its data: a replica has a primary configured
# (master.info) or is marked DIR.new-replica (being seeded, or an old
# primary that comes back after a failover, until hbctl set rejoin), or the
# meta database names another member as its SET's MySQL (a failover moved
# the primary away from it: see demoted); a replica is read_only, no
# semi-sync master and a semi-sync replica, whose crash recovery drops from
# its binary log what it had not committed (an old primary's commits that
# waited for an acknowledgement); a primary is a semi-sync master and no
# semi-sync replica, whose crash recovery commits what is in its binary log
# (its replica may have it already). Replication does not start by itself
# (--skip-slave-start): start_replication applies the relay log first.
member_args() {
  local name=$1 dir=$2 id=$3 primary=true
  if [ -f "$dir/master.info" ] || [ -f "$dir.new-replica" ] || demoted "$name"; then primary=false; fi
  echo -server-id "$id" -primary="$primary" -semi-sync-timeout "${HB_REPLICATION_SEMI_SYNC_TIMEOUT:-0}"
}

# meta_sql QUERY: QUERY on the meta database (hb_meta) of the core group's
# primary, the one every process follows: of the writable members, the
# one with the highest failover epoch (after hbctl core failover the old
# primary comes back writable until rejoin_core, and its meta database
# may lack what was written since). Nothing when none answers or the meta
# database does not exist yet.
meta_sql() {
  local m ep best="" best_ep=-1
  for m in core core-replica; do
    [ -S "$RUN/mariadb-$m.sock" ] || continue
    [ "$(command mariadb --no-defaults -uroot --socket="$RUN/mariadb-$m.sock" -N -e 'SELECT @@read_only' 2>/dev/null)" = 0 ] || continue
    # No epoch table: never failed over, epoch 0.
    ep=$(command mariadb --no-defaults -uroot --socket="$RUN/mariadb-$m.sock" -N -e 'SELECT COALESCE(MAX(epoch), 0) FROM hb_core.failover' 2>/dev/null) || ep=0
    [ "${ep:-0}" -gt "$best_ep" ] && best=$m best_ep=${ep:-0}
  done
  [ -n "$best" ] || return 0
  command mariadb --no-defaults -uroot --socket="$RUN/mariadb-$best.sock" -N -e "$1" hb_meta 2>/dev/null || true
}

# meta_primary SET: the port of the MySQL the meta database names for SET
# (its primary, a failover's choice), nothing when it names none.
meta_primary() {
  meta_sql "SELECT mysql_dsn FROM sets WHERE name = '$1'" | sed -n 's/.*tcp([^)]*:\([0-9]*\)).*/\1/p' | head -1
}

# demoted NAME: SET database NAME (a, a-replica, ...) is not its SET's
# primary in the meta database: a failover promoted another member. The
# core group's members are left to their data (see docs/REPLICATION.md).
demoted() {
  local name=$1 set port want
  case $name in core | core-replica | test-*) return 1 ;; esac
  set=${name%-replica}
  port=$(member "$name" | cut -d' ' -f1)
  want=$(meta_primary "$set")
  [ -n "$want" ] && [ "$want" != "$port" ]
}

# start_replication NAME PORT: a replica's replication after its start
# (--skip-slave-start): what it acknowledged to its primary and had not
# applied is applied from its relay log first (MariaDB's GTID replication
# would throw the relay log away), then it replicates (hbctl replica start).
# A member that is no replica is left alone.
start_replication() {
  [ -f "$RUN/mariadb-$1/master.info" ] || return 0
  [ -x "$RUN/bin/hbctl" ] || build
  "$RUN/bin/hbctl" replica start -config "$CONFIG" "$(addr "mariadb-$1"):$2" >>"$RUN/mariadb-$1.log" 2>&1 ||
    { tail -5 "$RUN/mariadb-$1.log" >&2; echo "mariadb $1: its replication did not start (above)" >&2; exit 1; }
}

# mariadb NAME PORT [SERVER_ID]: a private MariaDB with user hongbao/hongbao on
# 127.0.0.1:PORT; with a SERVER_ID, a member of a replicated SET database
# (see member_args), with the replication account repl/repl and the operator's
# hbadmin/hbadmin (hbctl set failover and rejoin act with it).
mariadb_start() {
  local name=$1 port=$2 id=${3:-}
  local dir="$RUN/mariadb-$name" pid="$RUN/mariadb-$name.pid" sock="$RUN/mariadb-$name.sock"
  alive "$pid" && return 0
  # The options of every hongbao MariaDB (hbdev mariadbd-args, from
  # store/replication.Server): durable commits, the day tables' caches, no
  # column statistics. A 1 GiB buffer pool and a 512 MiB redo log keep the
  # day tables of 1000 buckets in memory and page flushing off the commits'
  # way (HB_MARIADB_BUFFER_POOL=256M on a small laptop). A thread pool
  # spares the context switches of a thread per connection, except on a
  # member of a replicated SET database, where it would wedge semi-sync
  # (see replication.Server.Args).
  local member=(-thread-pool) out opts
  # shellcheck disable=SC2207 # flags without spaces
  [ -n "$id" ] && member=($(member_args "$name" "$dir" "$id"))
  # Its role as started, for hosts.json (hbdev hosts-roles).
  if [ -n "$id" ]; then
    case " ${member[*]} " in *" -primary=true "*) echo primary ;; *) echo replica ;; esac >"$RUN/mariadb-$name.role"
  fi
  [ -d "$dir/mysql" ] || mariadb_install "$name" "$dir"
  # Its temporary files in a directory of its own: a cleaner of /tmp
  # (another test's) once took a dump's temporary table from under it
  # (the chaos run's reseed: "Error on delete of '/tmp/#sql-temptable-...MAI'").
  mkdir -p "$RUN/mariadb-$name.tmp"
  out=$(hbdev mariadbd-args -datadir "$dir" -socket "$sock" -port "$port" -bind "$(addr "mariadb-$name")" -pid-file "$pid" \
    -tmpdir "$RUN/mariadb-$name.tmp" \
    -log-error "$RUN/mariadb-$name.log" -user "$(as_root_opt root)" -buffer-pool "${HB_MARIADB_BUFFER_POOL:-1G}" \
    -redo-log 512M "${member[@]}") || exit 1
  mapfile -t opts <<<"$out"
  # shellcheck disable=SC2046 # on's words
  setsid $(on "mariadb-$name") mariadbd "${opts[@]}" </dev/null >/dev/null 2>&1 &
  # Until it answers, for as long as it lives (up to 5 minutes): a crash
  # recovery under make test's load took 28 s, and a fixed 30 s wait would
  # have given up on it. One that died is reported below with its log.
  local started=$! deadline=$((SECONDS + 300))
  until command mariadb --no-defaults -uroot --socket="$sock" -e 'SELECT 1' >/dev/null 2>&1; do
    { kill -0 "$started" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; } || break
    sleep 0.1
  done
  # Not logged (sql_log_bin = 0): a semi-sync primary without its replica
  # yet would wait, and a replica's own GTIDs would break strict mode.
  # GRANT ALL includes READ ONLY ADMIN in MariaDB 10.11, which would let the
  # application write through read_only: the failover's fence. It is revoked.
  # On hosts apart, clients and replicas come from the other hosts: any host.
  local h=127.0.0.1; [ -z "$HOSTS" ] || h=%
  command mariadb --no-defaults -uroot --socket="$sock" -e "
    SET sql_log_bin = 0;
    CREATE USER IF NOT EXISTS 'hongbao'@'$h' IDENTIFIED BY 'hongbao';
    GRANT ALL ON *.* TO 'hongbao'@'$h';
    REVOKE READ ONLY ADMIN ON *.* FROM 'hongbao'@'$h';
    CREATE USER IF NOT EXISTS 'repl'@'$h' IDENTIFIED BY 'repl';
    GRANT REPLICATION SLAVE, REPLICATION SLAVE ADMIN, BINLOG MONITOR ON *.* TO 'repl'@'$h';
    CREATE USER IF NOT EXISTS 'hbadmin'@'$h' IDENTIFIED BY 'hbadmin';
    GRANT ALL ON *.* TO 'hbadmin'@'$h' WITH GRANT OPTION;" ||
    { tail -20 "$RUN/mariadb-$name.log"; echo "mariadb $name did not start" >&2; exit 1; }
  [ -z "$id" ] || start_replication "$name" "$port"
}

# mariadb_install NAME DIR: a fresh data directory, a copy of a template
# bootstrapped once per machine and MariaDB version (hbdev install-datadir,
# replication.InstallDataDir, which the test harnesses use too).
mariadb_install() {
  local name=$1 dir=$2
  rm -rf "$dir"
  hbdev install-datadir "$dir" >"$RUN/mariadb-$name.install.log" 2>&1 ||
    { cat "$RUN/mariadb-$name.install.log" >&2; echo "mariadb $name: no data directory" >&2; exit 1; }
}

# seed_dump SOCKET FILE: a consistent dump of the primary at SOCKET, with
# its GTID position, to seed a replica from.
#
# A table created after the dump's snapshot (a day table the store, an
# ensure or the archiver creates on first use, as after a failover under
# load) cannot be read in it (error 1412). Such a table needs no rows in
# the dump: it was empty at the snapshot, and its creation and every row
# since come to the replica by replication from the dump's GTID position
# (the replica has it from the dump already, and hongbao creates every
# table IF NOT EXISTS, so the replayed creation changes nothing). So the
# dump goes on past it (--force), and a dump whose only errors are 1412s
# on tables that did not exist when it began is kept. Any other error, or
# a 1412 on a table that existed before (altered since the snapshot: its
# rows would be missing), takes the dump again, every second for up to
# HB_SEED_RETRY_SECONDS (300). Names are matched without their database:
# the names that repeat across databases are the day tables, which are
# created and never altered. Taking the dump again until no table was
# created meanwhile took minutes while an ensure ran over every day table.
# Not BACKUP STAGE BLOCK_DDL held beside the dump, which holds DDL off but
# was seen to crash a MariaDB 10.11 primary (SIGSEGV) under the dump once.
# No triggers (--skip-triggers: hongbao defines none): the dump's
# per-table INFORMATION_SCHEMA.TRIGGERS query, run while tables are being
# created, crashed MariaDB 10.11.19 (SIGSEGV in ha_maria::drop_table freeing
# the query's temporary table; TestDevCluster's reseed step, twice in CI).
# No LOCK TABLES or DISABLE KEYS around a table's rows: a table the dump
# could not read would leave them unclosed.
seed_dump() {
  local psock=$1 out=$2 attempt=0 deadline=$((SECONDS + ${HB_SEED_RETRY_SECONDS:-300})) failed
  while :; do
    attempt=$((attempt + 1))
    seed_tables "$psock" >"$out.before"
    if { echo "SET sql_log_bin = 0;"
      mariadb-dump --no-defaults -uroot --socket="$psock" --all-databases --single-transaction --gtid --master-data=2 \
        --routines --events --skip-triggers --force --skip-add-locks --skip-disable-keys; } >"$out" 2>"$out.err"; then
      rm -f "$out.err" "$out.before"
      return 0
    fi
    # The tables the dump could not read because they are newer than its
    # snapshot, when those are its only errors and all of them are new.
    failed=$(sed -n 's/^mariadb-dump: Error 1412: .* when dumping table `\(.*\)` at row: 0$/\1/p' "$out.err" | sort -u)
    if [ -n "$failed" ] && [ "$(grep -c . "$out.err")" = "$(grep -c "^mariadb-dump: Error 1412: " "$out.err")" ] &&
      [ -z "$(comm -23 <(echo "$failed") <(seed_tables "$psock" | sort | comm -23 - <(sort "$out.before") | sed 's/^[^.]*\.//' | sort -u))" ]; then
      echo "seed dump attempt $attempt: $(echo "$failed" | wc -l) table(s) created after its snapshot, left to replication" >&2
      rm -f "$out.err" "$out.before"
      return 0
    fi
    if grep -q "Error 1412" "$out.err" && [ "$SECONDS" -lt "$deadline" ]; then
      echo "seed dump attempt $attempt: a table older than the dump changed during it ($(head -c 200 "$out.err")); trying again" >&2
      sleep 1
      continue
    fi
    cat "$out.err" >&2
    rm -f "$out.err" "$out.before"
    return 1
  done
}

# seed_tables SOCKET: every table of the server's own databases, as DB.TABLE.
seed_tables() {
  command mariadb --no-defaults -uroot --socket="$1" -N -e "SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
    WHERE table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
}

# mariadb_replica NAME PORT SERVER_ID PRIMARY: a replica of SET database
# PRIMARY (a NAME of mariadb_start). The first time it is seeded with a
# consistent dump of the primary (not logged) and replicates from the GTID
# position of the dump; afterwards it starts as whatever it is now (after a
# failover it may be the primary).
mariadb_replica() {
  local name=$1 port=$2 id=$3 primary=$4
  local dir="$RUN/mariadb-$name" sock="$RUN/mariadb-$name.sock" psock="$RUN/mariadb-$primary.sock"
  # A seed that did not finish (its dump failed: RUN/mariadb-NAME.seeding
  # left behind) left an empty server that replicates from nobody; started
  # as it is, it would be a replica with no copy, which a failover could
  # promote (a chaos run did). It is thrown away and seeded again.
  if [ -f "$dir.seeding" ]; then
    stop "$RUN/mariadb-$name.pid"
    rm -rf "$dir"
  fi
  if [ -d "$dir/mysql" ]; then mariadb_start "$name" "$port" "$id"; return; fi
  touch "$dir.new-replica" "$dir.seeding"
  mariadb_start "$name" "$port" "$id"
  local dump="$RUN/mariadb-$name.seed.sql" pport gtid
  seed_dump "$psock" "$dump" || { echo "could not dump $primary for replica $name" >&2; exit 1; }
  gtid=$(sed -n "s/^-- SET GLOBAL gtid_slave_pos='\(.*\)';/\1/p" "$dump" | head -1)
  pport=$(command mariadb --no-defaults -uroot --socket="$psock" -N -e 'SELECT @@port')
  # The load's commits are not flushed one by one (a seed of thousands of
  # day tables under load took minutes): a crash before the seed's end
  # leaves RUN/mariadb-NAME.seeding and the seed is made again from
  # scratch. Before the marker goes, the redo log is flushed again at each
  # commit, and the commit of gtid_slave_pos (an InnoDB table) flushes all
  # of the load's log before it.
  { echo "SET GLOBAL innodb_flush_log_at_trx_commit = 0;"; cat "$dump"; } | command mariadb --no-defaults -uroot --socket="$sock"
  command mariadb --no-defaults -uroot --socket="$sock" -e "
    SET GLOBAL innodb_flush_log_at_trx_commit = 1;
    SET GLOBAL gtid_slave_pos = '$gtid';
    CHANGE MASTER TO MASTER_HOST = '$(addr "mariadb-$primary")', MASTER_PORT = $pport, MASTER_USER = 'repl', MASTER_PASSWORD = 'repl',
      MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
    START SLAVE;" || { echo "replica $name did not start replicating" >&2; exit 1; }
  rm -f "$dir.new-replica" "$dir.seeding" "$dump"
}

# memcached NAME PORT
memcached_start() {
  local name=$1 port=$2
  local pid="$RUN/memcached-$name.pid"
  alive "$pid" && return 0
  # shellcheck disable=SC2046 # on's words
  $(on "memcached-$name") memcached -l "$(addr "memcached-$name")" -p "$port" -d -P "$pid" -m 64 -c 4096 $(as_root_opt "-u root") \
    >"$RUN/memcached-$name.log" 2>&1
  local i; for i in $(seq 1 50); do alive "$pid" && return 0; sleep 0.1; done
  echo "memcached $name did not start" >&2; exit 1
}

# stop PIDFILE: TERM, wait, then KILL and wait until it is gone.
stop() { hbdev stop "$1"; }

# build: the binaries, into RUN/bin, holding RUN/bin/.lock (shared with
# other runs and the test harness with HB_DEV_BIN: see goBuild in
# e2e/harness/clustertest/setup.go).
build() {
  mkdir -p "$RUN/bin"
  # The benchmark is a module of its own (its rivals and plotting stay out
  # of the product's dependencies).
  flock "$RUN/bin/.lock" bash -c "cd '$ROOT' && go build -o '$RUN/bin/' ./cmd/... && cd cmd/hbbench && go build -o '$RUN/bin/' ."
}

# proc KIND NAME CMD...: run a project binary in the background, under a
# supervisor (hbdev start, see cmd/hbdev) that starts it again whenever it
# exits: the binary's pid is in .run/KIND-NAME.pid, its supervisor's in
# .run/sup-KIND-NAME.pid, both log to .run/KIND-NAME.log.
# On hosts apart it runs on its host (ip netns exec, which execs it: the pid
# is the binary's).
# It runs with GOMAXPROCS=$HB_GOMAXPROCS: 1 unless set, set empty for Go's
# default (a P per core). The cluster's Go processes (router, 6 servers,
# 3 settlers, the watchdog, 3 etcd) share this machine's cores; with a P
# per core each of them hands its goroutines between threads and spins
# looking for work, which cost a third of the HTTP path's CPU
# (BENCHMARKS.md, "One P per process"). Where a process has cores of its
# own, give it that many.
# shellcheck disable=SC2046 # on's words
proc() { local kind=$1 name=$2; shift 2; GOMAXPROCS=${HB_GOMAXPROCS-1} hbdev start -run "$RUN" "$kind" "$name" $(on "$kind-$name") "$@"; }

wait_http() { hbdev wait-http "$1"; } # wait_http URL

# Each SET's MariaDB has a replica on the next port (semi-sync AFTER_SYNC;
# hbctl set failover promotes it): a 3316 -> 3317, b 3326 -> 3327, c 3336 -> 3337.
# The core group (the meta and wallet databases, hbctl core failover) is
# replicated the same way: 3346 -> 3347.
infra() {
  # memcached first: it waits for nothing, and after its kill -9 (the
  # chaos run) it was started a minute late under make test's load, behind
  # etcd's health checks and every MariaDB's. Then etcd: a replica that
  # restarts (start_replication) takes its group's lease there before it
  # replicates again. The core group's pair before the SETs': a SET
  # member's role is read from the meta database (demoted).
  memcached_start a 11221
  memcached_start b 11231
  memcached_start c 11241
  etcd_start
  mariadb_start core $(member core)
  mariadb_replica core-replica $(member core-replica) core
  mariadb_start a $(member a)
  mariadb_start b $(member b)
  mariadb_start c $(member c)
  mariadb_replica a-replica $(member a-replica) a
  mariadb_replica b-replica $(member b-replica) b
  mariadb_replica c-replica $(member c-replica) c
}

# member NAME: the port and server ID of SET or core database NAME (infra's).
member() {
  case $1 in
    core) echo 3346 31 ;; core-replica) echo 3347 32 ;;
    a) echo 3316 1 ;; b) echo 3326 11 ;; c) echo 3336 21 ;;
    a-replica) echo 3317 2 ;; b-replica) echo 3327 12 ;; c-replica) echo 3337 22 ;;
    *) echo "no SET database named $1" >&2; return 1 ;;
  esac
}

# rejoin_old_primaries: after hbctl set failover NAME, the old primary
# (started read-only, as a replica: see demoted) replicates from nobody
# until hbctl set rejoin NAME, and the promoted primary's commits wait for
# a replica (semi-sync, waiting forever), topology init's among them: make
# up would hang there. make up rejoins it; when rejoin refuses (errant
# transactions, e.g. DDL in its binary log when it was killed), it says
# what to run and stops.
rejoin_old_primaries() {
  local set m port want
  for set in a b c; do
    want=$(meta_primary "$set")
    [ -n "$want" ] || continue
    for m in "$set" "$set-replica"; do
      port=$(member "$m" | cut -d' ' -f1)
      [ "$port" != "$want" ] && [ ! -f "$RUN/mariadb-$m/master.info" ] && [ ! -f "$RUN/mariadb-$m.new-replica" ] || continue
      echo "SET $set: its MySQL is port $want since a failover, and $m (port $port) replicates from nobody: hbctl set rejoin $set" >&2
      if ! "$RUN/bin/hbctl" set rejoin "$set" -config "$CONFIG" >>"$RUN/rejoin.log" 2>&1; then
        tail -5 "$RUN/rejoin.log" >&2
        echo "SET $set: $m could not rejoin (above). Seed it again from the primary, then make up:" >&2
        echo "  scripts/dev.sh reseed $m $(member_at "$want")" >&2
        exit 1
      fi
    done
  done
}

# rejoin_core: after hbctl core failover, the old core primary comes back
# writable (its role is in its data; the core's primary is the highest
# failover epoch, which no process would choose it under), and the
# promoted one, without a replica, makes every commit wait: topology init
# would. When both members are writable, make up runs hbctl core rejoin;
# when it refuses, it says what to run and stops.
rejoin_core() {
  local m ro writable=0 primary
  for m in core core-replica; do
    ro=$(command mariadb --no-defaults -uroot --socket="$RUN/mariadb-$m.sock" -N -e 'SELECT @@read_only' 2>/dev/null) || return 0
    [ "$ro" = 0 ] && writable=$((writable + 1))
  done
  [ "$writable" = 2 ] || return 0
  echo "the core group has two writable members (an old primary back after hbctl core failover): hbctl core rejoin" >&2
  if ! "$RUN/bin/hbctl" core rejoin -config "$CONFIG" >>"$RUN/rejoin.log" 2>&1; then
    tail -5 "$RUN/rejoin.log" >&2
    primary=$("$RUN/bin/hbctl" core status -config "$CONFIG" 2>/dev/null | sed -n 's/^core group: primary [0-9.]*:\([0-9]*\) .*/\1/p')
    m=core; [ "$(member_at "$primary")" = core ] && m=core-replica
    echo "the old core primary $m could not rejoin (above). Seed it again from the primary, then make up:" >&2
    echo "  scripts/dev.sh reseed $m $(member_at "$primary")" >&2
    exit 1
  fi
}

# member_at PORT: the name of the SET or core database listening on PORT.
member_at() {
  local m
  for m in core core-replica a a-replica b b-replica c c-replica; do
    [ "$(member "$m" | cut -d' ' -f1)" = "$1" ] && echo "$m" && return 0
  done
}

# reseed NAME PRIMARY: SET database NAME stopped, thrown away and seeded
# again as a replica of PRIMARY (its current primary, a name of infra's):
# what an operator does with an old primary whose rejoin was refused
# because it holds errant transactions (e.g. DDL of schema ensure in its
# binary log when it was killed, which crash recovery cannot undo).
reseed() {
  local name=$1 primary=$2 m
  m=$(member "$name") && member "$primary" >/dev/null || exit 1
  stop "$RUN/mariadb-$name.pid"
  rm -rf "$RUN/mariadb-$name"
  # shellcheck disable=SC2086 # port and server ID
  mariadb_replica "$name" $m "$primary"
}

# spare_set: SET c, in the meta database only (not in the configuration, so
# topology init never gives it buckets): the SET an operator adds to grow
# the fleet, owning nothing until `hbctl rebalance apply` moves buckets to it.
spare_set() {
  if ! "$RUN/bin/hbctl" set list -config "$CONFIG" --json | grep -q '"name": "c"'; then
    "$RUN/bin/hbctl" set add c -config "$CONFIG" --servers "$(addr server-c1):8085,$(addr server-c2):8086" \
      --mysql "hongbao:hongbao@tcp($(addr mariadb-c):3336)/" --replicas "hongbao:hongbao@tcp($(addr mariadb-c-replica):3337)/" \
      --memcached "$(addr memcached-c):11241" >>"$RUN/topology.log"
  fi
}

# profile NAME: with HB_PROFILE=1, the flag that makes a process write a CPU
# profile of its life to .run/NAME.cpu.pprof (go tool pprof reads it).
profile() { [ -n "${HB_PROFILE:-}" ] && echo "-cpuprofile=$RUN/$1.cpu.pprof" || true; }

# hosts_up: with HB_HOSTS=1, the hosts (made once, kept by a second make
# up), hosts.json and the configuration with their addresses; ADDR and NS
# loaded. Nothing on one host.
hosts_up() {
  [ -n "$HOSTS" ] || return 0
  hbdev hosts-up -run "$RUN" -json "$HOSTS_JSON" -net "${HB_HOSTS_NET:-hbd}" -prefix "${HB_HOSTS_PREFIX:-10.88.0.0/24}" \
    -config "$SRC_CONFIG" -out "$CONFIG" || { echo "could not make the hosts (HOSTS=1 needs root and iproute2)" >&2; exit 1; }
  hosts_load
}

# hosts_load: ADDR, NS and API from hosts.json, with HB_HOSTS=1.
hosts_load() {
  [ -n "$HOSTS" ] && [ -f "$HOSTS_JSON" ] || return 0
  local out
  out=$(hbdev hosts-env "$HOSTS_JSON") || exit 1
  eval "$out"
}

# etcd_start: a three-member etcd (set/lease: one hbwatch or hbctl at a
# time fails a group over or moves a bucket; the config's etcd.endpoints),
# client ports 2379, 2479, 2579 and peer ports one above, data in
# RUN/etcd-eN, supervised like the project's processes. A member's data
# holds its cluster: the initial-cluster flags count only on its first start.
etcd_start() {
  local i initial="" c p
  for i in 1 2 3; do initial+="${initial:+,}e$i=http://$(addr "etcd-e$i"):$((2280 + 100 * i))"; done
  for i in 1 2 3; do
    c="$(addr "etcd-e$i"):$((2279 + 100 * i))" p="$(addr "etcd-e$i"):$((2280 + 100 * i))"
    proc etcd "e$i" etcd --name "e$i" --data-dir "$RUN/etcd-e$i" \
      --listen-client-urls "http://$c" --advertise-client-urls "http://$c" \
      --listen-peer-urls "http://$p" --initial-advertise-peer-urls "http://$p" \
      --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token hongbao-dev --logger zap
  done
  # /health answers once a leader is elected: three members starting
  # together on a loaded machine may take a few elections.
  for i in 1 2 3; do
    c="http://$(addr "etcd-e$i"):$((2279 + 100 * i))/health"
    wait_http "$c" 2>/dev/null || wait_http "$c" 2>/dev/null || wait_http "$c"
  done
}

# server NAME SET PORT ADMIN: a SET server on its host's address.
server() {
  local a; a=$(addr "server-$1")
  # shellcheck disable=SC2046 # profile's flag or nothing
  proc server "$1" "$RUN/bin/hbserver" -config "$CONFIG" -set "$2" -listen "$a:$3" -admin "$a:$4" $(profile "server-$1")
}

# settler SET ADMIN
settler() { proc settler "$1" "$RUN/bin/hbsettler" -config "$CONFIG" -set "$1" -admin "$(addr "settler-$1"):$2"; }

up() {
  deps
  build
  hosts_up
  infra
  rejoin_core
  rejoin_old_primaries
  "$RUN/bin/hbctl" topology init -config "$CONFIG" >"$RUN/topology.log"
  # Each process has its admin listener (metrics, health, pprof) on
  # its host: the public port + 1000 (settlers 9085, 9086).
  server a1 a 8081 9081
  server a2 a 8082 9082
  server b1 b 8083 9083
  server b2 b 8084 9084
  settler a 9085
  settler b 9086
  spare_set
  server c1 c 8085 9087
  server c2 c 8086 9088
  settler c 9089
  local r; r=$(addr router-r1)
  # shellcheck disable=SC2046 # profile's flag or nothing
  proc router r1 "$RUN/bin/hbrouter" -config "$CONFIG" -listen "$r:8080" -admin "$r:9080" $(profile router-r1)
  # The failover watchdog over every replicated SET and the core group
  # (the watch section of the config; its rule: set/failover/watch.go),
  # taking its leases in etcd.
  proc watch w1 "$RUN/bin/hbwatch" -config "$CONFIG" -admin "$(addr watch-w1):9090"
  local s p
  for s in a1:8081 a2:8082 b1:8083 b2:8084 c1:8085 c2:8086; do
    p=${s#*:} s=${s%:*}
    wait_http "http://$(addr "server-$s"):$p/readyz"
  done
  wait_http "http://$r:8080/readyz"
  # The day tables of today and tomorrow, after the processes are up and in
  # the background: over some 4,000 tables this takes minutes under load, and
  # the store creates a missing table on its first use anyway.
  if ! alive "$RUN/ensure.pid"; then
    setsid "$RUN/bin/hbctl" schema ensure -config "$CONFIG" --days 1 </dev/null >>"$RUN/ensure.log" 2>&1 &
    echo $! >"$RUN/ensure.pid"
  fi
  [ -z "$HOSTS" ] || hbdev hosts-roles "$HOSTS_JSON" "$RUN"
}

# down: the supervisors first (each stops its process), then any process
# left without one, the background schema ensure, etcd, memcached and
# MariaDB; the test instances belong to make test (hbdev down). Both the
# one-host cluster and the hosts' (BASE/hosts), whichever runs, and then
# the hosts themselves: their namespaces and bridge.
down() {
  hbdev down -run "$BASE"
  if [ -f "$HOSTS_JSON" ] || [ -d "$BASE/hosts" ]; then
    hbdev down -run "$BASE/hosts"
    hbdev hosts-down "$HOSTS_JSON"
  fi
}

usage_info() {
  [ -z "$HOSTS" ] || { usage_hosts; return; }
  local token
  token=$("$RUN/bin/hbctl" token -config "$CONFIG" --user 42 2>/dev/null | tail -1)
  cat <<INFO

hongbao is up.  API: http://127.0.0.1:8080   logs: $RUN/*.log

  The red-packet page:      http://127.0.0.1:8080/   (dev sign-in: type any user ID)
  The operator dashboard:   http://127.0.0.1:9080/dashboard   (the router's admin listener, loopback only;
                            its last verify: .run/bin/hbctl verify --textfile .run/textfile/hbverify.prom)

A token for user 42 (hbctl token --user 42):
  TOKEN=$token
Send a packet, then open it:
  curl -s -X POST http://127.0.0.1:8080/v1/packets -H "Authorization: Bearer \$TOKEN" \\
       -H 'Content-Type: application/json' -d '{"total":1000,"count":10,"type":"random","greeting":"恭喜发财"}'
  curl -s -X POST http://127.0.0.1:8080/v1/packets/<id>/open -H "Authorization: Bearer \$TOKEN"
  curl -s http://127.0.0.1:8080/v1/packets/<id> -H "Authorization: Bearer \$TOKEN"
The API's OpenAPI 3.1 description: curl -s http://127.0.0.1:8080/openapi.json

Admin listeners (loopback only): /metrics (Prometheus), /livez, /readyz, /debug/pprof/
  router r1   http://127.0.0.1:9080/metrics
  server a1   http://127.0.0.1:9081/metrics   a2 :9082   b1 :9083   b2 :9084   c1 :9087   c2 :9088
  settler a   http://127.0.0.1:9085/metrics   b :9086   c :9089
  hbwatch w1  http://127.0.0.1:9090/metrics   (the failover watchdog: armed groups, last probes, failovers)

etcd (hbwatch's and hbctl's leases: one actor at a time per group and bucket): 127.0.0.1:2379, :2479, :2579
  (data $RUN/etcd-e1..3; etcd.endpoints in configs/dev.yaml)

The meta and wallet databases: the core group, 127.0.0.1:3346 -> 3347 (.run/bin/hbctl core status;
hbctl core failover promotes its replica, every process follows it).
SETs a and b own the buckets; SET c owns none yet. Grow the fleet onto it, live:
  .run/bin/hbctl set list                       # buckets, packets, rows, health of each SET
  .run/bin/hbctl rebalance plan                 # the fewest moves that even out the load
  .run/bin/hbctl rebalance apply --parallel 4   # move them (progress bar; kill it and re-run: it continues)
  .run/bin/hbctl rebalance status
  .run/bin/hbctl set drain c && .run/bin/hbctl set remove c
  profile:    go tool pprof http://127.0.0.1:9081/debug/pprof/profile?seconds=10
Alerts: deploy/prometheus/hongbao.rules.yml   dashboard: deploy/grafana/hongbao.json
INFO
}

# usage_hosts: usage_info for HB_HOSTS=1: the hosts and their addresses.
usage_hosts() {
  local token k
  token=$("$RUN/bin/hbctl" token -config "$CONFIG" --user 42 2>/dev/null | tail -1)
  cat <<INFO

hongbao is up on hosts of its own (HOSTS=1).  API: $API   logs: $RUN/*.log
Each process runs in a network namespace of its own, on the bridge hb${HB_HOSTS_NET:-hbd}
(${HB_HOSTS_PREFIX:-10.88.0.0/24}); this namespace reaches every host. The map: $HOSTS_JSON
The configuration with the hosts' addresses: $CONFIG (give hbctl -config $CONFIG).

  TOKEN=$token
  curl -s -X POST $API/v1/packets -H "Authorization: Bearer \$TOKEN" \\
       -H 'Content-Type: application/json' -d '{"total":1000,"count":10,"type":"random","greeting":"恭喜发财"}'
  $RUN/bin/hbctl set list -config $CONFIG
  ip netns exec ${NS[server-a1]} ss -tlnp      # a host's own view

Hosts (process: address; ports as on one host: router 8080/9080, servers 8081.., MariaDB 3316.., etcd 2379/2479/2579):
INFO
  for k in $(printf '%s\n' "${!ADDR[@]}" | sort); do printf '  %-22s %s\n' "$k" "${ADDR[$k]}"; done
}

# Test instances: their own ports and data, apart from the dev cluster.
test_env() {
  deps
  prometheus_deps
  chromium_deps
  # Instances left in another network namespace are stopped first.
  running "$RUN/mariadb-test-a.pid" 13306 || true
  running "$RUN/mariadb-test-b.pid" 13307 || true
  running "$RUN/memcached-test-a.pid" 21211 || true
  running "$RUN/memcached-test-b.pid" 21212 || true
  mariadb_start test-a 13306
  mariadb_start test-b 13307
  memcached_start test-a 21211
  memcached_start test-b 21212
  export HB_TEST_MYSQL_A="hongbao:hongbao@tcp(127.0.0.1:13306)/"
  export HB_TEST_MYSQL_B="hongbao:hongbao@tcp(127.0.0.1:13307)/"
  export HB_TEST_MEMCACHED_A=127.0.0.1:21211
  export HB_TEST_MEMCACHED_B=127.0.0.1:21212
}

# test_times LOG: the packages' test times, slowest first, so that CI's
# time stays visible; the last line counts the packages.
test_times() {
  echo
  echo "test time per package (slowest first):"
  awk '$1 == "ok" || $1 == "FAIL" { if ($3 ~ /s$/) printf "  %8s  %-4s %s\n", $3, $1, $2 }' "$1" | sort -rn
  awk '$1 == "ok" { ok++ } $1 == "FAIL" && NF >= 2 && $2 != "" { bad++ }
       END { printf "packages: %d passed, %d failed\n", ok, bad }' "$1"
}

# bench_deps: Redis for the redis+lua baseline, wrk as an independent client.
bench_deps() {
  deps
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  if ! command -v redis-server >/dev/null || ! command -v wrk >/dev/null; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server wrk >>"$RUN/apt.log" 2>&1 ||
      { $sudo apt-get update -qq >>"$RUN/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server wrk >>"$RUN/apt.log" 2>&1; }
  fi
  # perf: MariaDB's profile under HB_PROFILE=1; hbbench goes on without it.
  command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq linux-perf >>"$RUN/apt.log" 2>&1 ||
    echo "linux-perf could not be installed (see $RUN/apt.log): HB_PROFILE=1 profiles no MariaDB" >&2
}

# The cluster of the benchmarks: activity limits (one 1,000,000-share packet).
bench_env() {
  export HB_LIMITS_MAX_TOTAL=100000000000 HB_LIMITS_MAX_COUNT=1000000 HB_LIMITS_MAX_SHARE=0 HB_LOG_LEVEL=warn
  # The dashboard's money audit only when asked: the dev config runs it at
  # the router's start and every 5 minutes, and over the ledger that runs
  # of the benchmark leave behind (millions of entries) one audit kept the
  # MariaDBs busy for 30-40 s, landing in whichever rows ran then (the
  # MariaDBs at 47-66% of a core in a ping row, against 7% without it).
  export HB_DASHBOARD_AUDIT_EVERY=0
  # thousands of clients from one address, a few senders of thousands of packets
  export HB_ROUTER_MAX_PER_ADDRESS=0 HB_ROUTER_OPEN_PER_SECOND=0 HB_ROUTER_GRAB_PER_SECOND=0 HB_ROUTER_SEND_PER_SECOND=0
  # The watchdog must not race the run's own kills and failovers
  # (configs/dev.yaml): a killed MariaDB's crash recovery took 55 s on a
  # loaded machine, past the dev cluster's 30 s. Should it still fail a
  # SET over, its one replica writes alone, as the run's own failovers do,
  # so that the old primary can be rebuilt from it (hbchaos killPrimary).
  export HB_WATCH_AFTER=${HB_WATCH_AFTER:-120s} HB_WATCH_ACCEPT_SINGLE_COPY=${HB_WATCH_ACCEPT_SINGLE_COPY:-true}
}

# bench_e2e ARGS: the whole system end to end through the router, with wrk,
# against bare one-hop and two-hop HTTP ceilings (fixed ports: run it in a
# network namespace of its own on a shared machine).
bench_e2e() {
  # HB_PROFILE=1: CPU profiles of the ceilings (their whole life), and of the
  # router, servers (pprof) and MariaDB processes (perf) during each row's
  # first round, in $RUN/profiles; the MariaDB one is a table of the results.
  # The cluster starts without profiles of its whole life: a process
  # writing one refuses its admin listener's (HTTP 500).
  local prof=(); [ -n "${HB_PROFILE:-}" ] && { mkdir -p "$RUN/profiles"; prof=(-ceiling-profiles "$RUN" -profile-dir "$RUN/profiles"); }
  HB_PROFILE='' up
  "$RUN/bin/hbbench" -config "$CONFIG" -e2e http://127.0.0.1:8080 -compare=false -pids "$RUN" -out "$ROOT/docs/bench" "${prof[@]}" "$@"
  down
}

# vulncheck: govulncheck over the module, installed with go install when
# missing. It needs its vulnerability database (https://vuln.go.dev, or
# GOVULNDB, e.g. file:///path/to/a/copy): when it cannot reach it, or cannot
# be installed, it says so and is skipped; known vulnerabilities fail.
vulncheck() {
  local bin out rc=0
  bin=$(command -v govulncheck || echo "$(go env GOPATH)/bin/govulncheck")
  if [ ! -x "$bin" ]; then
    echo "govulncheck: installing (go install golang.org/x/vuln/cmd/govulncheck@latest)..."
    go install golang.org/x/vuln/cmd/govulncheck@latest >"$RUN/govulncheck-install.log" 2>&1 || {
      echo "govulncheck: SKIPPED: could not install it (no network to the Go module proxy?); see .run/govulncheck-install.log"
      return 0; }
  fi
  out=$(cd "$ROOT" && "$bin" ${GOVULNDB:+-db "$GOVULNDB"} ./... 2>&1) || rc=$?
  case $rc in
    0) echo "govulncheck: no known vulnerabilities" ;;
    3) echo "$out"; echo "govulncheck: known vulnerabilities (above)" >&2; return 1 ;;
    *) if grep -q "fetching vulnerabilities\|vuln.go.dev\|no such host\|dial tcp" <<<"$out"; then
         echo "govulncheck: SKIPPED: its vulnerability database is unreachable from here ($(grep -m1 -o 'dial tcp.*\|no such host' <<<"$out" || true));"
         echo "             set GOVULNDB to a reachable mirror or a file:// copy to run it"
       else
         echo "$out"; echo "govulncheck failed (status $rc)" >&2; return 1
       fi ;;
  esac
}

# fuzz [TIME]: every go test fuzz target of the module for TIME each
# (default 20s). Their seed corpora (testdata/fuzz) run with every make test.
fuzz() {
  local t=${1:-20s} pkg name
  cd "$ROOT"
  for pkg in $(go list ./...); do
    for name in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
      echo "== fuzz $name in $pkg for $t"
      go test -run '^$' -fuzz "^$name\$" -fuzztime "$t" "$pkg"
    done
  done
}

# The chaos run's cluster: activity packets (up to 2,000 shares), packets
# living 30 s (refunds flow during the run), no abuse limits (thousands of
# clients from one address), quiet logs, no days ahead for hbarchive ensure.
chaos_env() {
  export HB_LIMITS_MAX_TOTAL=${HB_LIMITS_MAX_TOTAL:-1000000} HB_LIMITS_MAX_COUNT=${HB_LIMITS_MAX_COUNT:-2000} HB_LIMITS_MAX_SHARE=0
  export HB_LIMITS_EXPIRY=${HB_LIMITS_EXPIRY:-30s} HB_LOG_LEVEL=${HB_LOG_LEVEL:-warn}
  # the archiver's ensure: today's tables only (the run kills and repeats it)
  export HB_ARCHIVE_AHEAD_DAYS=${HB_ARCHIVE_AHEAD_DAYS:-0}
  export HB_ROUTER_MAX_PER_ADDRESS=0 HB_ROUTER_OPEN_PER_SECOND=0 HB_ROUTER_GRAB_PER_SECOND=0 HB_ROUTER_SEND_PER_SECOND=0
  # The watchdog must not race the run's own kills and failovers
  # (configs/dev.yaml): a killed MariaDB's crash recovery took 55 s on a
  # loaded machine, past the dev cluster's 30 s. Should it still fail a
  # SET over, its one replica writes alone, as the run's own failovers do,
  # so that the old primary can be rebuilt from it (hbchaos killPrimary).
  export HB_WATCH_AFTER=${HB_WATCH_AFTER:-120s} HB_WATCH_ACCEPT_SINGLE_COPY=${HB_WATCH_ACCEPT_SINGLE_COPY:-true}
}

# chaos ARGS: hbchaos (make chaos) against a dev cluster of its own, in a
# network namespace of its own (the cluster's ports are fixed) with its data
# in .run/chaos (HB_DEV_RUN), started fresh and stopped afterwards. ARGS go
# to hbchaos (-clients, -duration, -markdown FILE...). With HB_HOSTS=1
# (make chaos HOSTS=1) the cluster runs on hosts of its own (their
# namespaces named chaos-KIND-ID, HB_HOSTS_NET, apart from make up
# HOSTS=1's) and hbchaos gets hosts.json: the network faults too.
chaos() {
  if [ -z "${HB_CHAOS_NS:-}" ]; then
    exec unshare -n env HB_CHAOS_NS=1 HB_DEV_RUN="${HB_DEV_RUN:-$ROOT/.run/chaos}" HB_HOSTS_NET="${HB_HOSTS_NET:-chaos}" \
      bash -c 'ip link set lo up && exec "$0" chaos "$@"' "$ROOT/scripts/dev.sh" "$@"
  fi
  chaos_env
  down
  up >"$RUN/up.out" 2>&1 || { tail -20 "$RUN/up.out"; echo "chaos: make up failed" >&2; return 1; }
  local rc=0 pid
  # TERM or INT (a test's deadline): hbchaos stopped, the cluster too.
  local hosts=(); [ -z "$HOSTS" ] || hosts=(-hosts "$HOSTS_JSON")
  (cd "$ROOT" && exec "$RUN/bin/hbchaos" -config "$CONFIG" -run "$RUN" -dev "$ROOT/scripts/dev.sh" "${hosts[@]}" "$@") &
  pid=$!
  trap 'echo "chaos: stopped" >&2; kill "$pid" 2>/dev/null; wait "$pid"; down; exit 143' TERM INT
  wait "$pid" || rc=$?
  trap - TERM INT
  down
  return "$rc"
}

# bench: the comparison of issue 6 on a cluster with activity limits (large
# packets), Redis for the redis+lua baseline and wrk as an independent client.
bench() {
  bench_deps
  down
  bench_env
  build
  # The designs side by side first, with nothing else running on the machine.
  infra
  "$RUN/bin/hbctl" topology init -config "$CONFIG" >"$RUN/topology.log"
  alive "$RUN/redis-bench.pid" || redis-server --port 26379 --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --pidfile "$RUN/redis-bench.pid" --logfile "$RUN/redis-bench.log"
  local i; for i in $(seq 1 50); do alive "$RUN/redis-bench.pid" && break; sleep 0.1; done
  "$RUN/bin/hbbench" -config "$CONFIG" -redis 127.0.0.1:26379 -out "$ROOT/docs/bench" "$@"
  stop "$RUN/redis-bench.pid"
  # Then the whole system, end to end through the router.
  bench_e2e "$@"
}

case "${1:-}" in
  deps) deps; prometheus_deps; chromium_deps ;;
  up) up; usage_info ;;
  down) down ;;
  run)
    trap 'echo; echo stopping...; down; exit 0' INT TERM
    up; usage_info
    echo; echo "Ctrl-C stops everything."
    while true; do sleep 1; done ;;
  test)
    shift
    test_env
    # The test instances stop with the tests; their data stays for a quick restart.
    trap 'for f in "$RUN"/mariadb-test-*.pid "$RUN"/memcached-test-*.pid; do [ -e "$f" ] && stop "$f"; done' EXIT
    cd "$ROOT"
    # go.mod says what the code imports: a requirement that go mod tidy
    # would move or drop fails the run (it prints the difference).
    go mod tidy -diff || { echo "go.mod is not tidy: run go mod tidy" >&2; exit 1; }
    go vet ./...
    # The benchmark is a module of its own (its dependencies stay out of
    # the product's go.mod): ./... below does not reach its tests.
    (cd cmd/hbbench && go vet ./... && go test -race -count=1 ./...)
    vulncheck
    rc=0
    # HB_TEST_PKGS="./queue ./store/..." tests only those packages.
    # Two packages per core (go test's default is one): the whole-cluster
    # packages spend much of their time waiting (a replica's timeout, a
    # kill's recovery), and on 2 cores -p 4 took make test from 667 s to
    # 477 s with the same result; with the MariaDB template and the shared
    # binaries (e2e/harness), 373-378 s (README, "Two commands").
    # Each package binary has 40 minutes: one whole dev cluster runs at a
    # time (clustertest.OneDevCluster), so the chaos run (up to 15 minutes
    # under this load) and e2e/dev's two clusters (TestDevCluster,
    # TestDevHosts) may each wait for the other.
    # shellcheck disable=SC2086 # a list of package patterns
    go test -race -count=1 -timeout 40m -p "$((2 * $(nproc)))" "$@" ${HB_TEST_PKGS:-./...} 2>&1 | tee "$RUN/test.log" || rc=$?
    # Tests of the scheduler's effect (built with !race: the race
    # detector's random yields would hide what they check), once more
    # without -race.
    [ -n "${HB_TEST_PKGS:-}" ] || go test -count=1 -run '^(TestBatchWritesPerTransaction|TestGatherOneBatch)$' ./set ./queue 2>&1 | tee -a "$RUN/test.log" || rc=$?
    test_times "$RUN/test.log"
    exit "$rc"
    ;;
  fuzz) shift; fuzz "$@" ;;
  vulncheck) vulncheck ;;
  bench) shift; bench "$@" ;;
  bench-e2e) shift; bench_deps; down; bench_env; bench_e2e "$@" ;;
  chaos) shift; chaos "$@" ;;
  infra) deps; hosts_up; infra ;;
  reseed) shift; hosts_load; reseed "$@" ;;
  test-env) test_env; env | grep '^HB_TEST_' | sed "s/^\([^=]*\)=\(.*\)$/export \1='\2'/" ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
