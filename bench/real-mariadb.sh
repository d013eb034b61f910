#!/usr/bin/env bash
# bench/real-mariadb.sh: MariaDB (InnoDB, innodb_flush_method=O_DIRECT, its
# default native AIO: io_uring on Debian 12's 10.11), the kernel alone
# against dioshim, on fresh scratch ext4 and XFS.  InnoDB extends its files
# with fallocate and writes inside them: nothing for the shim to gain, so
# this measures what it costs.
#
# For each filesystem: mariadb-install-db and sysbench oltp_write_only
# prepare once (TABLES tables of TABLE_SIZE rows, larger than the buffer
# pool), then REPS interleaved rounds, kernel alone then dioshim, each side
# a fresh start of mariadbd on the same datadir, sysbench oltp_write_only
# --threads=4 --time=SECS, a clean shutdown.  Measured: transactions per second, and
# mariadbd's CPU (utime+stime from /proc/PID/stat, before and after the
# run) per transaction in µs.  Medians.  MDB_OPTS, more mariadbd options,
# defaults to innodb_max_dirty_pages_pct=0: the page cleaner writes all
# through the run, so the shim serves InnoDB's page writes (queued through
# io_uring); with InnoDB's defaults a short run writes little but the redo
# log, which one thread writes and the shim leaves to the kernel.  The
# progress line says how many files had a segment at the end of the run.
# Prints one line per filesystem:
#
#   real mariadb FS oltp_write_only tps kernel=K dioshim=S ratio=R cpu_us_k=A cpu_us_s=B
#
# and progress on stderr.  Needs root, mariadb-server and sysbench.
#
#   sudo bench/real-mariadb.sh
#   sudo SECS=5 REPS=1 FSTYPES=ext4 bench/real-mariadb.sh
#   sudo MDB_OPTS=--innodb-use-native-aio=0 bench/real-mariadb.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
: "${REPS:=3}" "${SECS:=20}" "${FSTYPES:=ext4 xfs}" "${BUILD:=$TOP/build}"
: "${THREADS:=4}" "${TABLES:=4}" "${TABLE_SIZE:=100000}"
: "${BUFFER_POOL:=64M}" "${MDB_OPTS=--innodb-max-dirty-pages-pct=0}"
DIOSHIM=$BUILD/dioshim
MARIADBD=$(command -v mariadbd || echo /usr/sbin/mariadbd)

[ "$(id -u)" = 0 ] || { echo "real-mariadb: needs root" >&2; exit 2; }
[ -x "$MARIADBD" ] || { echo "real-mariadb: needs mariadbd (mariadb-server)" >&2; exit 2; }
for p in mariadb-admin mariadb-install-db sysbench; do
	command -v "$p" >/dev/null || { echo "real-mariadb: needs $p" >&2; exit 2; }
done
[ -x "$DIOSHIM" ] || { echo "real-mariadb: no $DIOSHIM (make, or BUILD=)" >&2; exit 2; }

bench_scratch real-mariadb
RUN=$(mktemp -d /tmp/dioshim-mdbbench.XXXXXX)
SOCK=$RUN/sock
PID=
# The server is stopped however the script ends; then the filesystems go.
hard_stop() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -9 "$PID" 2>/dev/null || true
		timeout 30 tail --pid="$PID" -f /dev/null || true
	fi
	PID=
}
trap 'hard_stop; scratch_destroy_all; rm -rf "$SHM" "$RUN"' EXIT
trap 'exit 130' INT TERM

say() { echo "real-mariadb: $*" >&2; }
sb() {
	timeout $((SECS + 600)) sysbench --db-driver=mysql --mysql-socket="$SOCK" \
		--mysql-user=root --mysql-db=sbtest --tables="$TABLES" \
		--table-size="$TABLE_SIZE" --threads="$THREADS" "$@"
}

# start SIDE (k: kernel alone, s: dioshim): mariadbd on $DD, answering.
start() {
	local run=(env) i
	[ "$1" = s ] && run=(env DIOSHIM_SHM_DIR="$SHM" "$DIOSHIM" --)
	rm -f "$SOCK"
	# shellcheck disable=SC2086
	"${run[@]}" "$MARIADBD" --no-defaults --user=root --datadir="$DD" \
		--socket="$SOCK" --pid-file="$RUN/pid" --skip-networking \
		--skip-grant-tables --log-error="$SCRATCH_MNT/err.log" \
		--innodb-flush-method=O_DIRECT \
		--innodb-buffer-pool-size="$BUFFER_POOL" $MDB_OPTS \
		</dev/null >>"$SCRATCH_MNT/stdout" 2>&1 &
	PID=$!
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$PID" 2>/dev/null || { say "mariadbd died starting"; tail -20 "$SCRATCH_MNT/err.log" >&2; exit 1; }
		[ -S "$SOCK" ] && timeout 10 mariadb-admin --no-defaults -S "$SOCK" \
			-u root ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	say "mariadbd did not answer in 120 s"
	exit 1
}

stop() {
	timeout 120 mariadb-admin --no-defaults -S "$SOCK" -u root shutdown
	timeout 120 tail --pid="$PID" -f /dev/null ||
		{ say "mariadbd did not shut down in 120 s"; exit 1; }
	wait "$PID" || { say "mariadbd exited non-zero"; exit 1; }
	PID=
}

# mariadbd's utime+stime, in clock ticks.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$PID/stat"; }

# round SIDE: one run; sets TPS and CPU_US (per transaction).  Not in a
# subshell: the server's PID must stay known to the EXIT trap.
round() {
	local out c0 c1 tps tx
	start "$1"
	c0=$(cpu_ticks)
	out=$(sb oltp_write_only --time="$SECS" --report-interval=0 run 2>&1) ||
		{ say "sysbench run failed:"; echo "$out" >&2; exit 1; }
	c1=$(cpu_ticks)
	[ "$1" = k ] || say "dioshim side: $(find "$SHM" -name 'dioshim.*' | wc -l)" \
		"files with a segment at the end of the run"
	stop
	if [ "$1" = s ] && [ -n "$(find "$SHM" ! -type d ! -name 'dioshim-hint*')" ]; then
		say "warning: segments left after the shutdown: $(find "$SHM" ! -type d ! -name 'dioshim-hint*')"
	fi
	tps=$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' <<<"$out")
	tx=$(sed -n 's/^ *transactions: *\([0-9]*\) .*/\1/p' <<<"$out")
	[ -n "$tps" ] && [ "${tx:-0}" -gt 0 ] || { say "no transactions:"; echo "$out" >&2; exit 1; }
	TPS=$(awk -v t="$tps" 'BEGIN { printf "%.1f", t }')
	CPU_US=$(awk -v n="$tx" -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.0f", c / hz * 1e6 / n }')
}

for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		say "skipping $fs: $why"
		continue
	fi
	scratch_make "$fs" 4G >/dev/null
	DD=$SCRATCH_MNT/data
	say "$fs: mariadb-install-db, sysbench prepare ($TABLES x $TABLE_SIZE rows)"
	timeout 300 mariadb-install-db --no-defaults --user=root --datadir="$DD" \
		--auth-root-authentication-method=normal --skip-test-db \
		>"$SCRATCH_MNT/install.log" 2>&1 ||
		{ say "mariadb-install-db failed"; tail -20 "$SCRATCH_MNT/install.log" >&2; exit 1; }
	start k
	timeout 60 mariadb --no-defaults -S "$SOCK" -u root -e "CREATE DATABASE sbtest"
	sb oltp_write_only prepare >/dev/null
	stop
	kt=() st=() kc=() sc=()
	for ((rep = 1; rep <= REPS; rep++)); do
		round k
		kt+=("$TPS") kc+=("$CPU_US")
		round s
		st+=("$TPS") sc+=("$CPU_US")
		say "$fs rep $rep: kernel ${kt[-1]} tps, ${kc[-1]} µs CPU/tx;" \
			"dioshim ${st[-1]} tps, ${sc[-1]} µs CPU/tx"
	done
	if grep -E '\[ERROR\]|[Aa]ssertion|OS error' "$SCRATCH_MNT/err.log" >&2; then
		say "warning: errors in mariadbd's log on $fs (above)"
	fi
	k=$(printf '%s\n' "${kt[@]}" | median)
	s=$(printf '%s\n' "${st[@]}" | median)
	echo "real mariadb $fs oltp_write_only tps kernel=$k dioshim=$s" \
		"ratio=$(awk -v k="$k" -v s="$s" 'BEGIN { printf "%.2f", s / k }')" \
		"cpu_us_k=$(printf '%s\n' "${kc[@]}" | median)" \
		"cpu_us_s=$(printf '%s\n' "${sc[@]}" | median)"
	scratch_destroy "$SCRATCH_DIR"
done
