#!/usr/bin/env bash
# PostgreSQL's pgbench (TPC-B like) with WAL written O_DIRECT, kernel alone
# and under dioshim, on scratch ext4 and XFS.  For each filesystem: a fresh
# scratch filesystem, initdb, pgbench -i -s $SCALE, then REPS interleaved
# rounds of kernel alone then dioshim, the server restarted for each side
# with the same settings on the same data directory, and
# pgbench -n -c $CLIENTS -j $THREADS -T $SECS (after VACUUM of the small
# tables and TRUNCATE of the history, outside the measurement, as pgbench
# itself does without -n).  Measured: TPS, and the server's CPU time per
# transaction (utime+stime of the postmaster and every child, the exited
# backends through the postmaster's cutime+cstime, between just before and
# just after the run).
#
# Server settings that make PostgreSQL 15 open WAL with O_DIRECT:
# wal_level=minimal, max_wal_senders=0, wal_sync_method=open_datasync
# (16 and later: debug_io_direct=wal as well, added here for them).
# WAL segments are preallocated and zero-filled: nothing is expected to be
# gained, this measures what the shim costs.
#
# One machine-readable line per filesystem on stdout (medians):
#   real postgresql FS pgbench-tpcb tps kernel=K dioshim=S ratio=R cpu_us_k=A cpu_us_s=B
# progress on stderr.  Needs root; PostgreSQL runs as the user postgres.
#
#   sudo bench/real-postgres.sh
#   sudo SECS=5 REPS=1 FSTYPES=ext4 bench/real-postgres.sh
#
# BUILD: the tree holding dioshim and libdioshim.so (default build/);
# DIOSHIM_ENGAGE and the other DIOSHIM_* settings pass through to the
# server on the dioshim side.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
DIOSHIM=$BUILD/dioshim
: "${FSTYPES:=ext4 xfs}" "${REPS:=3}" "${SECS:=20}" "${SCALE:=10}"
: "${CLIENTS:=8}" "${THREADS:=2}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"

say() { echo "real-postgres: $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (scratch filesystems; PostgreSQL runs as postgres)"
[ -x "$DIOSHIM" ] || die "no $DIOSHIM: run make first (or set BUILD)"
command -v setpriv >/dev/null || die "needs setpriv (util-linux)"
id postgres >/dev/null 2>&1 || die "needs the user postgres (comes with the postgresql package)"
PG_BIN=
for d in /usr/lib/postgresql/15/bin "$(pg_config --bindir 2>/dev/null || true)" \
	/usr/lib/postgresql/*/bin; do
	if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] &&
		[ -x "$d/pgbench" ] && [ -x "$d/psql" ]; then
		PG_BIN=$d
		break
	fi
done
[ -n "$PG_BIN" ] || die "PostgreSQL server binaries not found (initdb, pg_ctl, pgbench, psql)"
PG_MAJOR=$("$PG_BIN/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)\..*/\1/p')
HZ=$(getconf CLK_TCK)
AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)
cd /

bench_scratch real-postgres
chown postgres: "$SHM"
PG_DATA=
W=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-real-postgres.XXXXXX")

# Every process of the cluster (they all work in the data directory).
pg_pids() {
	[ -n "$PG_DATA" ] || return 0
	find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$PG_DATA" \
		-printf '%h\n' 2>/dev/null | sed 's|^/proc/||' || true
}
pg_kill_all() {
	local pids
	pids=$(pg_pids)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	kill -9 $pids 2>/dev/null || true
	for _ in $(seq 100); do
		[ -n "$(pg_pids)" ] || return 0
		sleep 0.1
	done
}
cleanup() {
	pg_kill_all
	scratch_destroy_all
	rm -rf "$SHM" "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pg_start() {
	local side=$1 run=() opts
	[ "$side" = kernel ] || run=("$DIOSHIM" --)
	opts="-c listen_addresses= -k $SOCK -c wal_level=minimal"
	opts+=" -c max_wal_senders=0 -c archive_mode=off"
	opts+=" -c wal_sync_method=open_datasync -c fsync=on"
	opts+=" -c synchronous_commit=on -c shared_buffers=128MB"
	opts+=" -c max_wal_size=1GB -c checkpoint_timeout=15min"
	[ "$PG_MAJOR" -lt 16 ] || opts+=" -c debug_io_direct=wal"
	timeout 120 "${AS_PG[@]}" env DIOSHIM_SHM_DIR="$SHM" \
		"${run[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_ROOT/server.log" \
		-w -t 100 -o "$opts" start >/dev/null ||
		{ tail -n 20 "$PG_ROOT/server.log" >&2; die "the server did not start"; }
}
pg_stop() {
	timeout 180 "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast \
		-w -t 170 stop >/dev/null || die "the server did not stop"
}
pg_sql() {
	timeout 600 "${AS_PG[@]}" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-h "$SOCK" -U postgres -d postgres -c "$1"
}

# CPU ticks of the cluster: the postmaster's own and its reaped children's,
# and every live child's (with its reaped children's).
cluster_ticks() {
	local pm p line sum=0 f
	pm=$(head -n 1 "$PG_DATA/postmaster.pid")
	for p in "$pm" $(ps -o pid= --ppid "$pm"); do
		line=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		# Fields after the command name: state is 3, utime 14 .. cstime 17.
		read -r -a f <<<"${line##*) }"
		sum=$((sum + f[11] + f[12] + f[13] + f[14]))
	done
	echo "$sum"
}
# The number of backends serving clients.
n_backends() {
	local pm
	pm=$(head -n 1 "$PG_DATA/postmaster.pid")
	ps -o args= --ppid "$pm" | grep -c '^postgres: postgres ' || true
}

# One measured run on the running server: prints "TPS CPU_US_PER_TX".
measure() {
	local t0 t1 out tps tx
	pg_sql "VACUUM pgbench_branches, pgbench_tellers" >/dev/null
	pg_sql "TRUNCATE pgbench_history" >/dev/null
	pg_sql "CHECKPOINT" >/dev/null
	t0=$(cluster_ticks)
	out=$(timeout $((SECS + 120)) "${AS_PG[@]}" "$PG_BIN/pgbench" -h "$SOCK" \
		-U postgres -n -c "$CLIENTS" -j "$THREADS" -T "$SECS" postgres 2>&1) ||
		{ echo "$out" >&2; die "pgbench failed"; }
	# The backends' CPU reaches the postmaster's cutime once they are
	# reaped.
	for _ in $(seq 100); do
		[ "$(n_backends)" -eq 0 ] && break
		sleep 0.1
	done
	t1=$(cluster_ticks)
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
	tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	[ -n "$tps" ] && [ "${tx:-0}" -gt 0 ] || { echo "$out" >&2; die "no result from pgbench"; }
	awk -v tps="$tps" -v d=$((t1 - t0)) -v hz="$HZ" -v tx="$tx" \
		'BEGIN { printf "%.1f %.0f\n", tps, d / hz * 1e6 / tx }'
}

for fs in $FSTYPES; do
	why=$(scratch_skip_reason "$fs") || { say "$fs: skipped: $why"; continue; }
	say "$fs: scratch filesystem, initdb, pgbench -i -s $SCALE"
	scratch_make "$fs" 4G >/dev/null || die "could not make a $fs scratch filesystem"
	chmod 0711 "$SCRATCH_DIR"
	PG_ROOT=$SCRATCH_MNT/pg
	SOCK=$PG_ROOT/sock
	mkdir -p "$SOCK"
	chown -R postgres: "$PG_ROOT"
	PG_DATA=$PG_ROOT/data
	timeout 300 "${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U postgres \
		-A trust -E UTF8 --locale=C >"$W/initdb.log" 2>&1 ||
		{ cat "$W/initdb.log" >&2; die "initdb failed"; }
	PG_DATA=$(realpath "$PG_DATA")
	pg_start kernel
	timeout 600 "${AS_PG[@]}" "$PG_BIN/pgbench" -h "$SOCK" -U postgres \
		-i -s "$SCALE" -q postgres >"$W/init.log" 2>&1 ||
		{ cat "$W/init.log" >&2; die "pgbench -i failed"; }
	pg_stop
	: >"$W/kernel"
	: >"$W/dioshim"
	for rep in $(seq "$REPS"); do
		for side in kernel dioshim; do
			pg_start "$side"
			r=$(measure)
			pg_stop
			echo "$r" >>"$W/$side"
			say "$fs round $rep/$REPS $side: tps cpu_us/tx = $r"
		done
	done
	k=$(cut -d' ' -f1 "$W/kernel" | median)
	s=$(cut -d' ' -f1 "$W/dioshim" | median)
	ck=$(cut -d' ' -f2 "$W/kernel" | median)
	cs=$(cut -d' ' -f2 "$W/dioshim" | median)
	ratio=$(awk -v k="$k" -v s="$s" 'BEGIN { printf "%.2f", (k > 0) ? s / k : 0 }')
	echo "real postgresql $fs pgbench-tpcb tps kernel=$k dioshim=$s ratio=$ratio cpu_us_k=$ck cpu_us_s=$cs"
	pg_kill_all
	PG_DATA=
	scratch_destroy "$SCRATCH_DIR"
done
