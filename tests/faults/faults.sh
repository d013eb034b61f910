#!/usr/bin/env bash
# The fault harness (make faults): the project's workloads with a failure
# injected at each system call the shim makes and each the program makes,
# under the shim and with the kernel alone under the same injection (the
# control); prints every difference and ends with "N runs, N differences".
#
#   tests/faults/faults.sh matrix
#       every workload x call x errno x count, on a scratch ext4 and XFS
#   tests/faults/faults.sh one FS WORKLOAD SIDE SYSCALL:ERRNO:WHEN [REPEAT]
#       one injection (the reproduction of a difference): the control and
#       the shim run REPEAT times (1), their properties and differences;
#       exits 1 if any run differs.  WHEN may also be "last" or "2/3+",
#       counted from a clean run on SIDE (tests/faults/lib.sh,
#       fault_resolve)
#   tests/faults/faults.sh calls FS WORKLOAD SIDE
#       the calls a clean run makes, with the most any thread makes
#
# WORKLOAD: append counter aio-seq aio-append uring-seq uring-append;
# SIDE: always (DIOSHIM_ENGAGE=always) or default; WHEN: N, or N+ for a
# failure that persists from the N-th call on.  See tests/faults/lib.sh
# for the workloads, the properties compared and how strace counts N (per
# thread).  Needs root (scratch filesystems on loop devices) and strace.
#
# Environment for matrix: FAULTS_FS ("ext4 xfs"), FAULTS_WORKLOADS (all),
# FAULTS_SIDES ("always default"), FAULTS_CALLS (every call in the table
# below that a clean run makes), FAULTS_K (counts tried per call and
# errno with always: 3, the first, the last and one between, from 1, 2, 3,
# 5, 8...; the first only with default), FAULTS_TIMEOUT (5 s: a
# run still going is a hang), FAULTS_OUT (where the runs' files are
# kept; a temporary directory by default).  With always, each call and
# errno also fails for good from two thirds of its count on (WHEN+), but for EINTR
# and EAGAIN, which do not persist (madvise's EAGAIN does: issue 28).
set -u
cd "$(dirname "$0")/../.." || exit 2
export TOP=$PWD BUILD=${BUILD:-$PWD/build}
: "${FAULTS_TIMEOUT:=5}"
export FAULTS_TIMEOUT
source tests/lib/scratchfs.sh
source tests/faults/lib.sh

# The errnos that make sense per call: what the kernel can return for it
# (or the failure of a resource it needs).  Calls not listed are not
# injected: the process's start and its threads (execve, clone3,
# set_tid_address, rseq, brk, mprotect, futex, exit...), ids, and what
# only the dynamic loader or the program's read-back makes (read,
# pread64, readlink, getdents64, munmap, the *at forms of fchmod/fchown).
declare -A ERRNOS=(
	[pwritev2]="EIO ENOSPC EINTR EAGAIN" [pwrite64]="EIO ENOSPC EINTR"
	[pwritev]="EIO ENOSPC EINTR" [write]="EIO EINTR"
	[fallocate]="ENOSPC EIO EINTR" [ftruncate]="EIO EPERM EINTR"
	[fsync]="EIO" [fdatasync]="EIO" [sync_file_range]="EIO"
	[fstat]="EIO" [newfstatat]="EIO" [statx]="EIO" [fstatfs]="EIO"
	[fsetxattr]="ENOSPC EIO" [fremovexattr]="EIO" [fgetxattr]="EIO ENODATA"
	[openat]="EMFILE" [close]="EIO" [linkat]="EEXIST EIO" [unlinkat]="EIO"
	[mkdirat]="EACCES" [memfd_create]="EMFILE"
	[name_to_handle_at]="EOPNOTSUPP" [fchmod]="EPERM" [fchown]="EPERM"
	[fcntl]="EAGAIN EINTR ENOLCK" [kill]="ESRCH EPERM" [ioctl]="ENOTTY"
	[madvise]="ENOMEM EINVAL EAGAIN" [rt_sigprocmask]="EINVAL"
	[mmap]="ENOMEM" [clock_nanosleep]="EINTR"
	[io_setup]="EAGAIN" [io_submit]="EAGAIN EINTR" [io_getevents]="EINTR"
	[io_uring_setup]="ENOMEM" [io_uring_enter]="EAGAIN EINTR"
)

usage() {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

RUN_DIR=
cleanup() {
	[ -n "${SCRATCH_REGISTRY:-}" ] && scratch_destroy_all
	[ -n "${FAULTS_SHM:-}" ] && rm -rf "$FAULTS_SHM"
	[ -n "$RUN_DIR" ] && [ -z "${FAULTS_OUT:-}" ] && [ "${KEEP_RUNS:-0}" = 0 ] &&
		rm -rf "$RUN_DIR"
	return 0
}

setup() {
	local why
	if ! why=$(scratch_skip_reason "$1") || ! why=$(faults_skip_reason); then
		echo "faults: cannot run here: $why" >&2
		exit 77
	fi
	if [ -z "$RUN_DIR" ]; then
		if [ -n "${FAULTS_OUT:-}" ]; then
			mkdir -p "$FAULTS_OUT"
			RUN_DIR=$(cd "$FAULTS_OUT" && pwd)
		else
			RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-faults.XXXXXX")
		fi
		export SCRATCH_REGISTRY=$RUN_DIR/scratch.registry
		FAULTS_SHM=$(mktemp -d /dev/shm/dioshim-faults.XXXXXX)
		export FAULTS_SHM
		trap cleanup EXIT
		trap 'exit 130' INT TERM
	fi
}

make_fs() {
	scratch_make "$1" 512M || { echo "faults: could not make a $1 filesystem" >&2; exit 1; }
}

# counts FILE SYSCALL: the most calls a thread made in a clean run.
count_of() { awk -v c="$2" '$1 == c { print $2; f = 1 } END { if (!f) print 0 }' "$1"; }

# sample MAX K: at most K counts in 1..MAX, from 1, 2, 3, 5, 8, 13...
# and MAX itself (a last call: the trim at the last close), spread out;
# then "N+" for a failure that persists from two thirds of the way on
# (a reservation made before it fails: issue 28, 3).
sample() {
	local max=$1 k=$2 a=1 b=2 n i
	local -a fib=()
	while [ "$a" -le "$max" ]; do
		fib+=("$a")
		i=$((a + b)) a=$b b=$i
	done
	[ "${fib[-1]}" = "$max" ] || fib+=("$max")
	n=${#fib[@]}
	if [ "$n" -le "$k" ]; then
		echo -n "${fib[*]} "
	elif [ "$k" -eq 1 ]; then
		echo -n "1 "
	else
		# The first, the last and k-2 spread evenly between.
		for ((i = 0; i < k; i++)); do
			echo -n "${fib[$(((n - 1) * i / (k - 1)))]} "
		done
	fi
	echo "$(((2 * max + 2) / 3))+"
}

RUNS=0 DIFFS=0
declare -a DIFF_LINES=()

# One shim run and its comparison; the control is cached by injection.
declare -A CONTROL=()
control_for() {
	local fs=$1 wl=$2 cinj=$3 dir i
	local key="$fs $wl $cinj"
	if [ -z "${CONTROL[$key]:-}" ]; then
		dir=$RUN_DIR/$fs/$wl/kernel/${cinj//[:+]/_}
		if [ "$cinj" = none ]; then
			# The clean control three times: a property the kernel
			# alone keeps only sometimes (XFS's racing appends) is
			# none of the shim's doing.
			for i in 1 2 3; do
				fault_run "$wl" kernel none "$dir.$i" "$SCRATCH_MNT"
				RUNS=$((RUNS + 1))
			done
			CONTROL[$key]="$dir.1/props $dir.2/props $dir.3/props"
		else
			fault_run "$wl" kernel "$cinj" "$dir" "$SCRATCH_MNT"
			RUNS=$((RUNS + 1))
			CONTROL[$key]=$dir/props
		fi
	fi
	echo "${CONTROL[$key]}"
}

shim_run() {
	local fs=$1 wl=$2 side=$3 inj=$4 cinj=$5 dir ctl diff
	dir=$RUN_DIR/$fs/$wl/$side/${inj//[:+]/_}
	ctl=$(control_for "$fs" "$wl" "$cinj")
	fault_run "$wl" "$side" "$inj" "$dir" "$SCRATCH_MNT"
	RUNS=$((RUNS + 1))
	# shellcheck disable=SC2086
	diff=$(fault_diff "$dir/props" $ctl)
	diff=${diff% }
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$fs" "$wl" "$side" "$inj" "$cinj" \
		"${diff:--}" >>"$RUN_DIR/results.tsv"
	if [ -n "$diff" ]; then
		DIFFS=$((DIFFS + 1))
		DIFF_LINES+=("$fs $wl $side $inj: $diff")
		printf 'DIFF %-5s %-12s %-7s %-28s %s\n' "$fs" "$wl" "$side" "$inj" "$diff"
		sed 's/^/       /' "$dir/detail" | head -n 6
	fi
}

matrix() {
	local fs wl side sc er n k cinj csc max kmax started=$SECONDS t0 calls
	local -a ns
	: >"$RUN_DIR/results.tsv"
	for fs in ${FAULTS_FS:-ext4 xfs}; do
		setup "$fs"
		make_fs "$fs"
		for wl in ${FAULTS_WORKLOADS:-$FAULT_WORKLOADS}; do
			t0=$SECONDS
			mkdir -p "$RUN_DIR/$fs/$wl"
			for side in kernel ${FAULTS_SIDES:-always default}; do
				fault_calls "$wl" "$side" "$RUN_DIR/$fs/$wl/calls.$side" \
					"$SCRATCH_MNT" >"$RUN_DIR/$fs/$wl/calls.$side.txt"
			done
			calls=${FAULTS_CALLS:-$(cat "$RUN_DIR/$fs/$wl"/calls.*.txt |
				awk '{ print $1 }' | sort -u)}
			echo "== $fs $wl: $(wc -w <<<"$calls") calls made"
			for side in ${FAULTS_SIDES:-always default}; do
				shim_run "$fs" "$wl" "$side" none none
			done
			for sc in $calls; do
				[ -n "${ERRNOS[$sc]:-}" ] || continue
				for side in ${FAULTS_SIDES:-always default}; do
					max=$(count_of "$RUN_DIR/$fs/$wl/calls.$side.txt" "$sc")
					csc=$(fault_control_inj "$wl" "$sc:x:1")
					csc=${csc%%:*}
					kmax=$(count_of "$RUN_DIR/$fs/$wl/calls.kernel.txt" "$csc")
					[ "$kmax" -gt "$max" ] && max=$kmax
					[ "$max" -gt 0 ] || continue
					# newfstatat/io_* in a thread that polls:
					# counts past a few hundred are all alike.
					[ "$max" -gt 400 ] && max=400
					k=${FAULTS_K:-3}
					[ "$side" = default ] && k=1
					read -ra ns <<<"$(sample "$max" "$k")"
					for er in ${ERRNOS[$sc]}; do
						for n in "${ns[@]}"; do
							if [[ $n == *+ ]]; then
								[ "$side" = always ] || continue
								[[ $er != EINTR && $er != EAGAIN ]] ||
									[ "$sc" = madvise ] || continue
							fi
							cinj=$(fault_control_inj "$wl" "$sc:$er:$n")
							# The control's call never reaches that
							# count: the injection lands nowhere.
							[ "$kmax" -ge "${n%+}" ] || cinj=none
							shim_run "$fs" "$wl" "$side" "$sc:$er:$n" "$cinj"
						done
					done
				done
			done
			echo "   $fs $wl: $((SECONDS - t0)) s"
		done
		scratch_destroy "$SCRATCH_DIR"
		CONTROL=()
	done
	echo
	echo "differences (reproduce each with the command under it):"
	local line
	for line in "${DIFF_LINES[@]}"; do
		read -r fs wl side inj _ <<<"$line"
		echo "  $line"
		echo "    tests/faults/faults.sh one $fs $wl $side ${inj%:}"
	done
	echo
	echo "by call, errno and property (runs that differ):"
	awk -F'\t' '$6 != "-" { split($4, a, ":"); n = split($6, p, " ")
		for (i = 1; i <= n; i++) c[$2 " " a[1] ":" a[2] " " p[i]]++ }
		END { for (k in c) print "  " c[k], k }' "$RUN_DIR/results.tsv" | sort -k2
	echo
	echo "runs kept in $RUN_DIR (results.tsv: fs, workload, side, injection, control's, differences)"
	echo "took $((SECONDS - started)) s"
	echo "$RUNS runs, $DIFFS differences"
	[ "$DIFFS" -eq 0 ]
}

one() {
	local fs=$1 wl=$2 side=$3 inj=$4 repeat=${5:-1} i cinj ctl=() diff bad=0
	[[ " $FAULT_WORKLOADS " == *" $wl "* ]] || usage
	[[ $side == always || $side == default ]] || usage
	setup "$fs"
	make_fs "$fs"
	inj=$(fault_resolve "$wl" "$side" "$inj" "$RUN_DIR/calls" "$SCRATCH_MNT")
	cinj=$(fault_control_inj "$wl" "$inj")
	for ((i = 1; i <= repeat; i++)); do
		fault_run "$wl" kernel "$cinj" "$RUN_DIR/kernel.$i" "$SCRATCH_MNT"
		echo "kernel  $cinj: $(fault_props_line "$RUN_DIR/kernel.$i")"
		ctl+=("$RUN_DIR/kernel.$i/props")
	done
	for ((i = 1; i <= repeat; i++)); do
		fault_run "$wl" "$side" "$inj" "$RUN_DIR/shim.$i" "$SCRATCH_MNT"
		echo "$side  $inj: $(fault_props_line "$RUN_DIR/shim.$i")"
		diff=$(fault_diff "$RUN_DIR/shim.$i/props" "${ctl[@]}")
		if [ -n "${diff// /}" ]; then
			bad=$((bad + 1))
			echo "  differs: $diff"
			sed 's/^/    /' "$RUN_DIR/shim.$i/detail"
		fi
	done
	echo "$fs $wl $side $inj: differs in $bad of $repeat runs (control: kernel alone, $cinj)"
	[ "$bad" -eq 0 ]
}

calls() {
	setup "$1"
	make_fs "$1"
	fault_calls "$2" "$3" "$RUN_DIR/calls" "$SCRATCH_MNT"
}

case ${1:-} in
matrix) matrix ;;
one) [ $# -ge 5 ] || usage; shift; one "$@" ;;
calls) [ $# -eq 4 ] || usage; shift; calls "$@" ;;
*) usage ;;
esac
