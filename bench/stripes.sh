#!/usr/bin/env bash
# The extent-lock table's cost and its stripe size, on scratch ext4 and
# XFS: random 4 KiB overwrites of a written file (4 and 8 writers) and
# O_APPEND appends (8 writers) — the kernel alone, dioshim with 4 KiB and
# with 64 KiB stripes, and dioshim without the table (DIOSHIM_RANGELOCK=0).
# Interleaved, REPS each, medians.  Writes the table to stdout and $OUT
# (bench/run.sh, section stripes, puts it in bench/RESULTS.md).  Needs root.
#
#   SECS=3 REPS=3 bench/stripes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
SECS=${SECS:-3}
REPS=${REPS:-3}
FSES=${FSES:-"ext4 xfs"}
OUT=${OUT:-$TOP/bench/results/stripes.md}
DIOSHIM=$TOP/build/dioshim
AB=$TOP/build/appendbench

if [ "$(id -u)" != 0 ]; then
	echo "bench/stripes.sh: needs root (it makes scratch filesystems)"
	exit 0
fi
export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-bench-stripes.$$
export DIOSHIM_SHM_DIR
DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-bench.XXXXXX)
T=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-stripes.XXXXXX")
source tests/lib/scratchfs.sh
trap 'scratch_destroy_all; rm -rf "$DIOSHIM_SHM_DIR" "$T"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
iops() { sed -n 's/.*iops=\([0-9]*\).*/\1/p'; }

# One side of a point: kernel | 4k | 64k | nolock.
side() {
	local s=$1
	shift
	case $s in
	kernel) "$@" ;;
	4k) DIOSHIM_STRIPE_SIZE=4k "$DIOSHIM" "$@" ;;
	64k) DIOSHIM_STRIPE_SIZE=64k "$DIOSHIM" "$@" ;;
	nolock) DIOSHIM_RANGELOCK=0 "$DIOSHIM" "$@" ;;
	esac
}

point() {
	local fs=$1 label=$2 sides=$3 r s
	shift 3
	for s in $sides; do : >"$T/$s"; done
	for r in $(seq "$REPS"); do
		for s in $sides; do
			rm -f "$SCRATCH_MNT/ap"
			side "$s" "$@" | iops >>"$T/$s"
		done
	done
	printf '| %s | %s |' "$fs" "$label"
	for s in kernel 4k 64k nolock; do
		if [ -s "$T/$s" ] && [[ " $sides " == *" $s "* ]]; then
			printf ' %.0f |' "$(median <"$T/$s")"
		else
			printf ' |'
		fi
	done
	echo
}

mkdir -p "$(dirname "$OUT")"
{
	echo "## The extent-lock table: its cost, and the stripe size"
	echo
	echo "$(date -u +%F), Linux $(uname -r), $(nproc) CPUs; \`SECS=$SECS REPS=$REPS"
	echo "bench/stripes.sh\`; IOPS, medians of $REPS interleaved runs. Random 4 KiB"
	echo "overwrites of a written 256M file, and O_APPEND appends of 4 KiB by 8 threads:"
	echo "stripes of one block keep adjacent appends apart; 64 KiB stripes serialise"
	echo "them. The default is 512 stripes of 4 KiB."
	echo
	echo "| fs | workload | kernel | dioshim, 4 KiB stripes | dioshim, 64 KiB stripes | dioshim, no table |"
	echo "|---|---|--:|--:|--:|--:|"
} >"$OUT.tmp"
for fs in $FSES; do
	why=$(scratch_skip_reason "$fs") || { echo "skipping $fs: $why" >&2; continue; }
	scratch_make "$fs" 4G
	"$AB" run -m counter -t 4 -n 16384 "$SCRATCH_MNT/ow" >/dev/null
	for w in 4 8; do
		point "$fs" "random overwrite, $w writers" "kernel 4k 64k nolock" \
			"$AB" run -m overwrite -t "$w" -s "$SECS" "$SCRATCH_MNT/ow" |
			tee -a "$OUT.tmp"
	done
	point "$fs" "O_APPEND appends, 8 writers" "kernel 4k 64k nolock" \
		"$AB" run -m append -t 8 -s "$SECS" "$SCRATCH_MNT/ap" | tee -a "$OUT.tmp"
	scratch_destroy
done
mv "$OUT.tmp" "$OUT"
cat "$OUT"
