#!/usr/bin/env bash
# bench/wide.sh: small writes beside a wide one (issue 11, case 8).  One
# fio job rewrites [0, 64 MiB) of a written file in 4 MiB O_DIRECT writes
# (each as wide as the extent-lock table, 2 MiB, or wider) while another
# writes random 4 KiB blocks of [128, 256) MiB, SECS seconds: the kernel
# alone, then under dioshim, interleaved REPS times on a fresh scratch ext4
# and XFS.  The kernel runs them side by side (both overwrite); the shim
# must too, so the small job's IOPS under the shim should be near the
# kernel's, not held behind every wide write.  Prints a Markdown table of
# medians: each job's IOPS, the ratio, and CPU microseconds per operation
# (both jobs, from fio's usr+sys).  Needs root and fio.
#
#   sudo bench/wide.sh
#   sudo SECS=4 REPS=3 FSTYPES=ext4 bench/wide.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
: "${SECS:=4}" "${REPS:=3}" "${FSTYPES:=ext4 xfs}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
bench_scratch wide
make -s -C "$TOP" -j2 all >/dev/null
export DIOSHIM_SHM_DIR=$SHM

# run FILE [PREFIX...]: "wide_iops small_iops cpu_us_per_op"
run() {
	local f=$1 out
	shift
	out=$("$@" fio --output-format=terse --terse-version=3 --filename="$f" \
		--direct=1 --ioengine=psync --time_based --runtime="$SECS" \
		--name=wide --rw=write --bs=4M --offset=0 --size=64M \
		--name=small --rw=randwrite --bs=4k --offset=128M --size=128M \
		2>/dev/null)
	# terse v3: 3 job name, 49 write IOPS, 88/89 usr/sys CPU %.
	awk -F';' -v secs="$SECS" '
		{ iops[$3] = $49; cpu += ($88 + $89) / 100 * secs
		  ops += $49 * secs }
		END { printf "%d %d %.1f\n", iops["wide"], iops["small"],
			ops ? cpu / ops * 1e6 : 0 }' <<<"$out"
}

col() { printf '%s\n' "$@" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b ? a / b : 0}'; }

echo "| fs | kernel small IOPS | dioshim small IOPS | small dioshim/kernel | kernel wide IOPS | dioshim wide IOPS | wide dioshim/kernel | CPU µs/op kernel / dioshim |"
echo "|---|--:|--:|--:|--:|--:|--:|---|"
for fs in $FSTYPES; do
	scratch_make "$fs" 1G >/dev/null
	f=$SCRATCH_MNT/wide
	dd if=/dev/zero of="$f" bs=4M count=64 oflag=direct status=none
	kw=() ks=() kc=() sw=() ss=() sc=()
	for _ in $(seq "$REPS"); do
		read -r a b c < <(run "$f" env -u LD_PRELOAD)
		kw+=("$a") ks+=("$b") kc+=("$c")
		read -r a b c < <(run "$f" "$TOP/build/dioshim" --)
		sw+=("$a") ss+=("$b") sc+=("$c")
	done
	k=$(col "${ks[@]}") s=$(col "${ss[@]}")
	w=$(col "${kw[@]}") v=$(col "${sw[@]}")
	echo "| $fs | $k | $s | $(ratio "$s" "$k") | $w | $v | $(ratio "$v" "$w") | $(col "${kc[@]}") / $(col "${sc[@]}") |"
	scratch_destroy "$SCRATCH_DIR"
done
