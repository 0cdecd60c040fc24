#!/usr/bin/env bash
# The dev cluster's supervision, tested from the outside (TestDevCluster in
# e2e/dev/dev_test.go runs it in a network namespace of its own, with a private
# HB_DEV_RUN): every process killed with kill -9 serves again within
# HB_DEV_TEST_WITHIN seconds (default 5) without anyone running make up;
# make up right after a MariaDB's kill -9 succeeds (issue 14, problem 4);
# a replica's relay log is applied at its restart and make up after a
# failover comes up (issue 23); make down leaves no process behind. Exits
# non-zero on the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN="${HB_DEV_RUN:?HB_DEV_RUN: a private directory for the test cluster}"
WITHIN=${HB_DEV_TEST_WITHIN:-5}
DEV="$ROOT/scripts/dev.sh"
# The failover watchdog (hbwatch) waits 10 minutes here, not the dev
# config's 30 s: step 2 kills SET a's primary and make up restarts it,
# which under make test's heaviest phase took 38 s; the watchdog then
# rightly failed SET a over to a-replica, and the steps after it met a
# cluster they did not expect (an old primary with a commit that waited
# for its acknowledgement, rejoin refused; or step 5's failover moving SET
# a back to 3316). The watchdog's rule is tested in e2e/watch.
export HB_WATCH_AFTER=600s

fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# serving_again KIND-NAME URL OLDPID: the pid file names another process and
# URL answers 200, within WITHIN seconds.
serving_again() {
  local what=$1 url=$2 old=$3 t0 i n
  t0=$(now)
  for i in $(seq 1 $((WITHIN * 20))); do
    n=$(cat "$RUN/$what.pid" 2>/dev/null || true)
    if [ -n "$n" ] && [ "$n" != "$old" ] && curl -fsS -m 1 "$url" >/dev/null 2>&1; then
      echo "ok: $what killed (pid $old), serving again as pid $n after $(since "$t0") s"
      return 0
    fi
    sleep 0.05
  done
  tail -5 "$RUN/$what.log" >&2 || true
  fail "$what killed (pid $old): not serving again within $WITHIN s"
}

cleanup() { "$DEV" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

"$DEV" up >"$RUN/up.out" 2>&1 || { tail -60 "$RUN/up.out"; fail "make up"; }
echo "ok: make up"

# The core group (the meta and wallet databases) runs on its own MariaDB
# with a replica, apart from the SETs'.
core=$("$RUN/bin/hbctl" core status -config "$ROOT/configs/dev.yaml" 2>&1) || fail "hbctl core status: $core"
grep -q "127.0.0.1:3346: writable, epoch 0" <<<"$core" &&
  grep -q "127.0.0.1:3347: read-only, epoch 0, replicates from 127.0.0.1:3346 (IO Yes, SQL Yes)" <<<"$core" ||
  fail "the core group is not a primary and its replica: $core"
echo "ok: the core group runs, 3346 -> 3347"

# 1. Each kind of process, killed with kill -9, is started again by its
#    supervisor: nobody runs make up.
for p in "server-a1 http://127.0.0.1:8081/readyz" "server-b2 http://127.0.0.1:8084/readyz" \
  "router-r1 http://127.0.0.1:8080/readyz" "settler-a http://127.0.0.1:9085/readyz"; do
  set -- $p
  old=$(cat "$RUN/$1.pid")
  kill -9 "$old"
  serving_again "$1" "$2" "$old"
done
grep -q "supervisor: .* server a1: pid .* exited with status 137" "$RUN/server-a1.log" ||
  fail "server-a1.log does not show the restart"
# A process dying again and again is started again each time.
for i in 1 2; do
  old=$(cat "$RUN/server-a2.pid"); kill -9 "$old"
  serving_again server-a2 http://127.0.0.1:8082/readyz "$old"
done

# 2. make up right after a MariaDB's kill -9: it waits for the old process
#    to be gone and the new one to answer, and succeeds the first time.
old=$(cat "$RUN/mariadb-a.pid")
kill -9 "$old"
t0=$(now)
"$DEV" up >"$RUN/up2.out" 2>&1 || { tail -20 "$RUN/up2.out"; fail "make up right after kill -9 of MariaDB a"; }
[ "$(cat "$RUN/mariadb-a.pid")" != "$old" ] || fail "MariaDB a has its old pid"
echo "ok: make up right after kill -9 of MariaDB a: $(since "$t0") s"
curl -fsS -m 5 http://127.0.0.1:8080/readyz >/dev/null || fail "router not ready after make up"

# 2b. make up right after a replica's kill -9: the replica does not start
#     replicating by itself (--skip-slave-start: it might name a primary
#     failed away from), make up's startup step (hbctl set rejoin) does.
old=$(cat "$RUN/mariadb-b-replica.pid")
kill -9 "$old"
t0=$(now)
"$DEV" up >"$RUN/up3.out" 2>&1 || { tail -20 "$RUN/up3.out"; fail "make up right after kill -9 of MariaDB b-replica"; }
args=$(tr '\0' ' ' <"/proc/$(cat "$RUN/mariadb-b-replica.pid")/cmdline")
grep -q -- --skip-slave-start <<<"$args" || fail "b-replica runs without --skip-slave-start: $args"
st=$(mariadb --no-defaults -uroot --socket="$RUN/mariadb-b-replica.sock" -e "SHOW SLAVE STATUS\G")
grep -q "Master_Port: 3326" <<<"$st" && grep -q "Slave_IO_Running: Yes" <<<"$st" && grep -q "Slave_SQL_Running: Yes" <<<"$st" ||
  fail "b-replica does not replicate from b after make up: $st"
echo "ok: make up right after kill -9 of b-replica: it replicates from b again (the startup step): $(since "$t0") s"

# 3. A replica seeded again (scripts/dev.sh reseed, what follows a refused
#    rejoin) from a primary that creates tables and writes rows into them
#    all along (the store's and the archiver's day tables after a failover
#    under load) gets every table and every row: a table the dump cannot
#    read because it is newer than the dump's snapshot (error 1412) comes by
#    replication, as hongbao's tables do (CREATE TABLE IF NOT EXISTS). The
#    primary accepts a single copy meanwhile (as after hbctl set failover
#    --accept-single-copy): semi-sync would stall its DDL without a replica.
sql() { mariadb --no-defaults -uroot --socket="$RUN/mariadb-$1.sock" -N -e "$2"; }
sql c "SET GLOBAL rpl_semi_sync_master_enabled = 0; CREATE DATABASE reseed_probe"
rm -f "$RUN/reseed.done"
( i=0; while [ ! -e "$RUN/reseed.done" ]; do i=$((i + 1))
    echo "CREATE TABLE IF NOT EXISTS reseed_probe.t$i (a INT PRIMARY KEY); INSERT INTO reseed_probe.t$i VALUES ($i); DO SLEEP(0.01);"
  done | mariadb --no-defaults -uroot --socket="$RUN/mariadb-c.sock" ) & ddl=$!
t0=$(now)
"$DEV" reseed c-replica c >"$RUN/reseed.out" 2>&1 || { cat "$RUN/reseed.out"; touch "$RUN/reseed.done"; fail "reseed c-replica while c created tables"; }
touch "$RUN/reseed.done"
wait "$ddl" || { tail -40 "$RUN/mariadb-c.log" >&2; cat "$RUN/reseed.out" >&2; fail "the tables' creation on c failed (c's log and the reseed's output above)"; }
left=$(sed -n 's/.*: \([0-9]*\) table(s) created after its snapshot, left to replication/\1/p' "$RUN/reseed.out" | tail -1)
sql c "SET GLOBAL rpl_semi_sync_master_enabled = 1"
tables() { sql "$1" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'reseed_probe'"; }
want=$(tables c)
[ "$want" -gt 0 ] || fail "no table created on c during the reseed"
rows=$(for i in $(seq 1 "$want"); do echo "SELECT a FROM reseed_probe.t$i;"; done)
want_rows=$(echo "$rows" | sql c "$(cat)" | sort -n | md5sum)
for i in $(seq 1 200); do
  got=$(tables c-replica)
  [ "$got" = "$want" ] && got_rows=$(echo "$rows" | sql c-replica "$(cat)" | sort -n | md5sum) && [ "$got_rows" = "$want_rows" ] && break
  sleep 0.1
done
[ "$got" = "$want" ] || fail "c-replica has $got of c's $want tables after its reseed"
[ "$got_rows" = "$want_rows" ] || fail "c-replica's rows in reseed_probe differ from c's after its reseed"
[ "${left:-0}" -gt 0 ] || { cat "$RUN/reseed.out"; fail "no table was created between the dump's snapshot and its read of it: the case was not tried"; }
grep -q "Slave_SQL_Running: Yes" <(mariadb --no-defaults -uroot --socket="$RUN/mariadb-c-replica.sock" -e "SHOW SLAVE STATUS\\G") ||
  fail "c-replica does not replicate after its reseed"
echo "ok: c-replica seeded again while c created $want tables with a row each (${left:-0} created after the dump's snapshot, left to replication): $(since "$t0") s, every table and row replicated"

# 4. A replica's relay log survives its restart (issue 23, finding 7):
#    b-replica's applier stopped, commits acknowledged on b (in its relay
#    log only), b-replica killed -9; make up applies them before it
#    replicates again (hbctl replica start: MariaDB's GTID replication
#    would have thrown them away and fetched them again).
sql b-replica "STOP SLAVE SQL_THREAD"
sql b "CREATE DATABASE relay_probe; CREATE TABLE relay_probe.t (a INT PRIMARY KEY); INSERT INTO relay_probe.t VALUES (1), (2), (3)"
acked=$(sql b "SELECT @@gtid_binlog_pos")
kill -9 "$(cat "$RUN/mariadb-b-replica.pid")"
"$DEV" up >"$RUN/up3.out" 2>&1 || { tail -20 "$RUN/up3.out"; fail "make up after kill -9 of b-replica"; }
applied=$(grep -o 'relay log applied up to "[^"]*"' "$RUN/mariadb-b-replica.log" | tail -1 | grep -o '[0-9]*"$' | tr -d '"')
[ -n "$applied" ] && [ "$applied" -ge "${acked##*-}" ] ||
  fail "b-replica did not apply its relay log up to $acked at its restart: $(grep 'relay log applied' "$RUN/mariadb-b-replica.log" | tail -1)"
[ "$(sql b-replica "SELECT COUNT(*) FROM relay_probe.t")" = 3 ] || fail "b-replica lacks the acknowledged rows after its restart"
echo "ok: b-replica killed -9 with acknowledged commits unapplied: applied from its relay log at make up ($acked)"

# 5. make down and make up after a failover of SET a and of the core group
#    (issue 23, finding 8): up comes up (it hung in topology init: the
#    promoted primary waited for a replica, the old one came back as a
#    primary of its own); each old primary is read-only, rejoined, and
#    acknowledges the new primary's commits; topology init kept the
#    failover.
primary_a=$(sql core "SELECT mysql_dsn FROM hb_meta.sets WHERE name = 'a'")
grep -q "(127.0.0.1:3316)" <<<"$primary_a" || fail "before step 5, the meta database names $primary_a for SET a, not 3316 (a failover meanwhile?)"
"$RUN/bin/hbctl" set failover a -config "$ROOT/configs/dev.yaml" >"$RUN/failover.out" 2>&1 || { cat "$RUN/failover.out"; fail "hbctl set failover a"; }
# And the core group's (with --accept-single-copy: the meta and wallet
# keep writing until make down).
"$RUN/bin/hbctl" core failover --accept-single-copy -config "$ROOT/configs/dev.yaml" >>"$RUN/failover.out" 2>&1 ||
  { cat "$RUN/failover.out"; fail "hbctl core failover"; }
"$DEV" down >/dev/null
t0=$(now)
timeout 300 "$DEV" up >"$RUN/up4.out" 2>&1 || { tail -20 "$RUN/up4.out"; fail "make up after hbctl set failover a and make down"; }
grep -q "keeping the meta database's MySQL \[127.0.0.1:3317\]" "$RUN/up4.out" ||
  fail "topology init did not say it kept the failover: $(cat "$RUN/failover.out" "$RUN/topology.log"; grep -v "^ " "$RUN/up4.out" | tail -20)"
[ "$(sql a "SELECT @@read_only")" = 1 ] || fail "the old primary a is writable after make up"
grep -q "Master_Port: 3317" <(mariadb --no-defaults -uroot --socket="$RUN/mariadb-a.sock" -e "SHOW SLAVE STATUS\\G") ||
  fail "the old primary a does not replicate from a-replica after make up"
timeout 20 mariadb --no-defaults -uroot --socket="$RUN/mariadb-a-replica.sock" -e "CREATE DATABASE failover_probe" ||
  fail "a commit on the promoted a-replica is not acknowledged after make up"
curl -fsS -m 5 http://127.0.0.1:8080/readyz >/dev/null || fail "router not ready after make up"
# (the new primary's epoch reaches the old one once it applied it)
for i in $(seq 1 50); do
  core=$("$RUN/bin/hbctl" core status -config "$ROOT/configs/dev.yaml" 2>&1) || fail "hbctl core status: $core"
  grep -q "127.0.0.1:3346: read-only, epoch [1-9][0-9]*, replicates from 127.0.0.1:3347 (IO Yes, SQL Yes)" <<<"$core" &&
    grep -q "127.0.0.1:3347: writable" <<<"$core" && break
  sleep 0.2
done
grep -q "127.0.0.1:3346: read-only, epoch [1-9][0-9]*, replicates from 127.0.0.1:3347 (IO Yes, SQL Yes)" <<<"$core" ||
  fail "the old core primary did not rejoin the new one: $core"
echo "ok: make down and make up after hbctl set failover a and hbctl core failover: up in $(since "$t0") s, a rejoined as a-replica's replica, core as core-replica's"

# 6. make down stops every supervisor and process.
"$DEV" down
trap - EXIT
sleep 0.5
left=$(ps -eo pid=,args= | grep -F "$RUN" | grep -v -e grep -e dev_test.sh || true)
[ -z "$left" ] || fail "processes left after make down: $left"
ls "$RUN"/*.pid >/dev/null 2>&1 && fail "pid files left after make down: $(ls "$RUN"/*.pid)"
echo "ok: make down left nothing running"
