#!/usr/bin/env bash
# bench/real-qemu.sh: QEMU's image tools, the kernel alone against dioshim,
# side by side on fresh scratch ext4 and XFS.  What a VM host runs:
#
#   convert-qcow2    qemu-img convert of a 1 GiB raw image (768 MiB of data)
#                    into a new qcow2, direct, aio=native, 16 coroutines,
#                    out of order: a growing file (MB/s of the source)
#   sparse-native    qemu-img bench -w, 4 KiB at queue depth 16, into a new
#   sparse-io_uring  sparse raw image, each engine (IOPS): the writes the
#                    kernel runs one at a time on ext4
#   alloc-native     the same into a fully allocated raw image (IOPS):
#   alloc-io_uring   nothing to gain, what the shim costs
#
# REPS (default 3) interleaved rounds, kernel then dioshim, each on a fresh
# image; medians.  CPU: user+sys of qemu-img per request (µs/op; for the
# convert, per 64 KiB of source).  Prints one line per point:
#
#   real qemu-img FS WORKLOAD UNIT kernel=K dioshim=S ratio=R cpu_us_k=A cpu_us_s=B
#
# and progress on stderr.  Needs root and qemu-utils.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
: "${REPS:=3}" "${FSTYPES:=ext4 xfs}" "${BUILD:=$TOP/build}"
: "${COUNT:=100000}"
command -v qemu-img >/dev/null || { echo "needs qemu-img (qemu-utils)" >&2; exit 2; }
bench_scratch real-qemu
DIOSHIM=$BUILD/dioshim

# timed SIDE CMD...: runs CMD (under the shim for SIDE s); prints
# "SECONDS CPU_SECONDS", the seconds qemu-img bench reports when it does.
timed() {
	local side=$1 out t
	shift
	local run=(env)
	[ "$side" = s ] && run=(env DIOSHIM_SHM_DIR="$SHM" "$DIOSHIM" --)
	t=$(mktemp)
	out=$(/usr/bin/time -f '%e %U %S' -o "$t" "${run[@]}" "$@")
	local wall usr sys
	read -r wall usr sys <"$t"
	rm -f "$t"
	if [[ $out == *"Run completed in "* ]]; then
		wall=${out##*Run completed in }
		wall=${wall%% *}
	fi
	awk -v w="$wall" -v u="$usr" -v s="$sys" 'BEGIN { print w, u + s }'
}

one() { # FS WORKLOAD SIDE: "RATE CPU_US"
	local fs=$1 w=$2 side=$3 img=$SCRATCH_MNT/img r
	rm -f "$img"
	case $w in
	convert-qcow2)
		qemu-img create -q -f qcow2 "$img" 1G
		r=$(timed "$side" qemu-img convert -n -T none -W -m 16 -f raw \
			--target-image-opts "$SCRATCH_MNT/src.raw" \
			"driver=qcow2,file.driver=file,file.filename=$img,file.aio=native,file.cache.direct=on")
		# MB/s of the source's data; CPU per 64 KiB cluster.
		awk -v r="$r" 'BEGIN { split(r, a, " ");
			printf "%.1f %.1f\n", 768 * 1.048576 / a[1],
				a[2] * 1e6 / (768 * 16) }'
		;;
	sparse-* | alloc-*)
		qemu-img create -q -f raw "$img" 1G
		[[ $w == alloc-* ]] && fallocate -l 1G "$img"
		r=$(timed "$side" qemu-img bench -w -t none -i "${w#*-}" -d 16 \
			-s 4K -c "$COUNT" -f raw "$img")
		awk -v r="$r" -v n="$COUNT" 'BEGIN { split(r, a, " ");
			printf "%.0f %.1f\n", n / a[1], a[2] * 1e6 / n }'
		;;
	esac
}

for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		echo "real-qemu: skipping $fs: $why" >&2
		continue
	fi
	scratch_make "$fs" 4G >/dev/null
	head -c $((768 << 20)) /dev/urandom >"$SCRATCH_MNT/src.raw"
	truncate -s 1G "$SCRATCH_MNT/src.raw"
	for w in convert-qcow2 sparse-native sparse-io_uring alloc-native alloc-io_uring; do
		ks=() ss=() kc=() sc=() rs=()
		for ((rep = 1; rep <= REPS; rep++)); do
			read -r kr kcpu < <(one "$fs" "$w" k)
			read -r sr scpu < <(one "$fs" "$w" s)
			echo "real-qemu: $fs $w rep $rep: kernel $kr dioshim $sr" >&2
			ks+=("$kr") ss+=("$sr") kc+=("$kcpu") sc+=("$scpu")
		done
		k=$(printf '%s\n' "${ks[@]}" | median)
		s=$(printf '%s\n' "${ss[@]}" | median)
		unit=iops
		[ "$w" = convert-qcow2 ] && unit=MB/s
		echo "real qemu-img $fs $w $unit kernel=$k dioshim=$s" \
			"ratio=$(awk -v k="$k" -v s="$s" 'BEGIN { printf "%.2f", s / k }')" \
			"cpu_us_k=$(printf '%s\n' "${kc[@]}" | median)" \
			"cpu_us_s=$(printf '%s\n' "${sc[@]}" | median)"
	done
	scratch_destroy "$SCRATCH_DIR"
done
