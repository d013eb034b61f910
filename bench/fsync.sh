#!/usr/bin/env bash
# fsync under dioshim, side by side with the kernel alone, on scratch ext4
# and XFS:
#   1. the seed's fsync workload: sysbench fileio rndwr, 4 threads, one
#      128M file, a sync every 5 writes (fsync, then fdatasync): writes/s
#      and latency (avg, 95th, max);
#   2. group commit: appends each followed by fdatasync, and a database
#      redo log (1-3 KiB 512-aligned writes, each followed by fdatasync)
#      into a new and into a preallocated file, 4 and 10 threads: kernel
#      alone, dioshim, dioshim with DIOSHIM_GROUP_COMMIT=1.
# Runs are interleaved, REPS each, medians reported.  Writes the tables to
# stdout and to $OUT (bench/run.sh, section fsync, puts them in
# bench/RESULTS.md).  Needs root.
#
#   SECS=10 REPS=3 bench/fsync.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
SECS=${SECS:-10}
REPS=${REPS:-3}
FSES=${FSES:-"ext4 xfs"}
OUT=${OUT:-$TOP/bench/results/fsync.md}
DIOSHIM=$TOP/build/dioshim
AB=$TOP/build/appendbench

if [ "$(id -u)" != 0 ]; then
	echo "bench/fsync.sh: needs root (it makes scratch filesystems)"
	exit 0
fi
export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-bench-fsync.$$
export DIOSHIM_SHM_DIR
DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-bench.XXXXXX)
T=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-fsync.XXXXXX")
source tests/lib/scratchfs.sh
trap 'scratch_destroy_all; rm -rf "$DIOSHIM_SHM_DIR" "$T"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b ? a / b : 0}'; }

# sysbench fileio on the scratch fs; prints "writes/s avg_ms p95_ms max_ms".
sysbench_run() {
	local launcher=$1 mode=$2 dir=$SCRATCH_MNT/sb
	local args=(--threads=4 --file-num=1 --file-block-size=4096
		--file-total-size=128M --file-test-mode=rndwr --file-fsync-freq=5
		--file-fsync-mode="$mode" --file-extra-flags=direct --time="$SECS")
	rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
	sysbench fileio "${args[@]}" prepare >/dev/null
	$launcher sysbench fileio "${args[@]}" run 2>&1 | awk '
		/writes\/s:/ {w=$2} /avg:/ {a=$2} /95th percentile:/ {p=$3}
		/max:/ {m=$2} END {print w, a, p, m}'
	sysbench fileio "${args[@]}" cleanup >/dev/null
	cd "$TOP"
}

section_sysbench() {
	local fs=$1 mode k s r
	for mode in fsync fdatasync; do
		: >$T/sb.k; : >$T/sb.s
		for r in $(seq "$REPS"); do
			sysbench_run "" "$mode" >>$T/sb.k
			sysbench_run "$DIOSHIM" "$mode" >>$T/sb.s
			echo "  $fs sysbench $mode rep $r: kernel $(tail -1 $T/sb.k) | dioshim $(tail -1 $T/sb.s)" >&2
		done
		k=$(cut -d' ' -f1 $T/sb.k | median); s=$(cut -d' ' -f1 $T/sb.s | median)
		printf '| %s | %s | %.0f | %.0f | %s | %s / %s / %s | %s / %s / %s |\n' \
			"$fs" "$mode" "$k" "$s" "$(ratio "$s" "$k")" \
			"$(cut -d' ' -f2 $T/sb.k | median)" "$(cut -d' ' -f3 $T/sb.k | median)" \
			"$(cut -d' ' -f4 $T/sb.k | median)" \
			"$(cut -d' ' -f2 $T/sb.s | median)" "$(cut -d' ' -f3 $T/sb.s | median)" \
			"$(cut -d' ' -f4 $T/sb.s | median)"
	done
}

# appendbench IOPS for one configuration; prints "iops cpu_us_per_op".
ab_run() {
	local launcher=$1 mode=$2 threads=$3 prealloc=$4 f=$SCRATCH_MNT/gc
	rm -f "$f"
	# shellcheck disable=SC2086
	$launcher "$AB" run -m "$mode" -t "$threads" -s "$SECS" -F 1 $prealloc "$f" |
		sed 's/.*iops=\([0-9.]*\) cpu_us_per_op=\([0-9.]*\).*/\1 \2/'
}

section_group_commit() {
	local fs=$1 w t pre label k s g r
	for w in "counter|" "redo|" "redo|-P 1G"; do
		for t in 4 10; do
			label=${w%%|*}; pre=${w#*|}
			: >$T/gc.k; : >$T/gc.s; : >$T/gc.g
			for r in $(seq "$REPS"); do
				ab_run "" "$label" "$t" "$pre" >>$T/gc.k
				ab_run "$DIOSHIM" "$label" "$t" "$pre" >>$T/gc.s
				DIOSHIM_GROUP_COMMIT=1 ab_run "$DIOSHIM" "$label" "$t" "$pre" >>$T/gc.g
			done
			k=$(cut -d' ' -f1 $T/gc.k | median)
			s=$(cut -d' ' -f1 $T/gc.s | median)
			g=$(cut -d' ' -f1 $T/gc.g | median)
			echo "  $fs $label${pre:+ (preallocated)} $t threads: kernel $k, dioshim $s, group commit $g" >&2
			printf '| %s | %s%s | %d | %.0f | %.0f (%s) | %.0f (%s) | %s / %s / %s |\n' \
				"$fs" "$label" "${pre:+, preallocated}" "$t" "$k" \
				"$s" "$(ratio "$s" "$k")" "$g" "$(ratio "$g" "$s")" \
				"$(cut -d' ' -f2 $T/gc.k | median)" \
				"$(cut -d' ' -f2 $T/gc.s | median)" \
				"$(cut -d' ' -f2 $T/gc.g | median)"
		done
	done
}

mkdir -p "$(dirname "$OUT")"
{
	echo "## fsync and group commit"
	echo
	echo "$(date -u +%F), Linux $(uname -r), $(nproc) CPUs, loop devices with direct I/O;"
	echo "\`SECS=$SECS REPS=$REPS bench/fsync.sh\`; medians of $REPS interleaved runs."
	echo
	echo "The seed's fsync workload (sysbench fileio rndwr, 4 threads, one 128M file,"
	echo "O_DIRECT, a sync every 5 writes). Target: dioshim keeps >= 97% of the"
	echo "kernel's writes/s."
	echo
	echo "| fs | sync | kernel writes/s | dioshim writes/s | ratio | kernel lat. ms avg / p95 / max | dioshim lat. ms avg / p95 / max |"
	echo "|---|---|---:|---:|---:|---|---|"
} >"$OUT.tmp"
GC_ROWS=()
for fs in $FSES; do
	why=$(scratch_skip_reason "$fs") || { echo "skipping $fs: $why" >&2; continue; }
	scratch_make "$fs" 4G
	section_sysbench "$fs" >>"$OUT.tmp"
	GC_ROWS+=("$(section_group_commit "$fs")")
	scratch_destroy
done
{
	echo
	echo "Group commit: every write followed by fdatasync. counter = 4 KiB appends at a"
	echo "shared offset; redo = 1-3 KiB 512-aligned writes at a shared offset, into a"
	echo "new file or a preallocated one. IOPS, with the ratio to the column before;"
	echo "CPU µs per write."
	echo
	echo "| fs | workload | threads | kernel | dioshim (vs kernel) | dioshim + group commit (vs dioshim) | CPU µs/write k / d / d+gc |"
	echo "|---|---|---:|---:|---:|---:|---|"
	printf '%s\n' "${GC_ROWS[@]}"
	echo
	# The verdict: group commit against dioshim without it, over every
	# point (geometric mean and range of the per-point ratios).
	printf '%s\n' "${GC_ROWS[@]}" | awk -F'|' '
		{ split($7, g, "[()]"); r = g[2] + 0; if (r > 0) {
			n++; s += log(r); if (!lo || r < lo) lo = r; if (r > hi) hi = r } }
		END { if (n) printf "Group commit against dioshim without it: %.2fx " \
			"(geometric mean of %d points; %.2fx to %.2fx). jbd2 and the " \
			"XFS log already batch concurrent syncs of one file; dioshim " \
			"leaves group commit off unless DIOSHIM_GROUP_COMMIT=1.\n",
			exp(s / n), n, lo, hi }'
} >>"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
