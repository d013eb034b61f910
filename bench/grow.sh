#!/usr/bin/env bash
# bench/grow.sh: files that grow the other ways (issue 29) — not by plain
# appends but by a zero range per new cluster, posix_fallocate ahead,
# KEEP_SIZE ahead, ftruncate up — the kernel alone, dioshim, and the
# pattern's own peer, side by side on fresh scratch ext4 and XFS:
#
#   qcow2-native     qemu-img bench -w -t none -d 16, 4 KiB writes each in
#   qcow2-io_uring   a new 64 KiB cluster of a fresh thin 4 GiB qcow2
#   qcow2-threads    (QEMU zero-ranges every cluster past the end), each
#                    engine; peer: QEMU's preallocate filter
#   convert-qcow2    qemu-img convert -t none -W -m 16 of a 1 GiB raw
#                    image (768 MiB of data) into a new qcow2; peer: the
#                    same through the preallocate filter
#   zero-64k         tests/helpers/t_grow, 8 writers of 4 KiB records
#   zero-8k          into what one grower thread grows: a zero range per
#   falloc-4m        64 KiB cluster (qcow2's), per 8 KiB (a zero range
#   keep-1m          before each write), posix_fallocate-like mode 0 of
#   trunc-1m         4 MiB (InnoDB's), KEEP_SIZE 1 MiB ahead (RocksDB's),
#                    ftruncate 1 MiB ahead (Seastar's); peer: the ceiling,
#                    the same writes into a file allocated to its final
#                    size first (every write an overwrite)
#
# Rates (requests or records per second, higher is better); REPS
# (default 3) interleaved rounds of kernel, dioshim, peer, each on a
# fresh file; medians.  CPU: user+sys per request (µs).  fallocate and
# ftruncate calls the kernel sees: counted by strace -f -c in one more
# run of each side (a count, not a time).  Prints one line per point:
#
#   grow FS WORKLOAD kernel=K dioshim=S peer=P vs_kernel=S/K vs_peer=S/P
#        cpu_us_k=.. cpu_us_s=.. cpu_us_p=.. falloc_k=.. falloc_s=..
#
# then, with OUT set, the Markdown section (and PLOT, a PNG, if gnuplot
# is there).  Needs root, qemu-utils for the qcow2 points.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
: "${REPS:=3}" "${FSTYPES:=ext4 xfs}" "${BUILD:=$TOP/build}"
: "${COUNT:=30000}" "${WORKLOADS:=qcow2-native qcow2-io_uring qcow2-threads convert-qcow2 zero-64k zero-8k falloc-4m keep-1m trunc-1m}"
: "${OUT:=}" "${PLOT=$TOP/bench/grow.png}"
bench_scratch grow
DIOSHIM=$BUILD/dioshim
TGROW=$BUILD/tests/helpers/t_grow
[ -x "$TGROW" ] || { echo "build the helpers first (make test-build)" >&2; exit 2; }
HAVE_QEMU=1
command -v qemu-img >/dev/null || HAVE_QEMU=

# timed SIDE CMD...: runs CMD (under the shim for SIDE s); prints
# "SECONDS CPU_SECONDS" — the seconds qemu-img bench reports, or t_grow's.
timed() {
	local side=$1 out t wall usr sys
	shift
	local run=(env)
	[ "$side" = s ] && run=(env DIOSHIM_SHM_DIR="$SHM" "$DIOSHIM" --)
	t=$(mktemp)
	out=$(/usr/bin/time -f '%e %U %S' -o "$t" "${run[@]}" "$@")
	read -r wall usr sys <"$t"
	rm -f "$t"
	if [[ $out == *"Run completed in "* ]]; then
		wall=${out##*Run completed in }
		wall=${wall%% *}
	elif [[ $out == *" writers: "* ]]; then
		wall=${out##* writers: }
		wall=${wall%% *}
	fi
	awk -v w="$wall" -v u="$usr" -v s="$sys" 'BEGIN { print w, u + s }'
}

# The command of WORKLOAD for SIDE (k, s: plain; p: the peer) on IMG.
# Sets OPS: the requests it makes.
command_of() {
	local w=$1 side=$2 img=$3 aio
	case $w in
	qcow2-*)
		aio=${w#qcow2-}
		OPS=$COUNT
		qemu-img create -q -f qcow2 "$img" 4G
		if [ "$side" = p ]; then
			CMD=(qemu-img bench -w -t none -i "$aio" -d 16 -s 4K -S 64K
				-c "$COUNT" --image-opts
				"driver=qcow2,file.driver=preallocate,file.file.driver=file,file.file.filename=$img,file.file.aio=$aio")
		else
			CMD=(qemu-img bench -w -t none -i "$aio" -d 16 -s 4K -S 64K
				-c "$COUNT" -f qcow2 "$img")
		fi
		;;
	convert-qcow2)
		OPS=$((768 * 16)) # 64 KiB clusters of the source's data
		qemu-img create -q -f qcow2 "$img" 1G
		local file="file.driver=file,file.filename=$img,file.aio=native,file.cache.direct=on"
		[ "$side" = p ] &&
			file="file.driver=preallocate,file.file.driver=file,file.file.filename=$img,file.file.aio=native,file.file.cache.direct=on"
		CMD=(qemu-img convert -n -T none -W -m 16 -f raw
			--target-image-opts "$SCRATCH_MNT/src.raw" "driver=qcow2,$file")
		;;
	*)
		local how=${w%-*} c=${w#*-} kib
		kib=${c%k}
		[[ $c == *m ]] && kib=$((${c%m} * 1024))
		[ "$how" = falloc ] || [ "$how" = keep ] || [ "$how" = trunc ] ||
			[ "$how" = zero ] || return 1
		# 256 MiB in all, in clusters of kib
		local k=$((262144 / kib))
		OPS=$((k * kib / 4))
		if [ "$side" = p ]; then
			CMD=("$TGROW" -p -m none -t 8 -c "$kib" -k "$k" "$img")
		else
			CMD=("$TGROW" -m "$how" -t 8 -c "$kib" -k "$k" "$img")
		fi
		;;
	esac
}

one() { # FS WORKLOAD SIDE: "RATE CPU_US"
	local img=$SCRATCH_MNT/img r side=$3
	rm -f "$img"
	command_of "$2" "$side" "$img"
	[ "$side" = p ] && side=k
	r=$(timed "$side" "${CMD[@]}")
	awk -v r="$r" -v n="$OPS" 'BEGIN { split(r, a, " ");
		printf "%.0f %.2f\n", n / a[1], a[2] * 1e6 / n }'
}

# The fallocate and ftruncate calls SIDE makes the kernel see.
calls() {
	local img=$SCRATCH_MNT/img side=$2 t
	rm -f "$img"
	command_of "$1" "$side" "$img"
	t=$(mktemp)
	if [ "$side" = s ]; then
		env DIOSHIM_SHM_DIR="$SHM" "$DIOSHIM" -- strace -f -qq -c -o "$t" \
			-P "$img" -e trace=fallocate,ftruncate "${CMD[@]}" >/dev/null
	else
		strace -f -qq -c -o "$t" -P "$img" -e trace=fallocate,ftruncate \
			"${CMD[@]}" >/dev/null
	fi
	awk '$NF == "fallocate" || $NF == "ftruncate" { n += $4 } END { print n + 0 }' "$t"
	rm -f "$t"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }

lines=$(mktemp)
trap 'scratch_destroy_all; rm -rf "$SHM" "$lines"' EXIT
for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		echo "grow: skipping $fs: $why" >&2
		continue
	fi
	scratch_make "$fs" 6G >/dev/null
	if [ -n "$HAVE_QEMU" ]; then
		head -c $((768 << 20)) /dev/urandom >"$SCRATCH_MNT/src.raw"
		truncate -s 1G "$SCRATCH_MNT/src.raw"
	fi
	for w in $WORKLOADS; do
		if [[ $w == qcow2-* || $w == convert-* ]] && [ -z "$HAVE_QEMU" ]; then
			echo "grow: $w needs qemu-img (qemu-utils): skipped" >&2
			continue
		fi
		ks=() ss=() ps=() kc=() sc=() pc=()
		for ((rep = 1; rep <= REPS; rep++)); do
			read -r kr kcpu < <(one "$fs" "$w" k)
			read -r sr scpu < <(one "$fs" "$w" s)
			read -r pr pcpu < <(one "$fs" "$w" p)
			echo "grow: $fs $w rep $rep: kernel $kr dioshim $sr peer $pr" >&2
			ks+=("$kr") ss+=("$sr") ps+=("$pr")
			kc+=("$kcpu") sc+=("$scpu") pc+=("$pcpu")
		done
		k=$(printf '%s\n' "${ks[@]}" | median)
		s=$(printf '%s\n' "${ss[@]}" | median)
		p=$(printf '%s\n' "${ps[@]}" | median)
		echo "grow $fs $w kernel=$k dioshim=$s peer=$p" \
			"vs_kernel=$(ratio "$s" "$k") vs_peer=$(ratio "$s" "$p")" \
			"cpu_us_k=$(printf '%s\n' "${kc[@]}" | median)" \
			"cpu_us_s=$(printf '%s\n' "${sc[@]}" | median)" \
			"cpu_us_p=$(printf '%s\n' "${pc[@]}" | median)" \
			"falloc_k=$(calls "$w" k) falloc_s=$(calls "$w" s)" |
			tee -a "$lines"
	done
	scratch_destroy "$SCRATCH_DIR"
done

[ -n "$OUT" ] || exit 0
{
	echo "## Growth without a drain: every way a program grows a file (bench/grow.sh; issue 29)"
	echo
	echo "One file grown past its end the ways real programs grow files, the"
	echo "kernel alone, \`dioshim --\` and the pattern's own peer interleaved,"
	echo "REPS=$REPS, medians; each on a fresh file of a fresh scratch"
	echo "filesystem (4 GiB image, loop device with direct I/O).  Rates:"
	echo "requests per second (qemu-img bench), 64 KiB clusters of source"
	echo "data per second (convert), 4 KiB records per second (t_grow, 8"
	echo "writer threads and one grower).  Peers: QEMU's preallocate filter"
	echo "for qemu-img; the ceiling (the same writes into a file allocated to"
	echo "its final size first) for t_grow.  \"fallocate+ftruncate\": the calls"
	echo "the kernel saw in one more run of each side (strace -f -c)."
	echo
	echo "| fs | workload | kernel | dioshim | peer | dioshim/kernel | dioshim/peer | CPU µs/req k / s / peer | fallocate+ftruncate k / s |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|"
	while read -r _ fs w rest; do
		l=" $rest"
		echo "| $fs | $w | $(field kernel "$l") | $(field dioshim "$l") | $(field peer "$l") | **$(field vs_kernel "$l")** | **$(field vs_peer "$l")** | $(field cpu_us_k "$l") / $(field cpu_us_s "$l") / $(field cpu_us_p "$l") | $(field falloc_k "$l") / $(field falloc_s "$l") |"
	done <"$lines"
	echo
	echo "Command: \`sudo REPS=$REPS COUNT=$COUNT bench/grow.sh\` on $(uname -r), $(nproc) CPUs."
	[ -n "$PLOT" ] && command -v gnuplot >/dev/null &&
		echo "Plot: bench/$(basename "$PLOT") (rates relative to the kernel alone)."
} >"$OUT"

if [ -n "$PLOT" ] && command -v gnuplot >/dev/null; then
	dat=$(mktemp)
	while read -r _ fs w rest; do
		l=" $rest"
		k=$(field kernel "$l")
		echo "$fs:$w 1 $(ratio "$(field dioshim "$l")" "$k") $(ratio "$(field peer "$l")" "$k")"
	done <"$lines" >"$dat"
	gnuplot <<EOF
set terminal pngcairo size 1200,500 font ",9"
set output "$PLOT"
set title "Growth without a drain: rate relative to the kernel alone (bench/grow.sh)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set ylabel "rate / kernel alone"
set key top left
set grid ytics
plot "$dat" using 2:xtic(1) title "kernel alone", "" using 3 title "dioshim", "" using 4 title "peer (preallocate filter / ceiling)"
EOF
	rm -f "$dat"
fi
