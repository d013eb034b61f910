#!/usr/bin/env bash
# bench/ab.sh REV: the kernel alone, dioshim as of REV and dioshim as it is
# in this tree, side by side on fresh scratch ext4 and XFS: a regression
# check for a change to a hot path.  Needs root.  Prints a Markdown table
# (median IOPS and CPU per write of REPS interleaved runs, and the new
# build's ratio to the old one).
#
#   sudo bench/ab.sh ddc36b8
#   sudo MODES="counter append" WRITERS=8 SECS=2 REPS=3 bench/ab.sh REV
#   sudo MODES=overwrite bench/ab.sh REV   (random rewrites of a written file)
#   sudo MODES=prealloc bench/ab.sh REV    (random writes into a fresh file
#        preallocated by the kernel alone, fallocate -l: unwritten extents)
#   sudo MODES="aio uring" bench/ab.sh REV  (a new file written in order
#        through libaio or liburing at queue depth 16, ASYNC_BLOCKS writes;
#        tests/helpers/asyncwrite.c, one process: WRITERS does not apply)
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
REV=${1:?usage: bench/ab.sh REV}
: "${MODES:=counter append}" "${WRITERS:=8}" "${SECS:=2}" "${REPS:=3}"
: "${FSTYPES:=ext4 xfs}" "${ASYNC_BLOCKS:=40000}"
export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-ab-$$.registry
# shellcheck source=../tests/lib/scratchfs.sh
source "$TOP/tests/lib/scratchfs.sh"

OLD=$(mktemp -d /dev/shm/dioshim-ab-old.XXXXXX)
SHM=$(mktemp -d /dev/shm/dioshim-ab-shm.XXXXXX)
cleanup() {
	scratch_destroy_all
	git -C "$TOP" worktree remove --force "$OLD" 2>/dev/null || rm -rf "$OLD"
	rm -rf "$SHM"
}
trap cleanup EXIT
git -C "$TOP" worktree add -q --detach "$OLD" "$REV"
make -s -C "$OLD" -j2 BUILD=build >/dev/null
make -s -C "$TOP" -j2 BUILD=build all build/appendbench \
	build/tests/helpers/asyncwrite >/dev/null
# Each build its own segment directory: a build that finds the other's
# segments or hint (another layout version) passes calls through and
# re-checks at every one, which is not what either costs alone.
mkdir -p "$SHM/old" "$SHM/new"
BENCH=$TOP/build/appendbench
ASYNCWRITE=$TOP/build/tests/helpers/asyncwrite
TIMES=$SHM/time

# One run of MODE with T writers on file F under RUN...: prints
# "iops cpu_us_per_write".  The asynchronous writer reports no CPU: it
# is timed (user + system) by the shell.
one_run() {
	local mode=$1 t=$2 f=$3 out
	shift 3
	case $mode in
	aio | uring)
		out=$( { TIMEFORMAT='%3U %3S'; time "$@" "$ASYNCWRITE" \
			"$mode" seq "$f" "$ASYNC_BLOCKS" 16; } 2>"$TIMES")
		[ "$(field bad "$out")" = 0 ] || { echo "$out" >&2; exit 1; }
		echo "$(field iops "$out") $(awk -v n="$ASYNC_BLOCKS" \
			'{ printf "%.2f", ($1 + $2) * 1e6 / n }' "$TIMES")" ;;
	*)
		# prealloc: rewrites of a file the kernel allocated
		[ "$mode" != prealloc ] || mode=overwrite
		out=$("$@" "$BENCH" run -m "$mode" -t "$t" -s "$SECS" "$f")
		echo "$(field iops "$out") $(field cpu_us_per_op "$out")" ;;
	esac
}
declare -A mi=() mc=()

# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"

echo "| fs | workload | writers | kernel IOPS | $REV IOPS | this tree IOPS | new/old | CPU µs/write kernel / $REV / this tree |"
echo "|---|---|--:|--:|--:|--:|--:|---|"
for fs in $FSTYPES; do
	scratch_make "$fs" 2G >/dev/null
	# overwrite: random 4 KiB rewrites of one written 256 MiB file,
	# shared by every side and run (a rewrite leaves it as it was)
	ow=$SCRATCH_MNT/ab.overwrite
	[[ " $MODES " != *" overwrite "* ]] ||
		dd if=/dev/zero of="$ow" bs=1M count=256 oflag=direct \
			status=none conv=fsync
	for mode in $MODES; do
		for t in $WRITERS; do
			declare -A iops=() cpu=()
			for rep in $(seq "$REPS"); do
				for side in kernel old new; do
					f=$SCRATCH_MNT/ab.$side.$rep
					[ "$mode" != overwrite ] || f=$ow
					[ "$mode" != prealloc ] ||
						fallocate -l 256M "$f"
					case $side in
					kernel) run=(env -u LD_PRELOAD) ;;
					old) run=(env DIOSHIM_SHM_DIR="$SHM/old"
						"$OLD/build/dioshim") ;;
					new) run=(env DIOSHIM_SHM_DIR="$SHM/new"
						"$TOP/build/dioshim") ;;
					esac
					read -r i c < <(one_run "$mode" "$t" \
						"$f" "${run[@]}")
					iops[$side]+="$i "
					cpu[$side]+="$c "
					[ "$f" = "$ow" ] || rm -f "$f"
				done
			done
			for side in kernel old new; do
				mi[$side]=$(tr ' ' '\n' <<<"${iops[$side]}" | grep . | median)
				mc[$side]=$(tr ' ' '\n' <<<"${cpu[$side]}" | grep . | median)
			done
			echo "| $fs | $mode | $t | ${mi[kernel]} | ${mi[old]} | ${mi[new]} | $(awk -v a="${mi[new]}" -v b="${mi[old]}" 'BEGIN {printf "%.2fx", a / b}') | ${mc[kernel]} / ${mc[old]} / ${mc[new]} |"
			unset iops cpu
		done
	done
	scratch_destroy "$SCRATCH_DIR"
done
