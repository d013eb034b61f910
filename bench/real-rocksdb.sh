#!/usr/bin/env bash
# bench/real-rocksdb.sh: RocksDB (Debian 12's rocksdb-tools 7.8, db_bench)
# with O_DIRECT flush and compaction writes and direct reads, the kernel
# alone against dioshim, on fresh scratch ext4 and XFS.  The WAL is
# buffered; every SST file is written from its start by one background
# thread (1 MiB pwrites), cut to length with ftruncate, fsynced, closed.
#
# For each filesystem: one kernel-alone fillrandom of SECS seconds
# (--duration, a warm-up, not counted) sizes the key space, NUM keys per
# thread, so that a fillrandom of NUM writes per thread takes about SECS
# on the kernel alone.  Then REPS interleaved rounds, kernel alone then
# dioshim, each on a fresh database directory: db_bench fillrandom
# (--threads=THREADS, --num=NUM), then readrandom on the same database
# (--use_existing_db=1, --threads=THREADS, --duration=SECS).  Measured:
# ops/sec as db_bench reports it, and db_bench's CPU (user+system from
# /usr/bin/time) per operation in µs.  Medians.  Prints one line per
# filesystem and benchmark:
#
#   real rocksdb FS fillrandom ops kernel=K dioshim=S ratio=R cpu_us_k=A cpu_us_s=B
#   real rocksdb FS readrandom ops kernel=K dioshim=S ratio=R cpu_us_k=A cpu_us_s=B
#
# and progress on stderr.  The shim runs with its defaults: each SST has
# one writer, which the shim leaves to the kernel (a lone writer);
# DIOSHIM_ENGAGE=always in the environment makes it reserve every SST
# from its first write instead.  Needs root and rocksdb-tools.
#
#   sudo bench/real-rocksdb.sh
#   sudo SECS=5 REPS=1 FSTYPES=ext4 bench/real-rocksdb.sh
#   sudo DIOSHIM_ENGAGE=always bench/real-rocksdb.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
: "${REPS:=3}" "${SECS:=20}" "${FSTYPES:=ext4 xfs}" "${BUILD:=$TOP/build}"
: "${THREADS:=4}" "${VALUE_SIZE:=400}" "${SIZE:=4G}"
DIOSHIM=$BUILD/dioshim

say() { echo "real-rocksdb: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root"; exit 2; }
command -v db_bench >/dev/null || { say "needs db_bench (rocksdb-tools)"; exit 2; }
[ -x /usr/bin/time ] || { say "needs /usr/bin/time (time)"; exit 2; }
[ -x "$DIOSHIM" ] || { say "no $DIOSHIM (make, or BUILD=)"; exit 2; }

bench_scratch real-rocksdb
export DIOSHIM_SHM_DIR=$SHM
RUN=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-rocksdb.XXXXXX")
BG=
# A db_bench still running (an interrupted run) is killed with the
# process group it was started in; then the filesystems go.
stop_bg() {
	if [ -n "$BG" ] && kill -0 "$BG" 2>/dev/null; then
		kill -9 -- "-$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
	BG=
}
trap 'stop_bg; scratch_destroy_all; rm -rf "$SHM" "$RUN"' EXIT
trap 'exit 130' INT TERM

OPTS=(--value_size="$VALUE_SIZE" --write_buffer_size=4194304
	--target_file_size_base=16777216 --max_background_jobs=4
	--use_direct_io_for_flush_and_compaction=true --use_direct_reads=true
	--compression_type=none --histogram=0 --seed=1 --threads="$THREADS")

# bench SIDE NAME ARGS...: one db_bench run (k: kernel alone, s: dioshim)
# on $DB; sets OPS (ops/sec), N (operations) and CPU_US (per operation).
bench() {
	local side=$1 name=$2 run=(env -u LD_PRELOAD) out line cpu
	shift 2
	[ "$side" = s ] && run=("$DIOSHIM" --)
	# In the background and a process group of its own (setsid), so
	# that the EXIT trap can kill it.
	setsid timeout -s KILL $((SECS * 10 + 600)) /usr/bin/time -f '%U %S' \
		-o "$RUN/time" "${run[@]}" db_bench --db="$DB" "${OPTS[@]}" --benchmarks="$name" "$@" \
		>"$RUN/out" 2>&1 </dev/null &
	BG=$!
	wait "$BG" || { say "db_bench $name failed:"; tail -20 "$RUN/out" >&2; exit 1; }
	BG=
	out=$(<"$RUN/out")
	line=$(grep -a "^$name " <<<"$out" | tail -n 1)
	OPS=$(sed -n 's/.* \([0-9.]*\) ops\/sec .*/\1/p' <<<"$line")
	N=$(sed -n 's/.* \([0-9]*\) operations;.*/\1/p' <<<"$line")
	[ -n "$OPS" ] && [ "${N:-0}" -gt 0 ] ||
		{ say "no result from db_bench $name:"; tail -20 "$RUN/out" >&2; exit 1; }
	cpu=$(tail -n 1 "$RUN/time")
	CPU_US=$(awk -v c="$cpu" -v n="$N" \
		'BEGIN { split(c, t, " "); printf "%.1f", (t[1] + t[2]) * 1e6 / n }')
	if [ "$side" = s ] && [ -n "$(find "$SHM" -name 'dioshim.*' ! -type d)" ]; then
		say "warning: segments left after db_bench exited: $(find "$SHM" -name 'dioshim.*' ! -type d)"
	fi
}

ratio() { awk -v k="$1" -v s="$2" 'BEGIN { printf "%.2f", k ? s / k : 0 }'; }

for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		say "skipping $fs: $why"
		continue
	fi
	scratch_make "$fs" "$SIZE" >/dev/null
	DB=$SCRATCH_MNT/db
	# The key space: what the kernel alone writes in SECS seconds.
	bench k fillrandom --num=1000000000 --duration="$SECS"
	NUM=$((N / THREADS))
	rm -rf "$DB"
	say "$fs: $N writes in ${SECS}s on the kernel alone: --num=$NUM per thread, $THREADS threads"
	wk=() ws=() wck=() wcs=() rk=() rs=() rck=() rcs=()
	for ((rep = 1; rep <= REPS; rep++)); do
		for side in k s; do
			rm -rf "$DB"
			sync
			bench "$side" fillrandom --num="$NUM"
			if [ "$side" = k ]; then wk+=("$OPS") wck+=("$CPU_US")
			else ws+=("$OPS") wcs+=("$CPU_US"); fi
			bench "$side" readrandom --num="$NUM" --use_existing_db=1 \
				--duration="$SECS"
			if [ "$side" = k ]; then rk+=("$OPS") rck+=("$CPU_US")
			else rs+=("$OPS") rcs+=("$CPU_US"); fi
		done
		say "$fs rep $rep: fillrandom kernel ${wk[-1]} ops/s (${wck[-1]} µs CPU/op)," \
			"dioshim ${ws[-1]} (${wcs[-1]}); readrandom kernel ${rk[-1]} (${rck[-1]})," \
			"dioshim ${rs[-1]} (${rcs[-1]})"
	done
	rm -rf "$DB"
	k=$(printf '%s\n' "${wk[@]}" | median)
	s=$(printf '%s\n' "${ws[@]}" | median)
	echo "real rocksdb $fs fillrandom ops kernel=$k dioshim=$s ratio=$(ratio "$k" "$s")" \
		"cpu_us_k=$(printf '%s\n' "${wck[@]}" | median)" \
		"cpu_us_s=$(printf '%s\n' "${wcs[@]}" | median)"
	k=$(printf '%s\n' "${rk[@]}" | median)
	s=$(printf '%s\n' "${rs[@]}" | median)
	echo "real rocksdb $fs readrandom ops kernel=$k dioshim=$s ratio=$(ratio "$k" "$s")" \
		"cpu_us_k=$(printf '%s\n' "${rck[@]}" | median)" \
		"cpu_us_s=$(printf '%s\n' "${rcs[@]}" | median)"
	scratch_destroy "$SCRATCH_DIR"
done
