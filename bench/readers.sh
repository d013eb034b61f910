#!/usr/bin/env bash
# bench/readers.sh: readers under write pressure (issue 11, case 8).  Two
# writers rewrite one 1 MiB region of a file with O_DIRECT while two
# readers read it whole, SECS seconds (tests/helpers/tearcheck whole): the
# kernel alone, then under dioshim, interleaved REPS times on a fresh
# scratch ext4 and XFS.  Prints a Markdown table: median reads completed,
# the shim's share of the kernel's, and torn reads (the kernel alone tears
# some; the shim's extent locks must tear none).  Needs root.
#
#   sudo bench/readers.sh
#   sudo SECS=3 REPS=3 WRITERS=2 READERS=2 bench/readers.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
: "${SECS:=3}" "${REPS:=3}" "${WRITERS:=2}" "${READERS:=2}"
: "${FSTYPES:=ext4 xfs}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
bench_scratch readers
make -s -C "$TOP" -j2 BUILD=build all build/tests/helpers/tearcheck >/dev/null
export DIOSHIM_SHM_DIR=$SHM
TEAR=$TOP/build/tests/helpers/tearcheck

echo "| fs | writers | readers | kernel reads | dioshim reads | dioshim/kernel | kernel writes | dioshim writes | torn kernel / dioshim |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|---|"
for fs in $FSTYPES; do
	scratch_make "$fs" 1G >/dev/null
	kr=() sr=() kw=() sw=() kt=0 st=0
	for _ in $(seq "$REPS"); do
		f=$SCRATCH_MNT/readers
		rm -f "$f"
		out=$(env -u LD_PRELOAD "$TEAR" whole "$f" "$SECS" "$WRITERS" \
			"$READERS" 2>&1) || true
		kr+=("$(field reads "$out")")
		kw+=("$(field writes "$out")")
		kt=$((kt + $(field torn "$out")))
		rm -f "$f"
		out=$("$TOP/build/dioshim" "$TEAR" whole "$f" "$SECS" \
			"$WRITERS" "$READERS" 2>&1) || true
		sr+=("$(field reads "$out")")
		sw+=("$(field writes "$out")")
		st=$((st + $(field torn "$out")))
	done
	k=$(printf '%s\n' "${kr[@]}" | median)
	s=$(printf '%s\n' "${sr[@]}" | median)
	w=$(printf '%s\n' "${kw[@]}" | median)
	v=$(printf '%s\n' "${sw[@]}" | median)
	echo "| $fs | $WRITERS | $READERS | $k | $s | $(awk -v a="$s" -v b="$k" 'BEGIN {printf "%.3f", b ? a / b : 0}') | $w | $v | $kt / $st |"
	scratch_destroy "$SCRATCH_DIR"
done
