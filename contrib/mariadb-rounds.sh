#!/usr/bin/env bash
# contrib/mariadb-rounds.sh: MariaDB's InnoDB with O_DIRECT and native AIO
# (io_uring on Debian 12's 10.11) under dioshim, the workload that once
# corrupted it (issue 11, case 0).  Each round, on a fresh scratch ext4 or
# XFS: sysbench oltp_insert (prepare, then RUN_SECS of run), a kill -9 of
# mariadbd during a second run, a restart, CHECK TABLE on every table, a
# clean shutdown.  Prints one line per round; exits 1 if any round failed.
# Needs root and sysbench.
#
#   sudo contrib/mariadb-rounds.sh                 # 5 rounds, ext4 and XFS
#   sudo ROUNDS=1 FSTYPES=ext4 SHIM=0 contrib/mariadb-rounds.sh   # kernel alone
#
# MARIADB_ROOT: a directory holding usr/sbin/mariadbd.  Unset, the Debian
# packages mariadb-server-core and mariadb-common are downloaded and
# unpacked into a temporary directory in /dev/shm (nothing is installed:
# the machine's root disk may have no room for them).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
: "${ROUNDS:=5}" "${FSTYPES:=ext4 xfs}" "${SHIM:=1}" "${RUN_SECS:=20}"
: "${THREADS:=4}" "${TABLES:=2}" "${TABLE_SIZE:=20000}"
export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-mariadb-$$.registry
# shellcheck source=../tests/lib/scratchfs.sh
source "$TOP/tests/lib/scratchfs.sh"

WORK=$(mktemp -d /dev/shm/dioshim-mariadb.XXXXXX)
SOCK=$WORK/sock
cleanup() {
	[ -z "${SCRATCH_MNT:-}" ] || pkill -9 -f "mariadbd.*$SCRATCH_MNT" || true
	sleep 1
	scratch_destroy_all
	rm -rf "$WORK"
}
trap cleanup EXIT

command -v sysbench >/dev/null || { echo "needs sysbench" >&2; exit 2; }
if [ -z "${MARIADB_ROOT:-}" ]; then
	(cd "$WORK" && apt-get download -q mariadb-server-core mariadb-common \
		>/dev/null 2>&1) || { echo "cannot download MariaDB" >&2; exit 2; }
	for d in "$WORK"/*.deb; do dpkg-deb -x "$d" "$WORK/root"; done
	MARIADB_ROOT=$WORK/root
fi
MARIADBD=$MARIADB_ROOT/usr/sbin/mariadbd
[ -x "$MARIADBD" ] || { echo "no mariadbd in $MARIADB_ROOT" >&2; exit 2; }
make -s -C "$TOP" -j2 all >/dev/null
RUN=(); [ "$SHIM" = 1 ] && RUN=("$TOP/build/dioshim" --)
export DIOSHIM_SHM_DIR=$WORK

# sysbench's own Lua, to create the schema and to check the tables (no
# client program needed).
cat >"$WORK/mkdb.lua" <<'LUA'
function event() end
function thread_init()
	local c = sysbench.sql.driver():connect()
	c:query("CREATE DATABASE IF NOT EXISTS sbtest")
	c:disconnect()
end
LUA
cat >"$WORK/check.lua" <<'LUA'
function event() end
function thread_init()
	local c = sysbench.sql.driver():connect()
	for i = 1, tonumber(os.getenv("TABLES")) do
		local rs = c:query("CHECK TABLE sbtest.sbtest" .. i)
		for _ = 1, rs.nrows do
			local row = rs:fetch_row()
			print("check " .. row[1] .. " " .. row[3] .. " " .. row[4])
		end
	end
	c:disconnect()
end
LUA

start() {
	rm -f "$SOCK"
	"${RUN[@]}" "$MARIADBD" --no-defaults --user=root \
		--datadir="$SCRATCH_MNT/data" --socket="$SOCK" \
		--skip-networking --skip-grant-tables \
		--lc-messages-dir="$MARIADB_ROOT/usr/share/mysql" \
		--innodb-flush-method=O_DIRECT --innodb-use-native-aio=1 \
		--innodb-buffer-pool-size=256M --log-error="$SCRATCH_MNT/err.log" \
		2>/dev/null &
	for _ in $(seq 200); do [ -S "$SOCK" ] && return 0; sleep 0.2; done
	return 1
}
stop() {
	pkill -TERM -f "mariadbd.*$SCRATCH_MNT" || true
	for _ in $(seq 120); do
		pgrep -f "mariadbd.*$SCRATCH_MNT" >/dev/null || return 0
		sleep 0.5
	done
	return 1
}
sb() { sysbench --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root "$@"; }
OLTP=(oltp_insert --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$THREADS")
export TABLES

bad=0
for fs in $FSTYPES; do
	for round in $(seq "$ROUNDS"); do
		scratch_make "$fs" 3G >/dev/null
		mkdir -p "$SCRATCH_MNT/data"
		why=
		# A new database killed before its first checkpoint cannot
		# start again, with or without the shim: create, then restart.
		if ! start; then why="no start"; fi
		[ -n "$why" ] || sb --mysql-db=information_schema --events=1 \
			"$WORK/mkdb.lua" run >/dev/null 2>&1 || why="no schema"
		[ -n "$why" ] || stop || why="first shutdown hung"
		[ -n "$why" ] || start || why="no restart"
		[ -n "$why" ] || sb "${OLTP[@]}" prepare >/dev/null 2>&1 ||
			why="prepare failed"
		tx=0
		if [ -z "$why" ]; then
			tx=$(sb "${OLTP[@]}" --time="$RUN_SECS" run 2>&1 |
				sed -n 's/ *transactions: *\([0-9]*\).*/\1/p')
			sb "${OLTP[@]}" --time=10 run >/dev/null 2>&1 &
			sleep 5
			pkill -9 -f "mariadbd.*$SCRATCH_MNT" || true
			wait 2>/dev/null || true
			start || why="no start after kill -9"
		fi
		checks=
		[ -n "$why" ] || checks=$(sb --mysql-db=sbtest --events=1 \
			"$WORK/check.lua" run 2>&1 | grep '^check ' || true)
		[ -n "$why" ] || [ "$(grep -c ' status OK$' <<<"$checks")" -eq "$TABLES" ] ||
			why="CHECK TABLE: $(grep -v ' OK$' <<<"$checks" | head -1)"
		[ -n "$why" ] || stop || why="shutdown hung"
		errs=$(grep -c '\[ERROR\]' "$SCRATCH_MNT/err.log" || true)
		[ -n "$why" ] || [ "$errs" -eq 0 ] || why="$errs errors in the log"
		echo "$fs round $round shim=$SHIM: transactions=${tx:-0} in ${RUN_SECS}s: ${why:-ok}"
		[ -z "$why" ] || { bad=1; grep '\[ERROR\]' "$SCRATCH_MNT/err.log" | head -5; }
		pkill -9 -f "mariadbd.*$SCRATCH_MNT" || true
		sleep 1
		scratch_destroy "$SCRATCH_DIR"
	done
done
exit "$bad"
