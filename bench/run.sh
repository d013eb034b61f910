#!/usr/bin/env bash
# bench/run.sh: the kernel alone against dioshim, side by side, on fresh
# scratch ext4 and XFS filesystems; prints one line per measurement, then a
# Markdown table per filesystem and workload, and rewrites bench/RESULTS.md.
#
#   sudo bench/run.sh                    # what `make bench` runs
#   sudo SECS=2 REPS=3 bench/run.sh      # a quick pass
#
# Every point runs the two sides INTERLEAVED (kernel, dioshim, kernel,
# dioshim, ...), each on a fresh file (the overwrite workload: on one
# written file, after a sync), REPS times, and reports medians: on
# a machine whose load drifts, interleaving spreads the drift over both
# sides instead of charging it to one.  Every append run of the first rep
# (CHECK=all: of every rep) is verified with `appendbench check`, outside
# the shim; a failed check aborts the whole run.
#
# Settings (environment):
#   SECS=4          seconds per appendbench / fio run
#   REPS=3          runs per side and point (median reported)
#   WRITERS="1 2 4 8"  thread counts
#   PROCS=4         process counts for the O_APPEND process case
#   FSTYPES="ext4 xfs"
#   SECTIONS="append overwrite sparse async fio overhead fsync stripes real grow"
#                   what to run (sparse: fio random writes into a sparse
#                   file; async: libaio and liburing at queue depth 16)
#                   (fsync: bench/fsync.sh, sysbench's fsync workload and
#                   group commit; stripes: bench/stripes.sh, the extent-lock
#                   table's stripe size; both on filesystems of their own)
#                   (real: bench/real.sh, qemu-img, PostgreSQL, MariaDB and
#                   RocksDB kernel vs dioshim, with bench/real.png; about
#                   20 minutes more; PROGRAMS= narrows it, REAL_SECS=20 the
#                   seconds of each database run)
#                   (grow: bench/grow.sh, files grown by zero ranges,
#                   fallocate and ftruncate ahead, against QEMU's
#                   preallocate filter and the preallocated ceiling, with
#                   bench/grow.png; about 15 minutes more)
#   IMG_SIZE=4G     scratch image size
#   PREALLOC=2G     the ceiling's fallocate size (must exceed what it writes)
#   OVERWRITE_SIZE=256M  the file the overwrite workload rewrites
#   ASYNC_FIO_SIZE=64M ASYNC_BLOCKS=40000   each fio libaio job's region,
#                   the liburing writer's records (async section)
#   CHECK=first     first|all: which reps to verify
#   TAR_FILES=8000 TAR_REPS=7    the launcher-overhead budget
#   CALL_REPS=7                  its per-call cost (bench/callcost)
#   NOTE=...        a line for RESULTS.md's header (e.g. "noisy machine")
#   KEEP_DIR=/var/tmp   where a file that fails its check is kept
#   RESULTS=bench/RESULTS.md     where the tables go ("" = stdout only)
#
# Default run: about 18 minutes (2 filesystems x 30 points x 3 reps x 4 s,
# plus fio and the overhead budget).
set -euo pipefail
# Failures inside $(...) stop the run too (a failed tar must not be timed).
shopt -s inherit_errexit

TOP=$(cd "$(dirname "$0")/.." && pwd)
# The command line that produced this run, for RESULTS.md: the settings
# given in the environment, before the defaults fill in the rest.
SETTINGS="SECS REPS WRITERS PROCS FSTYPES SECTIONS IMG_SIZE PREALLOC"
SETTINGS+=" OVERWRITE_SIZE ASYNC_FIO_SIZE ASYNC_BLOCKS CHECK TAR_FILES TAR_REPS"
if [ -z "${BENCH_CMD:-}" ]; then
	BENCH_CMD=
	for v in $SETTINGS; do
		[ -z "${!v+set}" ] || BENCH_CMD+="$v='${!v}' "
	done
	BENCH_CMD+="bench/run.sh"
fi
BUILD=${BUILD:-$TOP/build}
SECS=${SECS:-4}
REPS=${REPS:-3}
WRITERS=${WRITERS:-"1 2 4 8"}
PROCS=${PROCS:-4}
FSTYPES=${FSTYPES:-"ext4 xfs"}
SECTIONS=${SECTIONS:-"append overwrite sparse async fio overhead fsync stripes real grow"}
IMG_SIZE=${IMG_SIZE:-4G}
PREALLOC=${PREALLOC:-2G}
OVERWRITE_SIZE=${OVERWRITE_SIZE:-256M}
ASYNC_FIO_SIZE=${ASYNC_FIO_SIZE:-64M}
ASYNC_BLOCKS=${ASYNC_BLOCKS:-40000}
ASYNCWRITE=$BUILD/tests/helpers/asyncwrite
CHECK=${CHECK:-first}
TAR_FILES=${TAR_FILES:-8000}
TAR_REPS=${TAR_REPS:-7}
CALL_REPS=${CALL_REPS:-7}
NOTE=${NOTE:-}
RESULTS=${RESULTS-$TOP/bench/RESULTS.md}
BS=4096

APPENDBENCH=$BUILD/appendbench
DIOSHIM=$BUILD/dioshim

# Targets from the issue, shown in the table headers and judged below them.
# (read through ${!target} in append_table)
# shellcheck disable=SC2034
TARGET_RATIO_ext4=2.5
# shellcheck disable=SC2034
TARGET_RATIO_xfs=2.0
TARGET_CEILING=0.9
TARGET_OVERWRITE_LOSS=3 # percent fewer IOPS allowed at 4 writers

die() {
	echo "bench: ABORT: $*" >&2
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (it makes loop devices and mounts scratch" \
		"filesystems); run 'sudo make bench'. Nothing measured."
	exit 0
fi
for f in "$APPENDBENCH" "$DIOSHIM" "$BUILD/libdioshim.so"; do
	[ -x "$f" ] || [ -f "$f" ] ||
		die "$f missing: run 'make all test-build' (or 'make bench')"
done
case $CHECK in first | all) ;; *) die "CHECK must be first or all" ;; esac
[ "$REPS" -ge 1 ] 2>/dev/null || die "REPS must be a positive number"

# The "kernel alone" side and every check must run without the shim even
# when this script itself was started under it.
unset LD_PRELOAD

# shellcheck source=tests/lib/scratchfs.sh
source "$TOP/tests/lib/scratchfs.sh"
# fio_parse (its median and field are run.sh's own, below)
# shellcheck source=lib.sh
source "$TOP/bench/lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-bench.XXXXXX")
export SCRATCH_REGISTRY=$WORK/scratch.registry
# A segment directory of our own: the integration tests running beside us
# must never see, or reclaim, the benchmark's shared segments.
export DIOSHIM_SHM_DIR
DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-bench.XXXXXX)
cleanup() {
	scratch_destroy_all || true
	rm -rf "$WORK" "$DIOSHIM_SHM_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

MD=$WORK/results.md # the tables, in order; RESULTS.md is written at the end
: >"$MD"
declare -A IOPS CPU NOTES
SUMMARY=() # the verdicts against the targets, for the top of RESULTS.md

has_section() { [[ " $SECTIONS " == *" $1 "* ]]; }

# ---- small helpers --------------------------------------------------------

# The median of the arguments (numbers).
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (!NR) print "nan"
		      else if (NR % 2) print v[(NR + 1) / 2]
		      else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Median of the pair-by-pair overhead in percent: paired_pct "K1 K2 .."
# "S1 S2 ..", run i of one side beside run i of the other.  A machine
# whose speed drifts during the runs moves both of a pair alike, where it
# would move the two medians apart.
paired_pct() {
	# shellcheck disable=SC2046,SC2086
	median $(paste -d' ' <(printf '%s\n' $1) <(printf '%s\n' $2) |
		awk '$1 > 0 { printf "%.3f\n", ($2 / $1 - 1) * 100 }') |
		awk '$1 == "nan" { print; next } { printf "%+.1f\n", $1 }'
}

# awk arithmetic with a printf format: calc FORMAT EXPR
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# Size with a k/M/G suffix in bytes.
bytes() {
	awk -v s="$1" 'BEGIN { n = s + 0; u = substr(s, length(s))
		if (u == "k" || u == "K") n *= 1024
		if (u == "m" || u == "M") n *= 1048576
		if (u == "g" || u == "G") n *= 1073741824
		printf "%d", n }'
}

# Run a command as one side: "kernel" as is, "dioshim" under the launcher.
run_side() {
	local side=$1
	shift
	case $side in
	dioshim) "$DIOSHIM" -- "$@" ;;
	# an LD_PRELOAD library that only forwards (bench/fwd.c): what any
	# interposer costs here
	forwarder) env LD_PRELOAD="$BUILD/fwd.so" "$@" ;;
	# dioshim without the extent-lock table: what the table costs
	nolock) DIOSHIM_RANGELOCK=0 "$DIOSHIM" -- "$@" ;;
	*) "$@" ;;
	esac
}

# How a side's command line starts, for "reproduce:" messages.
side_prefix() {
	case $1 in
	dioshim) echo "$DIOSHIM --" ;;
	nolock) echo "DIOSHIM_RANGELOCK=0 $DIOSHIM --" ;;
	esac
}

# The value of key= in an appendbench result line.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

# Print and record one line (the arguments joined by spaces): every table
# line goes to stdout and to RESULTS.md.  blank: an empty line.
emit() { printf '%s\n' "$*" | tee -a "$MD"; }
blank() { emit ""; }

# ---- appendbench points ----------------------------------------------------

# measure FS WORKLOAD WRITERS SIDE REP
# WORKLOAD: counter | append (threads) | procs (O_APPEND, -p processes) |
#           ceiling (counter into a -P file, kernel only) | overwrite
measure() {
	local fs=$1 wl=$2 w=$3 side=$4 rep=$5
	local file=$SCRATCH_MNT/append.dat args=() cargs=() out rc
	local iops cpu ops size check="" keep
	case $wl in
	counter) args=(-m counter -t "$w"); cargs=(-t "$w") ;;
	append) args=(-m append -t "$w"); cargs=(-t "$w") ;;
	procs) args=(-m append -t 1 -p "$w"); cargs=(-t 1 -p "$w") ;;
	ceiling) args=(-m counter -t "$w" -P "$PREALLOC") ;;
	overwrite) args=(-m overwrite -t "$w"); file=$OVERWRITE_FILE ;;
	esac
	# The overwrite file is written once per filesystem and reused: an
	# overwrite of written blocks leaves it as it was, and rewriting
	# 256M before every run would cost more than the run.  Every run
	# starts after a sync, so that the journal and the metadata the run
	# before left behind are not flushed on this run's clock.
	[ "$wl" = overwrite ] || rm -f "$file"
	sync -f "$SCRATCH_MNT"
	rc=0
	out=$(run_side "$side" "$APPENDBENCH" run "${args[@]}" -b "$BS" \
		-s "$SECS" "$file" 2>&1) || rc=$?
	if [ $rc != 0 ] || [ "$(field errors "$out")" != 0 ]; then
		printf '%s\n' "$out" >&2
		die "$fs $wl writers=$w $side: appendbench run failed (exit $rc)." \
			"Reproduce: $(side_prefix "$side") $APPENDBENCH run ${args[*]}" \
			"-b $BS -s $SECS FILE on a fresh $fs"
	fi
	iops=$(field iops "$out")
	cpu=$(field cpu_us_per_op "$out")
	ops=$(field ops "$out")
	size=$(field size "$out")

	# Verify what was written, with a reader that is not under the shim.
	if [ ${#cargs[@]} -gt 0 ] && { [ "$CHECK" = all ] || [ "$rep" = 1 ]; }; then
		rc=0
		out=$("$APPENDBENCH" check -b "$BS" "${cargs[@]}" "$file" 2>&1) ||
			rc=$?
		if [ $rc != 0 ]; then
			printf '%s\n' "$out" | head -20 >&2
			echo "bench: DATA CHECK FAILED: $fs $wl writers=$w $side rep $rep" >&2
			# Keep the evidence: the scratch filesystem is torn down
			# on the way out.
			keep=${KEEP_DIR:-/var/tmp}/dioshim-bench-failed-$fs-$wl-$w-$side.dat
			cp --sparse=always "$file" "$keep" &&
				echo "bench: the file that failed is kept as $keep" >&2
			echo "bench: reproduce on a fresh $fs: $(side_prefix "$side")" \
				"$APPENDBENCH run ${args[*]} -b $BS -s $SECS F &&" \
				"$APPENDBENCH check -b $BS ${cargs[*]} F" >&2
			die "data check failed"
		fi
		check="check ok"
	fi
	case $wl in
	ceiling)
		# Past the preallocated size the run measures appends again,
		# not the ceiling: flag the point rather than report it as one.
		if [ $((ops * BS)) -gt "$(bytes "$PREALLOC")" ]; then
			NOTES["$fs|ceiling|$w"]="wrote past -P $PREALLOC"
			check="WARNING: wrote past the preallocated $PREALLOC"
		fi ;;
	overwrite)
		size=$(stat -c %s "$file")
		[ "$size" = "$(bytes "$OVERWRITE_SIZE")" ] ||
			die "$fs overwrite writers=$w $side: the file's size" \
				"changed to $size (expected $OVERWRITE_SIZE)"
		check="size unchanged" ;;
	esac
	IOPS["$fs|$wl|$w|$side"]+="$iops "
	CPU["$fs|$wl|$w|$side"]+="$cpu "
	printf '[%s] %-9s writers=%-2s rep %s/%s %-7s %7s IOPS %7s us/write %s\n' \
		"$fs" "$wl" "$w" "$rep" "$REPS" "$side" "$iops" "$cpu" "$check"
}

# The medians of a point: sets K_IOPS K_CPU S_IOPS S_CPU (IOPS whole,
# CPU with two decimals; "nan" if the point was not measured).
medians() {
	local key=$1
	# shellcheck disable=SC2086
	K_IOPS=$(median ${IOPS["$key|kernel"]:-} | rnd 0)
	# shellcheck disable=SC2086
	K_CPU=$(median ${CPU["$key|kernel"]:-} | rnd 2)
	# shellcheck disable=SC2086
	S_IOPS=$(median ${IOPS["$key|dioshim"]:-} | rnd 0)
	# shellcheck disable=SC2086
	S_CPU=$(median ${CPU["$key|dioshim"]:-} | rnd 2)
}

# Round stdin's number to $1 decimals (leaves "nan" alone).
rnd() { awk -v d="$1" '$1 == "nan" { print; next } { printf "%." d "f\n", $1 }'; }

# a/b as "1.23x", "-" when either is missing.
ratio() {
	case "$1$2" in *nan* | "") echo "-"; return ;; esac
	calc "%.2fx" "($2 > 0) ? $1 / $2 : 0"
}

# The range of a point's per-rep ratios (dioshim run i over the kernel run
# just before it) as " (0.95-1.10)": how much of a ratio is noise.
spread() {
	local k=${IOPS["$1|kernel"]:-} s=${IOPS["$1|dioshim"]:-}
	[ "$REPS" -gt 1 ] && [ -n "$k" ] && [ -n "$s" ] || return 0
	awk -v k="$k" -v s="$s" 'BEGIN {
		n = split(k, a, " "); split(s, b, " ")
		for (i = 1; i <= n; i++) if (a[i] > 0) {
			r = b[i] / a[i]
			if (!lo || r < lo) lo = r
			if (r > hi) hi = r }
		if (lo) printf " (%.2f-%.2f)", lo, hi }'
}

# The signed percentage by which a differs from b, as a number.
pct() { calc "%+.1f" "($2 > 0) ? ($1 / $2 - 1) * 100 : 0"; }
met() { calc "%s" "($1) ? \"met\" : \"**not met**\""; }

# An append table: counter or O_APPEND (threads, then process rows).
# append_table FS WORKLOAD SHORTNAME TITLE
append_table() {
	local fs=$1 wl=$2 short=$3 title=$4 target r c w label key
	local verdict="" rr cr
	target=TARGET_RATIO_$fs
	blank
	emit "### $fs: $title"
	blank
	emit "Target at 8 writers: dioshim >= ${!target}x the kernel and" \
		">= ${TARGET_CEILING}x the ceiling (the same writers' counter" \
		"appends into a file preallocated with -P $PREALLOC, kernel alone)."
	blank
	emit "| writers | kernel IOPS | dioshim IOPS | dioshim/kernel |" \
		"kernel µs/write | dioshim µs/write | ceiling IOPS |" \
		"dioshim/ceiling |"
	emit "|---|--:|--:|--:|--:|--:|--:|--:|"
	local rows=()
	for w in $WRITERS; do rows+=("$wl $w $w"); done
	if [ "$wl" = append ]; then
		for w in $PROCS; do rows+=("procs $w $w-procs"); done
	fi
	for r in "${rows[@]}"; do
		# shellcheck disable=SC2086
		set -- $r
		key="$fs|$1|$2"
		label=${3/-/ }
		medians "$key"
		# shellcheck disable=SC2086
		c=$(median ${IOPS["$fs|ceiling|$2|kernel"]:-} | rnd 0)
		emit "| $label | ${K_IOPS%.*} | ${S_IOPS%.*} |" \
			"$(ratio "$S_IOPS" "$K_IOPS")$(spread "$key") | $K_CPU | $S_CPU |" \
			"${c%.*}${NOTES["$fs|ceiling|$2"]:+ (!)} |" \
			"$(ratio "$S_IOPS" "$c") |"
		if [ "$1" = "$wl" ] && [ "$2" = 8 ]; then
			rr=$(calc "%.2f" "($K_IOPS > 0) ? $S_IOPS / $K_IOPS : 0")
			cr=$(calc "%.2f" "($c > 0) ? $S_IOPS / $c : 0")
			verdict="- **$fs $short, 8 writers:** ${rr}x the kernel"
			verdict+=" (target >= ${!target}x: $(met "$rr >= ${!target}"));"
			verdict+=" ${cr}x the ceiling (target >= $TARGET_CEILING:"
			verdict+=" $(met "$cr >= $TARGET_CEILING"))."
		fi
	done
	blank
	emit "Medians of $REPS interleaved runs of ${SECS}s; data verified" \
		"with \`appendbench check\` outside the shim ($CHECK rep" \
		"of every point; a failed check aborts the run): all ok."
	if [ -n "$verdict" ]; then
		emit "$verdict"
		SUMMARY+=("$verdict")
	fi
}

ceiling_table() {
	local fs=$1 w k c
	blank
	emit "### $fs: (c) the ceiling: counter appends into a preallocated file (kernel alone)"
	blank
	emit "The appends of (a) into a file fallocated to $PREALLOC first," \
		"so every write overwrites an allocated (unwritten) extent."
	blank
	emit "| writers | IOPS | µs/write | note |"
	emit "|---|--:|--:|---|"
	for w in $WRITERS; do
		# shellcheck disable=SC2086
		k=$(median ${IOPS["$fs|ceiling|$w|kernel"]:-} | rnd 0)
		# shellcheck disable=SC2086
		c=$(median ${CPU["$fs|ceiling|$w|kernel"]:-} | rnd 2)
		emit "| $w | ${k%.*} | $c | ${NOTES["$fs|ceiling|$w"]:-} |"
	done
}

overwrite_table() {
	local fs=$1 w d verdict=""
	blank
	emit "### $fs: (d) random 4 KiB overwrite of a written $OVERWRITE_SIZE file"
	blank
	emit "The kernel already runs these in parallel. Target at 4 writers:" \
		"dioshim within $TARGET_OVERWRITE_LOSS% of the kernel's IOPS." \
		"\"no lock table\": dioshim with DIOSHIM_RANGELOCK=0, to show" \
		"what the extent-lock table itself costs."
	blank
	emit "| writers | kernel IOPS | dioshim IOPS | dioshim/kernel |" \
		"difference | no lock table IOPS | kernel µs/write |" \
		"dioshim µs/write | no lock table µs/write |"
	emit "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	for w in $WRITERS; do
		local n_iops n_cpu
		# shellcheck disable=SC2086
		n_iops=$(median ${IOPS["$fs|overwrite|$w|nolock"]:-} | rnd 0)
		# shellcheck disable=SC2086
		n_cpu=$(median ${CPU["$fs|overwrite|$w|nolock"]:-} | rnd 2)
		medians "$fs|overwrite|$w"
		d=$(pct "$S_IOPS" "$K_IOPS")
		emit "| $w | ${K_IOPS%.*} | ${S_IOPS%.*} |" \
			"$(ratio "$S_IOPS" "$K_IOPS")$(spread "$fs|overwrite|$w") |" \
			"$d% | ${n_iops%.*} | $K_CPU | $S_CPU | $n_cpu |"
		if [ "$w" = 4 ]; then
			verdict="- **$fs overwrite, 4 writers:** $d% IOPS against"
			verdict+=" the kernel (target >= -$TARGET_OVERWRITE_LOSS%:"
			verdict+=" $(met "$d >= -$TARGET_OVERWRITE_LOSS"))."
		fi
	done
	blank
	emit "Medians of $REPS interleaved runs of ${SECS}s; the file's size" \
		"checked after every run (outside the shim)."
	if [ -n "$verdict" ]; then
		emit "$verdict"
		SUMMARY+=("$verdict")
	fi
}

bench_appends() {
	local fs=$1 w p rep
	if has_section overwrite; then
		OVERWRITE_FILE=$SCRATCH_MNT/overwrite.dat
		# Written by the kernel alone, with data (not fallocated): the
		# "already written file" the kernel overwrites in parallel.
		dd if=/dev/zero of="$OVERWRITE_FILE" bs=1M \
			count=$(($(bytes "$OVERWRITE_SIZE") / 1048576)) \
			oflag=direct conv=fsync status=none
	fi
	for w in $WRITERS; do
		for ((rep = 1; rep <= REPS; rep++)); do
			if has_section append; then
				measure "$fs" counter "$w" kernel "$rep"
				measure "$fs" counter "$w" dioshim "$rep"
				measure "$fs" append "$w" kernel "$rep"
				measure "$fs" append "$w" dioshim "$rep"
				measure "$fs" ceiling "$w" kernel "$rep"
			fi
			if has_section overwrite; then
				measure "$fs" overwrite "$w" kernel "$rep"
				measure "$fs" overwrite "$w" dioshim "$rep"
				measure "$fs" overwrite "$w" nolock "$rep"
			fi
		done
	done
	if has_section append; then
		for p in $PROCS; do
			for ((rep = 1; rep <= REPS; rep++)); do
				measure "$fs" procs "$p" kernel "$rep"
				measure "$fs" procs "$p" dioshim "$rep"
			done
		done
		# The process case needs its ceiling point too.
		for p in $PROCS; do
			[[ " $WRITERS " == *" $p "* ]] && continue
			for ((rep = 1; rep <= REPS; rep++)); do
				measure "$fs" ceiling "$p" kernel "$rep"
			done
		done
		append_table "$fs" counter "counter appends" \
			"(a) counter appends: threads pwrite() at offsets from a shared counter"
		append_table "$fs" append "O_APPEND appends (threads)" \
			"(b) O_APPEND appends: write() by threads (and by processes sharing the open file)"
		ceiling_table "$fs"
	fi
	if has_section overwrite; then
		overwrite_table "$fs"
		rm -f "$OVERWRITE_FILE"
	fi
}

# ---- fio ---------------------------------------------------------------------

# fio_measure FS JOB SIDE REP
fio_measure() {
	local fs=$1 job=$2 side=$3 rep=$4 dir=$SCRATCH_MNT/fio json rc
	local iops bytes cpu err size want check
	rm -rf "$dir"
	mkdir -p "$dir"
	sync -f "$SCRATCH_MNT"
	json=$WORK/fio.json
	rc=0
	FIO_DIR=$dir FIO_SECS=$SECS run_side "$side" \
		fio --output-format=json "$TOP/bench/fio/$job.fio" \
		>"$json" 2>"$WORK/fio.err" || rc=$?
	read -r iops bytes cpu err < <(fio_parse <"$json")
	if [ $rc != 0 ] || [ "$err" != 0 ] || [ "$iops" = 0 ]; then
		cat "$WORK/fio.err" >&2
		die "$fs fio $job $side failed (exit $rc, error $err)." \
			"Reproduce: FIO_DIR=DIR FIO_SECS=$SECS $(side_prefix "$side")" \
			"fio bench/fio/$job.fio"
	fi
	# Sizes, read outside the shim: the sequential jobs' files hold
	# exactly what fio wrote (no reserved tail left behind); the
	# preallocated file keeps its size.
	size=$(find "$dir" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	case $job in
	randwrite-prealloc) want=$(bytes "$(sed -n 's/^size=//p' \
		"$TOP/bench/fio/$job.fio")") ;;
	*) want=$bytes ;;
	esac
	[ "$size" = "$want" ] ||
		die "$fs fio $job $side: files hold $size bytes, expected $want." \
			"Reproduce: FIO_DIR=DIR FIO_SECS=$SECS $(side_prefix "$side")" \
			"fio bench/fio/$job.fio; ls -l DIR"
	check="size ok"
	IOPS["$fs|fio-$job|-|$side"]+="$iops "
	CPU["$fs|fio-$job|-|$side"]+="$cpu "
	printf '[%s] fio %-18s rep %s/%s %-7s %7s IOPS %7s us/write %s\n' \
		"$fs" "$job" "$rep" "$REPS" "$side" "$iops" "$cpu" "$check"
	rm -rf "$dir"
}

FIO_JOBS="seqwrite-1job seqwrite-4jobs randwrite-prealloc"

# ---- random writes into a sparse file (hole prefill) ------------------------

sparse_measure() {
	local fs=$1 jobs=$2 side=$3 rep=$4 dir=$SCRATCH_MNT/fio json rc
	local iops bytes cpu err size
	rm -rf "$dir"
	mkdir -p "$dir"
	truncate -s 1G "$dir/sparse"
	sync -f "$SCRATCH_MNT"
	json=$WORK/fio.json
	rc=0
	FIO_DIR=$dir FIO_SECS=$SECS FIO_NUMJOBS=$jobs run_side "$side" \
		fio --output-format=json "$TOP/bench/fio/randwrite-sparse.fio" \
		>"$json" 2>"$WORK/fio.err" || rc=$?
	read -r iops bytes cpu err < <(fio_parse <"$json")
	if [ $rc != 0 ] || [ "$err" != 0 ] || [ "$iops" = 0 ]; then
		cat "$WORK/fio.err" >&2
		die "$fs sparse $jobs jobs $side failed (exit $rc, error $err)." \
			"Reproduce: truncate -s 1G DIR/sparse; FIO_DIR=DIR" \
			"FIO_SECS=$SECS FIO_NUMJOBS=$jobs $(side_prefix "$side")" \
			"fio bench/fio/randwrite-sparse.fio"
	fi
	size=$(stat -c %s "$dir/sparse")
	[ "$size" = $((1 << 30)) ] ||
		die "$fs sparse $jobs jobs $side: the file is $size bytes, not 1G"
	IOPS["$fs|sparse|$jobs|$side"]+="$iops "
	CPU["$fs|sparse|$jobs|$side"]+="$cpu "
	printf '[%s] sparse    jobs=%-4s rep %s/%s %-7s %7s IOPS %7s us/write du %s\n' \
		"$fs" "$jobs" "$rep" "$REPS" "$side" "$iops" "$cpu" \
		"$(du -h "$dir/sparse" | cut -f1)"
	rm -rf "$dir"
}

bench_sparse() {
	local fs=$1 j rep d v target
	command -v fio >/dev/null || return 0
	for j in $WRITERS; do
		for ((rep = 1; rep <= REPS; rep++)); do
			sparse_measure "$fs" "$j" kernel "$rep"
			sparse_measure "$fs" "$j" dioshim "$rep"
		done
	done
	[ "$fs" = ext4 ] && target=">= 2.5x the kernel" || target="no loss"
	blank
	emit "### $fs: (e) random 4 KiB writes into a sparse 1G file (hole prefill)"
	blank
	emit "fio psync randwrite, direct, fallocate=none, jobs on one file" \
		"(bench/fio/randwrite-sparse.fio). Target at 8 jobs: $target" \
		"(prefill is on for ext4, off for XFS by default). The seed's" \
		"reference: an in-kernel btrfs patch gave +30% at 4 jobs."
	blank
	emit "| jobs | kernel IOPS | dioshim IOPS | dioshim/kernel |" \
		"kernel µs/write | dioshim µs/write |"
	emit "|---|--:|--:|--:|--:|--:|"
	for j in $WRITERS; do
		medians "$fs|sparse|$j"
		emit "| $j | ${K_IOPS%.*} | ${S_IOPS%.*} |" \
			"$(ratio "$S_IOPS" "$K_IOPS")$(spread "$fs|sparse|$j") |" \
			"$K_CPU | $S_CPU |"
		if [ "$j" = 8 ] || [ "$j" = 4 ]; then
			d=$(pct "$S_IOPS" "$K_IOPS")
			v="- **$fs sparse random writes, $j jobs:**"
			v+=" $(ratio "$S_IOPS" "$K_IOPS") the kernel ($d%)"
			if [ "$j" = 8 ]; then
				if [ "$fs" = ext4 ]; then
					v+=" (target >= 2.5x: $(met "$S_IOPS >= 2.5 * $K_IOPS")"
				else
					v+=" (target no loss: $(met "$d >= -3")"
				fi
				v+=")."
			else
				v+=" (the btrfs patch: +30%)."
			fi
			SUMMARY+=("$v")
		fi
	done
	blank
	emit "Medians of $REPS interleaved runs of ${SECS}s; the file's size" \
		"checked after every run."
}

# ---- asynchronous submitters (libaio, liburing) at queue depth 16 ---------

# async_measure FS WHAT SIDE REP; WHAT: aio1, aio4 (fio libaio, jobs) or
# uring (the project's liburing writer, tests/helpers/asyncwrite.c).
async_measure() {
	local fs=$1 what=$2 side=$3 rep=$4 dir=$SCRATCH_MNT/async json rc=0
	local iops bytes cpu err size want jobs out t
	rm -rf "$dir"
	mkdir -p "$dir"
	sync -f "$SCRATCH_MNT"
	if [ "$what" = uring ]; then
		want=$((ASYNC_BLOCKS * 4096))
		t=$WORK/async.time
		out=$( { TIMEFORMAT='%3U %3S'; time run_side "$side" \
			"$ASYNCWRITE" uring seq "$dir/uring" "$ASYNC_BLOCKS" 16 \
			2>&1; } 2>"$t") || rc=$?
		iops=$(field iops "$out")
		[ $rc = 0 ] && [ "$(field bad "$out")" = 0 ] ||
			die "$fs liburing writer $side failed: $out." \
				"Reproduce: $(side_prefix "$side")" \
				"$ASYNCWRITE uring seq FILE $ASYNC_BLOCKS 16"
		cpu=$(awk -v n="$ASYNC_BLOCKS" '{ printf "%.2f", ($1 + $2) * 1e6 / n }' "$t")
		size=$(stat -c %s "$dir/uring")
	else
		jobs=${what#aio}
		json=$WORK/fio.json
		FIO_DIR=$dir FIO_SIZE=$ASYNC_FIO_SIZE FIO_NUMJOBS=$jobs \
			run_side "$side" fio --output-format=json \
			"$TOP/bench/fio/libaio-seqwrite.fio" >"$json" \
			2>"$WORK/fio.err" || rc=$?
		read -r iops bytes cpu err < <(fio_parse <"$json")
		if [ $rc != 0 ] || [ "$err" != 0 ] || [ "$iops" = 0 ]; then
			cat "$WORK/fio.err" >&2
			die "$fs fio libaio $jobs jobs $side failed (exit $rc," \
				"error $err). Reproduce: FIO_DIR=DIR" \
				"FIO_SIZE=$ASYNC_FIO_SIZE FIO_NUMJOBS=$jobs" \
				"$(side_prefix "$side") fio" \
				"bench/fio/libaio-seqwrite.fio"
		fi
		want=$((jobs * $(bytes "$ASYNC_FIO_SIZE")))
		size=$(stat -c %s "$dir/aio")
	fi
	[ "$size" = "$want" ] ||
		die "$fs async $what $side: the file is $size bytes, not $want"
	IOPS["$fs|async|$what|$side"]+="$iops "
	CPU["$fs|async|$what|$side"]+="$cpu "
	printf '[%s] async %-6s rep %s/%s %-7s %7s IOPS %7s us/write verified, size ok\n' \
		"$fs" "$what" "$rep" "$REPS" "$side" "$iops" "$cpu"
	rm -rf "$dir"
}

bench_async() {
	local fs=$1 what rep d v label
	command -v fio >/dev/null || return 0
	for what in aio1 aio4 uring; do
		for ((rep = 1; rep <= REPS; rep++)); do
			async_measure "$fs" "$what" kernel "$rep"
			async_measure "$fs" "$what" dioshim "$rep"
		done
	done
	blank
	emit "### $fs: (f) queue depth 16 through libaio and liburing, a new file"
	blank
	emit "fio libaio, iodepth 16, 4 KiB sequential direct writes of a new" \
		"file (fallocate=none), each job its own $ASYNC_FIO_SIZE region," \
		"verified with crc32c after (bench/fio/libaio-seqwrite.fio); and" \
		"the project's liburing writer, $ASYNC_BLOCKS records at queue" \
		"depth 16, read back and checked (tests/helpers/asyncwrite.c)." \
		"Target: >= 3x the kernel alone."
	blank
	emit "| workload | kernel IOPS | dioshim IOPS | dioshim/kernel |" \
		"kernel µs/write | dioshim µs/write |"
	emit "|---|--:|--:|--:|--:|--:|"
	for what in aio1 aio4 uring; do
		case $what in
		aio1) label="fio libaio QD16, 1 job" ;;
		aio4) label="fio libaio QD16, 4 jobs" ;;
		uring) label="liburing writer QD16" ;;
		esac
		medians "$fs|async|$what"
		emit "| $label | ${K_IOPS%.*} | ${S_IOPS%.*} |" \
			"$(ratio "$S_IOPS" "$K_IOPS")$(spread "$fs|async|$what") |" \
			"$K_CPU | $S_CPU |"
		d=$(pct "$S_IOPS" "$K_IOPS")
		v="- **$fs $label:** $(ratio "$S_IOPS" "$K_IOPS") the kernel"
		v+=" (target >= 3x: $(met "$S_IOPS >= 3 * $K_IOPS"))."
		SUMMARY+=("$v")
	done
	blank
	emit "Medians of $REPS interleaved runs; every file verified and its" \
		"size checked after every run. CPU per write: fio's usr+sys" \
		"(which includes its verify pass) or the writer's own times."
}

bench_fio() {
	local fs=$1 job rep d
	if ! command -v fio >/dev/null; then
		echo "bench: fio not installed: skipping the fio section"
		blank
		emit "### $fs: fio"
		blank
		emit "Skipped: fio is not installed."
		return 0
	fi
	for job in $FIO_JOBS; do
		for ((rep = 1; rep <= REPS; rep++)); do
			fio_measure "$fs" "$job" kernel "$rep"
			fio_measure "$fs" "$job" dioshim "$rep"
		done
	done
	blank
	emit "### $fs: fio, psync 4 KiB O_DIRECT (baseline context)"
	blank
	emit "seqwrite: new files written sequentially (1 job; 4 jobs on" \
		"separate files). randwrite: 4 jobs into one file that fio" \
		"preallocates. CPU: fio's usr+sys per write. Job files in bench/fio/."
	blank
	emit "| job | kernel IOPS | dioshim IOPS | dioshim/kernel | difference |" \
		"kernel µs/write | dioshim µs/write |"
	emit "|---|--:|--:|--:|--:|--:|--:|"
	for job in $FIO_JOBS; do
		medians "$fs|fio-$job|-"
		d=$(pct "$S_IOPS" "$K_IOPS")
		emit "| $job | ${K_IOPS%.*} | ${S_IOPS%.*} |" \
			"$(ratio "$S_IOPS" "$K_IOPS")$(spread "$fs|fio-$job|-") |" \
			"$d% | $K_CPU | $S_CPU |"
	done
	blank
	emit "Medians of $REPS interleaved runs of ${SECS}s; file sizes" \
		"checked after every run (outside the shim)."
}

# ---- the launcher's cost for programs that never use O_DIRECT --------------

# "wall cpu" in milliseconds for a command (CPU: user+sys of it and its
# children).  The budget is about wall time; CPU is shown beside it because
# on a loaded machine it is the steadier of the two.
timed() {
	local TIMEFORMAT='%3R %3U %3S' t rc=0
	t=$({ time "$@" >/dev/null 2>"$WORK/timed.err"; } 2>&1) || rc=$?
	if [ $rc != 0 ]; then
		cat "$WORK/timed.err" >&2
		die "$* failed (exit $rc)"
	fi
	awk '{ printf "%d %d\n", $1 * 1000, ($2 + $3) * 1000 }' <<<"$t"
}

tar_roundtrip() {
	local side=$1 dir=$2
	run_side "$side" tar -xf "$dir/src.tar" -C "$dir/out"
	run_side "$side" tar -cf "$dir/out.tar" -C "$dir/out" .
}

small_writes() {
	run_side "$1" dd if=/dev/zero of="$2/small.dat" bs=512 count=200000 \
		status=none
}

bench_overhead() {
	local fs=$1 dir=$SCRATCH_MNT/overhead d i rep side ms cpu t dc v ok fm fk fd
	mkdir -p "$dir/tree"
	# A few thousand small files: 100 per directory, 2-14 KiB each.
	for ((d = 0; d < TAR_FILES / 100; d++)); do
		mkdir "$dir/tree/d$d"
		head -c $((100 * (2048 + (d % 7) * 2048))) /dev/urandom |
			split -b $((2048 + (d % 7) * 2048)) -a 3 - "$dir/tree/d$d/f"
	done
	tar -cf "$dir/src.tar" -C "$dir/tree" .
	for t in tar dd; do
		for ((rep = 1; rep <= TAR_REPS; rep++)); do
			for side in kernel forwarder dioshim; do
				rm -rf "$dir/out" "$dir/out.tar" "$dir/small.dat"
				mkdir "$dir/out"
				sync -f "$SCRATCH_MNT"
				if [ $t = tar ]; then
					read -r ms cpu < <(timed tar_roundtrip "$side" "$dir")
				else
					read -r ms cpu < <(timed small_writes "$side" "$dir")
				fi
				IOPS["$fs|ovh-$t|-|$side"]+="$ms "
				CPU["$fs|ovh-$t|-|$side"]+="$cpu "
				printf '[%s] overhead %-4s rep %s/%s %-7s %6s ms wall %6s ms CPU\n' \
					"$fs" "$t" "$rep" "$TAR_REPS" "$side" "$ms" "$cpu"
			done
		done
	done
	blank
	emit "### $fs: the launcher's cost for programs that never use O_DIRECT"
	blank
	emit "Budget: \`dioshim -- CMD\` costs under 2% wall time. Medians of" \
		"$TAR_REPS interleaved runs; \"plain\" is the same command without" \
		"the launcher. CPU is user+sys of the command and its children." \
		"The overheads are the median of the pair-by-pair ratios (each" \
		"dioshim run against the plain run just before it), which a" \
		"drifting machine moves less than the ratio of the medians." \
		"\"forwarder\" is the command under an LD_PRELOAD library that" \
		"only hands the same calls on (bench/fwd.c): what any interposer" \
		"costs on this machine, and the last column what dioshim adds" \
		"to it."
	blank
	emit "| program | plain ms | dioshim ms | wall overhead | budget |" \
		"plain CPU ms | dioshim CPU ms | CPU overhead |" \
		"forwarder ms | forwarder overhead | dioshim over the forwarder |"
	emit "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|"
	for t in tar dd; do
		medians "$fs|ovh-$t|-"
		d=$(paired_pct "${IOPS["$fs|ovh-$t|-|kernel"]}" \
			"${IOPS["$fs|ovh-$t|-|dioshim"]}")
		dc=$(paired_pct "${CPU["$fs|ovh-$t|-|kernel"]}" \
			"${CPU["$fs|ovh-$t|-|dioshim"]}")
		# shellcheck disable=SC2086
		fm=$(median ${IOPS["$fs|ovh-$t|-|forwarder"]:-} | rnd 0)
		fk=$(paired_pct "${IOPS["$fs|ovh-$t|-|kernel"]}" \
			"${IOPS["$fs|ovh-$t|-|forwarder"]}")
		fd=$(paired_pct "${IOPS["$fs|ovh-$t|-|forwarder"]}" \
			"${IOPS["$fs|ovh-$t|-|dioshim"]}")
		case $t in
		tar) i="tar -x then tar -c of $TAR_FILES small files" ;;
		dd) i="dd bs=512 count=200000 (buffered write() calls)" ;;
		esac
		# No pair measured: no verdict (awk would take nan for 0).
		if [ "$d" = nan ]; then ok="no runs"; else ok=$(met "$d < 2"); fi
		emit "| $i | $K_IOPS | $S_IOPS | $d% | $ok |" \
			"${K_CPU%.*} | ${S_CPU%.*} | $dc% | $fm | $fk% | $fd% |"
		v="- **$fs, \`dioshim --\` on a program without O_DIRECT ($t):**"
		v+=" $d% wall time (budget < 2%: $ok), $dc% CPU; a forwarding"
		v+=" library alone $fk%, dioshim $fd% over it."
		SUMMARY+=("$v")
	done
	bench_callcost "$fs" "$dir"
	rm -rf "$dir"
}

# The same cost per call, told apart from the noise: bench/callcost's
# fastest batches of read()+write() pairs, each side's median over
# CALL_REPS interleaved runs.
bench_callcost() {
	local fs=$1 dir=$2 rep side best p10 mid k f s
	local -A BEST
	for ((rep = 1; rep <= CALL_REPS; rep++)); do
		for side in kernel forwarder dioshim; do
			read -r best p10 mid < <(run_side "$side" \
				"$BUILD/callcost" "$dir/calls.dat" 300) ||
				die "callcost failed ($side)"
			BEST[$side]+="$best "
			printf '[%s] callcost rep %s/%s %-9s %s ns (p10 %s, median %s)\n' \
				"$fs" "$rep" "$CALL_REPS" "$side" "$best" "$p10" "$mid"
		done
	done
	# shellcheck disable=SC2086
	k=$(median ${BEST[kernel]}) f=$(median ${BEST[forwarder]})
	# shellcheck disable=SC2086
	s=$(median ${BEST[dioshim]})
	blank
	emit "Per call (\`bench/callcost\`: a 512-byte read() of /dev/zero and" \
		"write() to a file here, the fastest of 300 batches of 1000" \
		"pairs, median of $CALL_REPS interleaved runs; under" \
		"\`LD_PRELOAD\` through the same launchers as above):"
	blank
	emit "| ns per read+write | kernel alone | forwarder | dioshim |" \
		"forwarder over the kernel | dioshim over the kernel |" \
		"dioshim over the forwarder |"
	emit "|---|--:|--:|--:|--:|--:|--:|"
	emit "| $fs | $k | $f | $s | $(calc "%+.1f%%" "($f / $k - 1) * 100") |" \
		"$(calc "%+.1f%%" "($s / $k - 1) * 100") |" \
		"$(calc "%+.1f%%" "($s / $f - 1) * 100") |"
}

# ---- main ----------------------------------------------------------------------

START=$(date -u '+%Y-%m-%d %H:%M UTC')
START_S=$SECONDS
echo "bench: SECS=$SECS REPS=$REPS WRITERS=\"$WRITERS\" FSTYPES=\"$FSTYPES\"" \
	"SECTIONS=\"$SECTIONS\" on $(uname -r), $(nproc) CPUs"
ran=0
for fs in $FSTYPES; do
	if ! why=$(scratch_skip_reason "$fs"); then
		echo "bench: skipping $fs: $why"
		blank
		emit "## $fs"
		blank
		emit "Skipped: $why"
		continue
	fi
	scratch_make "$fs" "$IMG_SIZE" || die "cannot make a scratch $fs"
	echo "bench: $fs scratch at $SCRATCH_MNT ($IMG_SIZE)"
	blank
	emit "## $fs"
	if has_section append || has_section overwrite; then
		bench_appends "$fs"
	fi
	has_section sparse && bench_sparse "$fs"
	has_section async && bench_async "$fs"
	has_section fio && bench_fio "$fs"
	has_section overhead && bench_overhead "$fs"
	scratch_destroy "$SCRATCH_DIR"
	ran=$((ran + 1))
done
[ $ran -gt 0 ] || die "no filesystem could be made"
if has_section fsync; then
	OUT=$WORK/fsync.md FSES="$FSTYPES" SECS="$SECS" REPS="$REPS" \
		"$TOP/bench/fsync.sh" >/dev/null
	blank
	cat "$WORK/fsync.md" | tee -a "$MD"
fi
if has_section stripes; then
	OUT=$WORK/stripes.md FSES="$FSTYPES" SECS="$SECS" REPS="$REPS" \
		"$TOP/bench/stripes.sh" >/dev/null
	blank
	cat "$WORK/stripes.md" | tee -a "$MD"
fi
if has_section real; then
	OUT=$WORK/real.md PLOT=$TOP/bench/real.png FSTYPES="$FSTYPES" \
		REPS="$REPS" SECS="${REAL_SECS:-20}" "$TOP/bench/real.sh" \
		>/dev/null
	blank
	cat "$WORK/real.md" | tee -a "$MD"
fi
if has_section grow; then
	OUT=$WORK/grow.md PLOT=$TOP/bench/grow.png FSTYPES="$FSTYPES" \
		REPS="$REPS" "$TOP/bench/grow.sh" >/dev/null
	blank
	cat "$WORK/grow.md" | tee -a "$MD"
fi
if [ ${#SUMMARY[@]} -gt 0 ]; then
	echo
	echo "## Summary against the targets"
	echo
	printf '%s\n' "${SUMMARY[@]}"
fi

if [ -n "$RESULTS" ]; then
	# bench/ab.sh's regression checks are kept: they are not this run's.
	AB_SECTION=$(sed -n '/^<!-- bench\/ab.sh -->/,$p' "$RESULTS" 2>/dev/null || true)
	{
		echo "# dioshim benchmark results"
		echo
		echo "Generated by \`bench/run.sh\` (regenerated wholesale on every run;"
		echo "do not edit by hand)."
		echo
		echo "- Date: $START"
		echo "- Command: \`$BENCH_CMD\`"
		echo "- Settings: SECS=$SECS REPS=$REPS WRITERS=\"$WRITERS\"" \
			"PROCS=\"$PROCS\" FSTYPES=\"$FSTYPES\" CHECK=$CHECK" \
			"PREALLOC=$PREALLOC OVERWRITE_SIZE=$OVERWRITE_SIZE" \
			"IMG_SIZE=$IMG_SIZE TAR_FILES=$TAR_FILES TAR_REPS=$TAR_REPS"
		echo "- Kernel: $(uname -r); CPUs: $(nproc); dioshim commit:" \
			"$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
				git -C "$TOP" diff --quiet HEAD -- shim include 2>/dev/null ||
					echo ' (shim/ or include/ modified)')"
		echo "- Duration: $(((SECONDS - START_S + 30) / 60)) minutes"
		echo "- Scratch filesystems: images of $IMG_SIZE in loop devices" \
			"(direct I/O on), made fresh per filesystem."
		[ -n "$NOTE" ] && echo "- Note: $NOTE"
		echo
		echo "Kernel alone and dioshim run interleaved on fresh files;"
		echo "each number is the median of REPS runs; a ratio's brackets give"
		echo "the range of the per-rep ratios (each dioshim run over the kernel"
		echo "run just before it). µs/write is user+sys CPU of all writers per"
		echo "write."
		if [ ${#SUMMARY[@]} -gt 0 ]; then
			echo
			echo "## Summary against the targets"
			echo
			printf '%s\n' "${SUMMARY[@]}"
		fi
		cat "$MD"
		[ -z "$AB_SECTION" ] || printf '\n%s\n' "$AB_SECTION"
	} >"$RESULTS"
	echo "bench: wrote $RESULTS"
fi
echo "bench: done in $(((SECONDS - START_S + 30) / 60)) minutes"
