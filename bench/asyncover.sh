#!/usr/bin/env bash
# bench/asyncover.sh [OLD_LAUNCHER]: queued random overwrites of an
# allocated file (issue 12: nothing to gain, so the budget is <= 3% of the
# kernel alone, CPU per write too).  fio, one job, 4 KiB random direct
# writes at queue depth 16 into a 256 MiB file written through first, with
# libaio and with io_uring; the kernel alone and dioshim interleaved, REPS
# runs of SECS seconds each, medians.  Then what the shim adds to one
# queued write where the write itself costs little: bench/aiocost on
# tmpfs, the fastest of 200 batches, median of REPS interleaved runs.
# Needs root (scratch ext4 and XFS).
#
#   sudo bench/asyncover.sh
#   sudo SECS=5 REPS=5 bench/asyncover.sh /tmp/old/build/dioshim
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OLD_LAUNCHER=${1:-}
: "${SECS:=4}" "${REPS:=3}" "${FSTYPES:=ext4 xfs}" "${ENGINES:=libaio io_uring}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
bench_scratch asyncover
make -s -C "$TOP" -j2 BUILD=build all build/aiocost >/dev/null
NEW=$TOP/build/dioshim

# run ENGINE FILE LAUNCHER...: "iops cpu_us_per_write" of one fio run.
run() {
	local engine=$1 f=$2 iops bytes cpu err
	shift 2
	read -r iops bytes cpu err < <("$@" fio --name=over --filename="$f" \
		--rw=randwrite --bs=4k --direct=1 --ioengine="$engine" \
		--iodepth=16 --size=256M --time_based --runtime="$SECS" \
		--randrepeat=0 --norandommap --output-format=json | fio_parse)
	[ "$err" -eq 0 ]
	echo "$iops $cpu"
}

sides=(kernel new)
[ -z "$OLD_LAUNCHER" ] || sides=(kernel old new)
launcher() {
	case $1 in
	kernel) echo env ;;
	old) echo "env DIOSHIM_SHM_DIR=$SHM/old $OLD_LAUNCHER" ;;
	new) echo "env DIOSHIM_SHM_DIR=$SHM/new $NEW" ;;
	esac
}
mkdir -p "$SHM/old" "$SHM/new"

printf '| fs | engine | side | IOPS (median of %s) | ratio to the kernel | CPU µs/write |\n' "$REPS"
echo "|---|---|---|--:|--:|--:|"
for fs in $FSTYPES; do
	scratch_make "$fs" 1G >/dev/null
	f=$SCRATCH_MNT/over
	# Written through, synced: every write is an overwrite of allocated,
	# written blocks.
	dd if=/dev/urandom of="$f" bs=1M count=256 oflag=direct status=none
	sync -f "$f"
	for engine in $ENGINES; do
		declare -A I=() C=()
		for rep in $(seq "$REPS"); do
			for side in "${sides[@]}"; do
				# shellcheck disable=SC2046
				read -r iops cpu < <(run "$engine" "$f" $(launcher "$side"))
				I[$side]+="$iops "
				C[$side]+="$cpu "
			done
		done
		k=$(printf '%s\n' ${I[kernel]} | median)
		for side in "${sides[@]}"; do
			i=$(printf '%s\n' ${I[$side]} | median)
			c=$(printf '%s\n' ${C[$side]} | median)
			printf '| %s | %s | %s | %s | %s | %s |\n' "$fs" "$engine" \
				"$side" "$i" "$(awk -v a="$i" -v b="$k" \
				'BEGIN { printf "%.3f", a / b }')" "$c"
		done
		unset I C
	done
	scratch_destroy_all
done

# The shim's own cost per queued write, told apart from the device's:
# tmpfs makes the write inside io_submit.
f=$SHM/aiocost.dat
dd if=/dev/zero of="$f" bs=1M count=64 status=none
declare -A B=()
for rep in $(seq "$REPS"); do
	for side in "${sides[@]}"; do
		# shellcheck disable=SC2046
		read -r best _ < <(env DIOSHIM_FS=tmpfs $(launcher "$side") \
			"$TOP/build/aiocost" "$f" 200)
		B[$side]+="$best "
	done
done
echo
printf '| aiocost: tmpfs, libaio, 4 in flight | ns per queued write (fastest batch, median of %s) | over the kernel alone |\n' "$REPS"
echo "|---|--:|--:|"
k=$(printf '%s\n' ${B[kernel]} | median)
for side in "${sides[@]}"; do
	b=$(printf '%s\n' ${B[$side]} | median)
	printf '| %s | %.0f | %s ns |\n' "$side" "$b" \
		"$(awk -v a="$b" -v k="$k" 'BEGIN { printf "%+.0f", a - k }')"
done
