#!/usr/bin/env bash
# bench/files.sh [OLD_LAUNCHER]: files with one writer each (issue 12),
# the kernel alone beside dioshim on fresh scratch filesystems (ext4 and
# XFS).  Needs root.
#
#   life     N files one after another (FILES, default 1000), each created
#            with O_DIRECT, written in 4 KiB pwrites, fsynced and closed:
#            4 KiB and 64 KiB files; median ms per file of REPS runs,
#            interleaved, the ratio and CPU per file
#   open     OPEN files (default 5000) of 256 KiB open at once on a
#            filesystem with twice the room the data needs: the first
#            ENOSPC, sizes, and the segment directory per open file (also
#            with every file engaged, DIOSHIM_ENGAGE=always)
#   logs     LOGS files (default 100) of 4 KiB appended by 2 threads each
#            (engaged: reservations) and kept open on a small filesystem
#            (160 MiB ext4, 320 MiB XFS, its least) while an unrelated dd,
#            not under the shim, writes 7/8 of what the kernel alone
#            leaves free (the shim's budget for all reservations is 1/16
#            of it): whether dd gets ENOSPC
#
# With OLD_LAUNCHER (another build's dioshim), its numbers are printed
# beside this tree's.
#
#   sudo bench/files.sh
#   sudo REPS=5 FILES=500 PARTS="life" bench/files.sh /tmp/old/build/dioshim
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OLD_LAUNCHER=${1:-}
: "${REPS:=3}" "${FSTYPES:=ext4 xfs}" "${FILES:=1000}" "${OPEN:=5000}"
: "${LOGS:=100}" "${PARTS:=life open logs}"
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
bench_scratch files
make -s -C "$TOP" -j2 BUILD=build all build/filesbench >/dev/null
NEW=$TOP/build/dioshim
FB=$TOP/build/filesbench
mkdir -p "$SHM/old" "$SHM/new"
has_part() { [[ " $PARTS " == *" $1 "* ]]; }

# life SIDE SIZE: one run's "ms cpu" for SIDE (kernel, new or old).
life() {
	local d=$SCRATCH_MNT/life out
	rm -rf "$d"
	mkdir "$d"
	case $1 in
	kernel) out=$("$FB" life "$d" "$FILES" "$2" 4096) ;;
	new) out=$(DIOSHIM_SHM_DIR=$SHM/new "$NEW" -- "$FB" life "$d" "$FILES" "$2" 4096) ;;
	old) out=$(DIOSHIM_SHM_DIR=$SHM/old "$OLD_LAUNCHER" -- "$FB" life "$d" "$FILES" "$2" 4096) ;;
	esac
	echo "$(field ms_per_file "$out") $(field cpu_us_per_file "$out")"
}

sides=(new)
[ -z "$OLD_LAUNCHER" ] || sides=(old new)

if has_part life; then
	echo "Single-writer lifecycle: $FILES files, 4 KiB pwrites, fsync, close; median of $REPS"
	echo
	echo "| fs | file | kernel ms/file (CPU µs) | build | dioshim ms/file (CPU µs) | ratio |"
	echo "|---|--:|--:|---|--:|--:|"
	for fs in $FSTYPES; do
		scratch_make "$fs" 2G >/dev/null
		for size in 4096 65536; do
			declare -A ms=() cpu=()
			for _ in $(seq "$REPS"); do
				for side in kernel "${sides[@]}"; do
					read -r m c < <(life "$side" "$size")
					ms[$side]+="$m "
					cpu[$side]+="$c "
				done
			done
			km=$(tr ' ' '\n' <<<"${ms[kernel]}" | grep . | median)
			kc=$(tr ' ' '\n' <<<"${cpu[kernel]}" | grep . | median)
			for side in "${sides[@]}"; do
				m=$(tr ' ' '\n' <<<"${ms[$side]}" | grep . | median)
				c=$(tr ' ' '\n' <<<"${cpu[$side]}" | grep . | median)
				printf '| %s | %d KiB | %s (%s) | %s | %s (%s) | %.2fx |\n' \
					"$fs" $((size / 1024)) "$km" "$kc" "$side" "$m" "$c" \
					"$(awk -v a="$m" -v b="$km" 'BEGIN { print a / b }')"
			done
			unset ms cpu
		done
		scratch_destroy
	done
	echo
fi

# opened SIDE DIR N SIZE: run filesbench open under SIDE, print its result
# and, while every file is open, the segment directory's KiB per file and
# the filesystem's free MiB.
opened() {
	local side=$1 d=$2 n=$3 size=$4 fifo=$SHM/fifo out
	shift 4
	rm -f "$fifo"
	mkfifo "$fifo"
	local launch=()
	case $side in
	new) launch=(env DIOSHIM_SHM_DIR="$SHM/new" "$NEW" --) ;;
	old) launch=(env DIOSHIM_SHM_DIR="$SHM/old" "$OLD_LAUNCHER" --) ;;
	esac
	"${launch[@]}" "$FB" open "$d" "$n" "$size" 4096 <"$fifo" >"$SHM/out" 2>"$SHM/err" &
	local pid=$! shm free
	exec 9>"$fifo"
	while ! grep -q ready "$SHM/out" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	shm=$(du -sk "$SHM/$side" 2>/dev/null | cut -f1)
	free=$(($(scratch_avail "$SCRATCH_MNT") / 1048576))
	"$@"
	echo >&9
	exec 9>&-
	wait "$pid" || true
	out=$(grep files= "$SHM/out" || echo "files=$n failed")
	echo "$out shm_kib_per_file=$(awk -v s="${shm:-0}" -v n="$n" 'BEGIN { printf "%.1f", s / n }') free_mib=$free"
}

if has_part open; then
	echo "Many open files: $OPEN × 256 KiB appended in 4 KiB O_APPEND writes, all open at once; \"always\": DIOSHIM_ENGAGE=always, every file reserving as a contended one does"
	echo
	echo "| fs | side | files written | first ENOSPC | wrong sizes | free MiB while open | shared memory KiB/file |"
	echo "|---|---|--:|--:|--:|--:|--:|"
	for fs in $FSTYPES; do
		# twice the room the data needs
		scratch_make "$fs" $((OPEN * 256 * 2 / 1024 + 64))M >/dev/null
		for side in kernel "${sides[@]}" always; do
			d=$SCRATCH_MNT/open
			rm -rf "$d"
			mkdir "$d"
			eng=contention
			[ "$side" = always ] && eng=always
			r=$(DIOSHIM_ENGAGE=$eng opened "${side/always/new}" "$d" "$OPEN" 262144 true)
			printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$fs" "$side" \
				"$(($(field written "$r") / 262144))" "$(field enospc_at "$r")" \
				"$(field bad_sizes "$r")" "$(field free_mib "$r")" \
				"$(field shm_kib_per_file "$r")"
			rm -rf "$d"
		done
		scratch_destroy
	done
	echo
fi

if has_part logs; then
	echo "Open log files and an unrelated writer: $LOGS files of 4 KiB kept open on a small filesystem, then dd (outside the shim) of 7/8 of what the kernel alone leaves free; \"always\": DIOSHIM_ENGAGE=always, every file reserving as a contended one does"
	echo
	echo "| fs | side | log ENOSPC | free MiB while open | dd MiB | dd |"
	echo "|---|---|--:|--:|--:|---|"
	for fs in $FSTYPES; do
		size=160M
		[ "$fs" = xfs ] && size=320M
		scratch_make "$fs" "$size" >/dev/null
		d=$SCRATCH_MNT/logs
		rm -rf "$d"
		mkdir "$d"
		count=$(($(field free_mib "$(opened kernel "$d" "$LOGS" 4096 true)") * 7 / 8))
		for side in kernel "${sides[@]}" always; do
			rm -rf "$d"
			mkdir "$d"
			eng=contention
			[ "$side" = always ] && eng=always
			r=$(DIOSHIM_ENGAGE=$eng opened "${side/always/new}" "$d" "$LOGS" 4096 \
				bash -c "dd if=/dev/zero of=$SCRATCH_MNT/dd bs=1M count=$count oflag=direct status=none 2>$SHM/dd.err && echo ok >$SHM/dd.res || echo \"\$(head -1 $SHM/dd.err)\" >$SHM/dd.res")
			printf '| %s | %s | %s | %s | %s | %s |\n' "$fs" "$side" \
				"$(field enospc_at "$r")" "$(field free_mib "$r")" \
				"$count" "$(cat "$SHM/dd.res")"
			rm -rf "$d" "$SCRATCH_MNT/dd"
		done
		scratch_destroy
	done
fi
