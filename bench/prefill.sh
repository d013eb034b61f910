#!/usr/bin/env bash
# bench/prefill.sh [OLD_LAUNCHER]: hole prefill (issue 12), the kernel
# alone beside dioshim (prefill on, ext4 and XFS), on fresh scratch
# filesystems.  Needs root.  For each filesystem:
#
#   race      8 threads of random 4 KiB direct writes into a new sparse
#             64 MiB file: fallocate(KEEP_SIZE) calls made (strace) for
#             the chunks touched; one call per chunk is the aim
#   prealloc  the same writes, SECS seconds, into a 256 MiB file the
#             kernel alone allocated (fallocate -l): prefill calls made,
#             median IOPS of REPS runs and the shim's ratio
#   scattered one writer, 4 KiB every 12 KiB over 64 MiB of a sparse file:
#             allocated KiB (du) after close
#
# With OLD_LAUNCHER (another build's dioshim), its numbers are printed
# beside this tree's.
#
#   sudo bench/prefill.sh
#   sudo SECS=3 REPS=3 bench/prefill.sh /tmp/old/build/dioshim
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OLD_LAUNCHER=${1:-}
: "${SECS:=3}" "${REPS:=3}" "${FSTYPES:=ext4 xfs}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
bench_scratch prefill
make -s -C "$TOP" -j2 BUILD=build all >/dev/null
export DIOSHIM_PREFILL=on
NEW=$TOP/build/dioshim
mkdir -p "$SHM/old" "$SHM/new"

# fio_rand FILE [FIO ARGS...]: 8 threads, random 4 KiB direct writes.
fio_rand() {
	local f=$1
	shift
	fio --name=prefill --filename="$f" --rw=randwrite --bs=4k --direct=1 \
		--ioengine=psync --thread --numjobs=8 --fallocate=none \
		--randrepeat=0 --group_reporting --output-format=terse \
		--terse-version=3 "$@"
}

# prefills LAUNCHER FILE [FIO ARGS...]: "calls chunks" — fallocate
# (KEEP_SIZE) calls under LAUNCHER and the distinct chunks they named.
prefills() {
	local launcher=$1 f=$2 log=$SHM/strace
	shift 2
	strace -f -qq -e trace=fallocate -o "$log" "$launcher" \
		fio --name=p --filename="$f" --rw=randwrite --bs=4k --direct=1 \
		--ioengine=psync --thread --numjobs=8 --fallocate=none \
		--randrepeat=0 "$@" >/dev/null
	grep -o 'KEEP_SIZE, [0-9]*' "$log" | awk '{ n++; c[$2] = 1 }
		END { printf "%d %d\n", n, length(c) }'
}

# iops LAUNCHER... : median write IOPS of REPS prealloc runs.
iops() {
	local f=$SCRATCH_MNT/prealloc i out=()
	for i in $(seq "$REPS"); do
		rm -f "$f"
		fallocate -l 256M "$f"
		out+=("$("$@" bash -c 'fio_rand "$@"' _ "$f" --size=256M \
			--time_based --runtime="$SECS" | cut -d';' -f49)")
	done
	printf '%s\n' "${out[@]}" | median
}
export -f fio_rand

sides=(new)
[ -z "$OLD_LAUNCHER" ] || sides=(old new)


echo "| fs | build | race: prefill calls / chunks | prealloc: prefill calls | prealloc IOPS kernel / dioshim (ratio) | scattered du KiB kernel / dioshim |"
echo "|---|---|--:|--:|---|---|"
for fs in $FSTYPES; do
	scratch_make "$fs" 2G >/dev/null
	f=$SCRATCH_MNT/sparse
	rm -f "$f"
	fio --name=k --filename="$f" --rw=write:8k --bs=4k --direct=1 \
		--ioengine=psync --size=64M --fallocate=none >/dev/null
	kdu=$(du -k "$f" | cut -f1)
	k=$(iops env -u LD_PRELOAD)
	for side in "${sides[@]}"; do
		# each build its own segment directory (another layout
		# version's would make it pass calls through)
		export DIOSHIM_SHM_DIR=$SHM/$side
		l=$NEW
		[ "$side" = new ] || l=$OLD_LAUNCHER
		rm -f "$f"
		read -r rc rn < <(prefills "$l" "$f" --size=64M --number_ios=400)
		rm -f "$f"
		fallocate -l 256M "$f"
		read -r pc _ < <(prefills "$l" "$f" --size=256M --number_ios=400)
		s=$(iops "$l")
		rm -f "$f"
		"$l" fio --name=s --filename="$f" --rw=write:8k --bs=4k \
			--direct=1 --ioengine=psync --size=64M \
			--fallocate=none >/dev/null
		sdu=$(du -k "$f" | cut -f1)
		echo "| $fs | $side | $rc / $rn | $pc | $k / $s ($(awk -v a="$s" -v b="$k" 'BEGIN {printf "%.2f", b ? a / b : 0}')) | $kdu / $sdu |"
	done
	scratch_destroy "$SCRATCH_DIR"
done
