#!/usr/bin/env bash
# contrib/demo.sh: dioshim's main job, shown in a minute or two.
#
#   sudo make demo            (or: sudo contrib/demo.sh)
#
# On a scratch ext4 (and XFS, when this machine has it) it runs 8 threads
# appending 4 KiB O_DIRECT blocks to one file, first with the kernel alone,
# then under dioshim, verifies both files with a reader that is not under
# the shim, and prints IOPS, the ratio and CPU per write.  Then it shows
# why appends need the shim on XFS beyond speed: two processes appending
# with O_APPEND|O_DIRECT lose data with the kernel alone, none under
# dioshim.
#
# Settings (environment): SECS=5 (per append run), WRITERS=8, BLOCKS=2000
# (per process in the O_APPEND race), IMG_SIZE=4G, FSTYPES="ext4 xfs".
# Exit status: 0 when everything dioshim wrote verified, 1 otherwise.
set -euo pipefail
shopt -s inherit_errexit

TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
SECS=${SECS:-5}
WRITERS=${WRITERS:-8}
BLOCKS=${BLOCKS:-2000}
IMG_SIZE=${IMG_SIZE:-4G}
FSTYPES=${FSTYPES:-"ext4 xfs"}
APPENDBENCH=$BUILD/appendbench
DIOSHIM=$BUILD/dioshim

if [ "$(id -u)" != 0 ]; then
	echo "demo: needs root: it makes scratch ext4/XFS filesystems in loop" \
		"devices and mounts them. Run 'sudo make demo'." >&2
	exit 1
fi
for f in "$APPENDBENCH" "$DIOSHIM" "$BUILD/libdioshim.so"; do
	if [ ! -e "$f" ]; then
		echo "demo: $f missing: run 'make demo' (it builds it)" >&2
		exit 1
	fi
done
# "Kernel alone" and the checks must not inherit a preload from our caller.
unset LD_PRELOAD

# shellcheck source=tests/lib/scratchfs.sh
source "$TOP/tests/lib/scratchfs.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-demo.XXXXXX")
export SCRATCH_REGISTRY=$WORK/scratch.registry
# Segments of our own, apart from any other user of the shim here.
export DIOSHIM_SHM_DIR
DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-demo.XXXXXX)
cleanup() {
	scratch_destroy_all || true
	rm -rf "$WORK" "$DIOSHIM_SHM_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_side() {
	local side=$1
	shift
	if [ "$side" = dioshim ]; then "$DIOSHIM" -- "$@"; else "$@"; fi
}
# Align '|'-separated lines into columns (column(1) is not everywhere).
table() {
	awk -F'|' '{ for (i = 1; i <= NF; i++) {
			c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
		     if (NF > nf) nf = NF; n = NR }
		END { for (r = 1; r <= n; r++) { line = ""
			for (i = 1; i <= nf; i++)
				line = line sprintf("%-*s  ", w[i], c[r, i])
			sub(/ +$/, "", line); print "  " line } }'
}
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

ROWS=()      # the append table
RACE_ROWS=() # the O_APPEND race table
ASYNC_ROWS=() # the queue-depth table
ASYNCWRITE=$BUILD/tests/helpers/asyncwrite
ASYNC_BLOCKS=${ASYNC_BLOCKS:-20000}
FAILED=0

# append_run FS SIDE: 8 threads appending from a shared counter, then a
# check of every record by appendbench, outside the shim.
append_run() {
	local fs=$1 side=$2 file=$SCRATCH_MNT/appends.dat out iops cpu ok
	rm -f "$file"
	echo "demo: $fs: $WRITERS threads appending for ${SECS}s," \
		"$([ "$side" = dioshim ] && echo "under dioshim" || echo "kernel alone")..."
	out=$(run_side "$side" "$APPENDBENCH" run -m counter -t "$WRITERS" \
		-s "$SECS" "$file" 2>&1) || {
		echo "demo: $fs $side: appendbench failed: $out" >&2
		exit 1
	}
	iops=$(field iops "$out")
	cpu=$(field cpu_us_per_op "$out")
	if "$APPENDBENCH" check -t "$WRITERS" "$file" >"$WORK/check.out" 2>&1; then
		ok=yes
	else
		ok="NO: $(grep -c . "$WORK/check.out") problems"
		echo "demo: $fs $side: the check FAILED:" >&2
		head -10 "$WORK/check.out" >&2
		[ "$side" = dioshim ] && FAILED=1
	fi
	rm -f "$file"
	LAST_IOPS=$iops
	ROWS+=("$fs|$side|$iops|$cpu|$ok")
}

# One 4 KiB record per line: "A000123 xxxx...x\n", BLOCKS of them.
make_pattern() {
	awk -v l="$1" -v n="$BLOCKS" 'BEGIN {
		pad = sprintf("%4087s", ""); gsub(/ /, "x", pad)
		for (i = 0; i < n; i++) printf "%s%06d %s\n", l, i, pad }' >"$2"
}

# Count what two appenders left in FILE: "records lost dups zeros garbage".
# NULs become newlines, so a zero block reads as 4096 empty lines and the
# 4096-byte record lines stay whole.
race_check() {
	tr '\0' '\n' <"$1" | awk -v n="$BLOCKS" '
		$0 == "" { z++; next }
		length($0) == 4095 &&
		    $0 ~ /^[AB][0-9][0-9][0-9][0-9][0-9][0-9] x+$/ {
			if (seen[substr($0, 1, 7)]++) d++; else r++; next }
		{ g++ }
		END { printf "%d %d %d %d %d\n", r, 2 * n - r, d, z / 4096, g }'
}

# race_run FS SIDE: two dd processes, each opening the file on its own,
# append BLOCKS records with O_APPEND|O_DIRECT at the same time.
race_run() {
	local fs=$1 side=$2 file=$SCRATCH_MNT/race.dat pa pb ra=0 rb=0
	local records lost dups zeros garbage size verdict
	rm -f "$file"
	touch "$file"
	run_side "$side" dd if="$WORK/A.pat" of="$file" bs=4096 \
		oflag=direct,append conv=notrunc status=none &
	pa=$!
	run_side "$side" dd if="$WORK/B.pat" of="$file" bs=4096 \
		oflag=direct,append conv=notrunc status=none &
	pb=$!
	wait $pa || ra=$?
	wait $pb || rb=$?
	if [ $ra != 0 ] || [ $rb != 0 ]; then
		echo "demo: dd failed ($ra, $rb)" >&2
		FAILED=1
	fi
	size=$(stat -c %s "$file")
	read -r records lost dups zeros garbage < <(race_check "$file")
	if [ "$lost" = 0 ] && [ "$dups$zeros$garbage" = 000 ] &&
		[ "$size" = $((2 * BLOCKS * 4096)) ]; then
		verdict=yes
	else
		verdict="NO: $lost appends lost"
		[ "$side" = dioshim ] && FAILED=1
	fi
	echo "demo: $fs: 2 processes x $BLOCKS O_APPEND|O_DIRECT appends," \
		"$side: $records of $((2 * BLOCKS)) records in the file"
	RACE_ROWS+=("$fs|$side|$records of $((2 * BLOCKS))|$lost|$verdict")
	rm -f "$file"
}

# async_run FS ENGINE SIDE: ASYNC_BLOCKS records written in order to a new
# file at queue depth 16 through libaio or liburing, read back, checked.
async_run() {
	local fs=$1 engine=$2 side=$3 file=$SCRATCH_MNT/async.dat out rc=0
	local iops ok
	rm -f "$file"
	out=$(run_side "$side" "$ASYNCWRITE" "$engine" seq "$file" \
		"$ASYNC_BLOCKS" 16 2>&1) || rc=$?
	iops=$(sed -n 's/.*iops=\([0-9]*\).*/\1/p' <<<"$out")
	if [ $rc = 0 ] &&
		[ "$(stat -c %s "$file")" = $((ASYNC_BLOCKS * 4096)) ]; then
		ok=yes
	else
		ok=NO
		FAILED=1
		echo "demo: $fs $engine $side: $out" >&2
	fi
	echo "demo: $fs: $engine queue depth 16, $side: ${iops:-?} IOPS"
	ASYNC_ROWS+=("$fs|$engine|$side|${iops:-0}|$ok")
	LAST_IOPS=${iops:-0}
	rm -f "$file"
}

# IOPS A over the kernel's B, as "3.20x".
times_kernel() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0) ? a / b : 0 }'
}

make_pattern A "$WORK/A.pat"
make_pattern B "$WORK/B.pat"
race_fs=""
made=0
for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		echo "demo: no $fs here: $why"
		continue
	fi
	scratch_make "$fs" "$IMG_SIZE" || {
		echo "demo: cannot make a scratch $fs" >&2
		exit 1
	}
	made=$((made + 1))
	append_run "$fs" kernel
	KERNEL_IOPS=$LAST_IOPS
	append_run "$fs" dioshim
	ROWS[-1]+="|$(times_kernel "$LAST_IOPS" "$KERNEL_IOPS")"
	ROWS[-2]+="|1.00x"
	for engine in aio uring; do
		async_run "$fs" "$engine" kernel
		KERNEL_IOPS=$LAST_IOPS
		async_run "$fs" "$engine" dioshim
		ASYNC_ROWS[-1]+="|$(times_kernel "$LAST_IOPS" "$KERNEL_IOPS")"
		ASYNC_ROWS[-2]+="|1.00x"
	done
	# The O_APPEND race is XFS's (ext4 serialises these appends
	# itself): it is shown on XFS only.
	if [ "$fs" = xfs ]; then
		race_run "$fs" kernel
		race_run "$fs" dioshim
		race_fs=xfs
	fi
	scratch_destroy "$SCRATCH_DIR"
done
if [ $made = 0 ]; then
	echo "demo: could not make any scratch filesystem" >&2
	exit 1
fi

echo
echo "$WRITERS threads appending 4 KiB O_DIRECT writes to one file," \
	"${SECS}s each (appendbench -m counter):"
echo
{
	echo "fs|run|IOPS|vs kernel|CPU us/write|verified"
	for r in "${ROWS[@]}"; do
		IFS='|' read -r fs side iops cpu ok ratio <<<"$r"
		echo "$fs|${side/kernel/kernel alone}|$iops|$ratio|$cpu|$ok"
	done
} | table
echo
echo "$ASYNC_BLOCKS 4 KiB O_DIRECT writes of a new file at queue depth 16" \
	"(libaio io_submit, liburing), read back and checked:"
echo
{
	echo "fs|submitter|run|IOPS|vs kernel|verified"
	for r in "${ASYNC_ROWS[@]}"; do
		IFS='|' read -r fs engine side iops ok ratio <<<"$r"
		[ "$engine" = aio ] && engine=libaio || engine=liburing
		echo "$fs|$engine|${side/kernel/kernel alone}|$iops|$ratio|$ok"
	done
} | table
echo
if [ -n "$race_fs" ]; then
	echo "2 processes appending $BLOCKS blocks each with" \
		"O_APPEND|O_DIRECT (dd oflag=direct,append) on $race_fs:"
	echo
	{
		echo "run|records in the file|lost|verified"
		for r in "${RACE_ROWS[@]}"; do
			IFS='|' read -r fs side recs lost ok <<<"$r"
			echo "${side/kernel/kernel alone}|$recs|$lost|$ok"
		done
	} | table
	case ${RACE_ROWS[0]} in
	*"|0|yes") echo "(the race did not trigger with the kernel alone this" \
		"time; it usually loses about half of the appends)" ;;
	esac
else
	echo "(no XFS here: the O_APPEND race, which loses appends on XFS" \
		"without the shim, was not shown; ext4 serialises those appends)"
fi
echo
if [ $FAILED = 0 ]; then
	echo "demo: everything written under dioshim verified."
else
	echo "demo: FAILED: something written under dioshim did not verify" \
		"(see above)." >&2
	exit 1
fi
