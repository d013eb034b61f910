# shellcheck shell=bash
# The fault harness's runs, shared by tests/faults/faults.sh (make faults)
# and tests/bats/faults.bats (its fast subset in make test).
#
# A run is one workload, on one side, under one injection:
#
#   workloads  append        2 processes of 3 threads appending records
#                            with O_APPEND|O_DIRECT (t_appender, t_verify)
#              counter       4 threads pwrite-ing records at offsets from a
#                            shared counter, ftruncate + fsync between its
#                            3 phases (t_counter, t_verify)
#              aio-seq, aio-append, uring-seq, uring-append
#                            libaio / io_uring at queue depth 16 (asyncwrite):
#                            seq: record i at block i, a thread checking
#                            fstat all along and fstat after each reap, a
#                            final fdatasync; append: O_APPEND records
#                            (no fstat thread, so that a count of
#                            newfstatat lands on the program's and the
#                            shim's own calls)
#   sides      kernel        no shim (the control)
#              always        the shim, DIOSHIM_ENGAGE=always
#              default       the shim, the default engage
#              The shim is preloaded as `dioshim --` does it (LD_PRELOAD,
#              build/libdioshim.so) but without the launcher, whose own
#              calls would come first in the main thread's counts and
#              shift them from the control's.
#   injection  none, or SYSCALL:ERRNO:WHEN, given to
#              strace -f --seccomp-bpf -e inject=SYSCALL:error=ERRNO:when=WHEN
#
# strace counts WHEN per thread (per tracee): every thread of the program
# that reaches its WHEN-th call of SYSCALL gets the error, and a new thread
# or a forked child starts counting at 0.  The count goes on across
# execve (a launcher's calls would count), and the dynamic loader's calls
# (openat, read, mmap, close of the libraries) come first in the main
# thread.  A run whose loader fails (status 127, "error while loading
# shared libraries") is void: the program never ran.
# "WHEN+" (every call from the WHEN-th on) is a failure that persists.
#
# Each run's outcome is a set of properties, all computed outside the
# shim (1 holds, 0 does not, ? cannot tell):
#   finished   no hang: done within FAULTS_TIMEOUT seconds
#   nocrash    not killed by a signal
#   noerror    the program saw no error (exit status 0); not compared:
#              the same count lands on other calls under the shim
#   noleak     every error the program reports is the injected errno
#              from a call of the program's own that makes the injected
#              system call (its write() for pwritev2 under the shim, its
#              fstat() for newfstatat...): no failure of the shim's own
#              calls reaches the program as another call's error
#   answers    the program saw no wrong answer: fstat sizes (t_counter's,
#              asyncwrite's stat thread), positions after a write
#              (t_appender)
#   nolost     every acknowledged record is in the file
#   nodup      no record twice
#   notorn     no torn or garbage block
#   noextra    no record the program was not told was written
#   placed     every record at the offset the program was told
#   nohole     no zero block inside the data (but where a failed
#              positioned write was aimed: t_counter's H lines)
#   exact      after the last close the size is the end of the data (or
#              the last truncate's length): no reserved zeros left
#   noxattr    no user.dioshim.eof left on the file
#   noseg      no segment left in the run's DIOSHIM_SHM_DIR
# A difference is a property that holds for the kernel alone under the
# same injection and not under the shim.

FAULTS_TOP=${FAULTS_TOP:-${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}}
FAULTS_BUILD=${FAULTS_BUILD:-${BUILD:-$FAULTS_TOP/build}}
FAULTS_HELPERS=$FAULTS_BUILD/tests/helpers
: "${FAULTS_TIMEOUT:=20}"
# shellcheck disable=SC2034 # used by faults.sh
FAULT_WORKLOADS="append counter aio-seq aio-append uring-seq uring-append"
FAULT_PROPS="finished nocrash noerror noleak answers nolost nodup notorn noextra placed nohole exact noxattr noseg"
# What a difference is made of (noerror is for the record only).
FAULT_COMPARED="finished nocrash noleak answers nolost nodup notorn noextra placed nohole exact noxattr noseg"

# Sizes: small enough that a run takes well under a second.
FA_THREADS=3 FA_RECS=150     # append: per process (2 processes)
FC_THREADS=4 FC_RECS=150     # counter
FQ_BLOCKS=${FQ_BLOCKS:-400} FQ_QD=16       # aio, uring

# Why a machine cannot run the harness, or nothing.
faults_skip_reason() {
	command -v strace >/dev/null || { echo "strace is not installed"; return 1; }
	command -v getfattr >/dev/null || { echo "getfattr is not installed (attr)"; return 1; }
	[ -x "$FAULTS_HELPERS/t_counter" ] || { echo "helpers not built (make test-build)"; return 1; }
	# --seccomp-bpf: strace stops only at the injected call.
	strace -f -qq --seccomp-bpf -o /dev/null -e trace=getppid true 2>/dev/null ||
		{ echo "strace cannot use --seccomp-bpf here"; return 1; }
	return 0
}

# The program's own name for a workload's data write, for the control:
# what the program calls where the shim calls pwritev2.
fault_data_call() {
	case $1 in
	append) echo write ;;
	counter) echo pwrite64 ;;
	aio-*) echo io_submit ;;
	uring-*) echo io_uring_enter ;;
	esac
}

# The injection the control gets for a shim run's INJ: the same, but a
# data write the shim makes (pwritev2, pwrite64...) that the program
# alone would not make goes to the program's own data call.
fault_control_inj() {
	local wl=$1 inj=$2 sc
	[ "$inj" != none ] || { echo none; return; }
	sc=${inj%%:*}
	case $wl:$sc in
	append:pwritev2 | append:pwritev | append:pwrite64 | counter:pwritev2 | counter:pwritev)
		echo "$(fault_data_call "$wl"):${inj#*:}" ;;
	*) echo "$inj" ;;
	esac
}

# _fault_cmd SIDE INJ [TRACER...]: the command prefix of a run, in
# FAULT_CMD: the time limit, strace (TRACER..., or the injection's), the
# launcher.
_fault_cmd() {
	local side=$1 inj=$2 sc er when lib=$FAULTS_BUILD/libdioshim.so
	local -a tracer=("${@:3}")
	if [ "$inj" != none ]; then
		IFS=: read -r sc er when <<<"$inj"
		tracer=(strace -f -qq --seccomp-bpf -o /dev/null -e "trace=$sc"
			-e "inject=$sc:error=$er:when=$when")
	fi
	# Neither timeout nor strace runs under the shim: only the program.
	case $side in
	kernel) FAULT_CMD=(env -u LD_PRELOAD) ;;
	always) FAULT_CMD=(env -u LD_PRELOAD DIOSHIM_ENGAGE=always) ;;
	default) FAULT_CMD=(env -u LD_PRELOAD -u DIOSHIM_ENGAGE) ;;
	*) echo "unknown side $side" >&2; return 2 ;;
	esac
	FAULT_CMD+=(timeout -s KILL "$FAULTS_TIMEOUT")
	if [ "$side" = kernel ]; then
		FAULT_CMD+=("${tracer[@]}")
	elif [ ${#tracer[@]} -gt 0 ]; then
		FAULT_CMD+=("${tracer[0]}" -E "LD_PRELOAD=$lib" "${tracer[@]:1}")
	else
		FAULT_CMD+=(env "LD_PRELOAD=$lib")
	fi
}

# The text strerror gives for an errno name, in ERRTEXT.
declare -A _ERRTEXT=()
_errtext() {
	[ -n "${_ERRTEXT[$1]:-}" ] ||
		_ERRTEXT[$1]=$(perl -MPOSIX -e "\$! = POSIX::$1(); print \"\$!\"" 2>/dev/null)
	ERRTEXT=${_ERRTEXT[$1]}
}

# _unexplained SYSCALL ERRTEXT DATAFILE < stderr: the error lines a
# failure of SYSCALL with ERRTEXT does not explain (the program's calls
# that make SYSCALL failing with it, or the loader's).  An empty SYSCALL:
# no injection, every error line is unexplained.
_unexplained() {
	awk -v sc="$1" -v et="$2" -v file="$3" '
	BEGIN {
		calls["write"] = "write pwritev2 pwritev pwrite64"
		calls["pwrite"] = "pwrite64 pwritev2 pwritev"
		calls["fstat"] = "newfstatat fstat statx"
		calls["ftruncate"] = "ftruncate"
		calls["fsync"] = "fsync fdatasync"
		calls["close"] = "close"
		calls["open"] = "openat"
		calls["log"] = "openat write close"
		calls["io_submit"] = "io_submit"
		calls["io_uring"] = "io_uring_enter"
		calls["io_getevents"] = "io_getevents"
		calls["io_setup"] = "io_setup"
		calls["io_uring_setup"] = "io_uring_setup mmap munmap madvise"
		calls["pread"] = "pread64"
		calls["verify"] = "openat newfstatat fstat statx"
		calls["memory"] = "mmap brk munmap mprotect madvise"
		calls["thread"] = "clone3 clone mmap mprotect rt_sigprocmask"
		calls["loader"] = "openat read pread64 mmap close newfstatat fstat mprotect munmap brk"
	}
	# op: the program call a line reports; noerr: its errno is not
	# reliable (libaio and liburing return -errno, errno is stale).
	function ok(op, noerr,    n, i, a) {
		if (sc == "")
			return 0
		n = split(calls[op], a, " ")
		for (i = 1; i <= n; i++)
			if (a[i] == sc)
				return noerr || index($0, et) > 0
		return 0
	}
	/^writer [0-9]+: write returned -1: /	{ if (!ok("write")) print; next }
	/^writer [0-9]+: pwrite at [0-9]+ returned -1: / { if (!ok("pwrite")) print; next }
	/^fstat[ :]/				{ if (!ok("fstat")) print; next }
	/^ftruncate[ :]/			{ if (!ok("ftruncate")) print; next }
	/^fsync: /				{ if (!ok("fsync")) print; next }
	/^close: /				{ if (!ok("close")) print; next }
	/^io_submit: /				{ if (!ok("io_submit", 1)) print; next }
	/^io_uring_submit: |^io_uring_wait_cqe: |^io_uring_get_sqe: / { if (!ok("io_uring", 1)) print; next }
	/^io_getevents: /			{ if (!ok("io_getevents", 1)) print; next }
	/^io_setup: /				{ if (!ok("io_setup", 1)) print; next }
	/^io_uring_queue_init: /		{ if (!ok("io_uring_setup", 1)) print; next }
	/^fdatasync: /				{ if (!ok("io_submit", 1) && !ok("io_uring", 1)) print; next }
	/^pread: /				{ if (!ok("pread")) print; next }
	/^verify: /				{ if (!ok("verify")) print; next }
	/^posix_memalign: /			{ if (!ok("memory", 1)) print; next }
	/^pthread_create: /			{ if (!ok("thread", 1)) print; next }
	/error while loading shared libraries|ERROR: ld\.so: / { if (!ok("loader", 1)) print; next }
	# perror(FILE) on the data file (its open) or a log (fopen, fclose).
	index($0, file ": ") == 1		{ if (!ok("open")) print; next }
	/^[^ ]*\/log[01]: /			{ if (!ok("log")) print; next }
	# Wrong answers and the program reading its file back: other
	# properties.
	/^wrong: |position .* after a write|\(last .*submitted|reaped, size/ { next }
	/^size [0-9]+, expected|^block [0-9]+: (zeros|garbage)|holds record|^record [0-9]+ seen/ { next }
	{ print }'
}

# The exit status of two: a hang first, then a crash, then an error.
_worst() {
	local a=$1 b=$2
	[ "$a" -eq 137 ] || [ "$b" -eq 137 ] && { echo 137; return; }
	[ "$a" -gt 128 ] && { echo "$a"; return; }
	[ "$b" -gt 128 ] && { echo "$b"; return; }
	[ "$a" -ne 0 ] && { echo "$a"; return; }
	echo "$b"
}

# fault_workload WL DIR FILE: run WL (prefix FAULT_CMD) writing FILE, its
# logs and outputs in DIR; DIR/rc the status.
fault_workload() {
	local wl=$1 d=$2 f=$3 h=$FAULTS_HELPERS ra rb eng mode
	case $wl in
	append)
		: >"$f"
		# (The shell's word about a job killed at the time limit goes
		# nowhere: the status says it.)
		{
			"${FAULT_CMD[@]}" "$h/t_appender" -t $FA_THREADS -n $FA_RECS -w 0 \
				-l "$d/log0" "$f" >"$d/out0" 2>"$d/err0" &
			"${FAULT_CMD[@]}" "$h/t_appender" -t $FA_THREADS -n $FA_RECS \
				-w $FA_THREADS -l "$d/log1" "$f" >"$d/out1" 2>"$d/err1"
			rb=$?
			wait $!
			ra=$?
		} 2>/dev/null
		cat "$d/out0" "$d/out1" >"$d/out"
		cat "$d/err0" "$d/err1" >"$d/err"
		_worst "$ra" "$rb" >"$d/rc"
		;;
	counter)
		{
			"${FAULT_CMD[@]}" "$h/t_counter" -t $FC_THREADS -n $FC_RECS -P 3 \
				-l "$d/log0" "$f" >"$d/out" 2>"$d/err"
			echo $? >"$d/rc"
		} 2>/dev/null
		;;
	aio-* | uring-*)
		eng=${wl%-*} mode=${wl#*-}
		{
			# shellcheck disable=SC2046
			"${FAULT_CMD[@]}" "$h/asyncwrite" "$eng" "$mode" "$f" "$FQ_BLOCKS" "$FQ_QD" \
				$([ "$mode" = seq ] && echo stat fsync) >"$d/out" 2>"$d/err"
			echo $? >"$d/rc"
		} 2>/dev/null
		;;
	*) echo "unknown workload $wl" >&2; return 2 ;;
	esac
}

_kv() { sed -n "s/.*\\b$1=\\([0-9-]*\\).*/\\1/p" <<<"$2" | tail -n 1; }
_b() { if [ "$1" = 1 ]; then echo 1; else echo 0; fi; }
# 1 if TEXT has no line matching the grep pattern, else 0.
_no() { if grep -q -- "$1" <<<"$2"; then echo 0; else echo 1; fi; }

# fault_props WL DIR FILE SHMDIR INJ: the properties of a finished run, in
# DIR/props ("name value" lines); what they were computed from in
# DIR/detail.
fault_props() {
	local wl=$1 d=$2 f=$3 shm=$4 inj=$5 h=$FAULTS_HELPERS rc census v="" logs=1 \
		nolost="?" noextra="?" placed="?" nohole exact answers tl seg
	local -A p=()
	rc=$(cat "$d/rc")
	p[finished]=$(_b "$((rc != 137))")
	p[nocrash]=$(_b "$((rc <= 128 || rc == 137))")
	p[noerror]=$(_b "$((rc == 0))")
	local sc="" et="" leaks
	if [ "$inj" != none ]; then
		sc=${inj%%:*} et=${inj#*:}
		_errtext "${et%%:*}"
		et=$ERRTEXT
	fi
	leaks=$(_unexplained "$sc" "$et" "$f" <"$d/err")
	# An error with no word about it (not a crash, not a hang).
	[ -n "$leaks" ] || [ "$rc" -eq 0 ] || [ "$rc" -gt 128 ] ||
		grep -q . "$d/err" || leaks="exit status $rc, no message"
	p[noleak]=$(_b "$([ -z "$leaks" ] && echo 1)")
	if [ "$rc" -eq 127 ] && grep -q "error while loading shared libraries" "$d/err"; then
		# Void: the loader failed, the program never ran.
		for k in $FAULT_PROPS; do echo "$k ?"; done >"$d/props"
		{ echo "status $rc (void: the loader failed)"; sed 's/^/err /' "$d/err"; } >"$d/detail"
		return 0
	fi
	local seqopt=()
	[[ $wl == *-seq ]] && seqopt=(-s)
	census=$(env -u LD_PRELOAD "$h/t_census" "${seqopt[@]}" "$f" 2>&1)
	if [[ $census != size=* ]]; then
		# No file: the program stopped before it made it.
		census="size=0 records=0 dup=0 torn=0 inside=0 trailing=0 misplaced=0 data_end=0"
	fi
	p[nodup]=$(_b "$(($(_kv dup "$census") == 0))")
	p[notorn]=$(_b "$(($(_kv torn "$census") == 0))")
	nohole=$(_b "$(($(_kv inside "$census") == 0))")
	exact=$(_b "$(($(_kv trailing "$census") == 0))")
	case $wl in
	append | counter)
		local want=(log0) lf
		[ "$wl" = append ] && want+=(log1)
		for lf in "${want[@]}"; do
			[ -e "$d/$lf" ] || logs=0
		done
		# t_appender writes its log with stdio, which can drop a
		# buffer whose write failed and still close it: the log is
		# whole when it holds the records its summary counts.
		if [ "$wl" = append ] && [ "$logs" = 1 ]; then
			for lf in 0 1; do
				[ "$(grep -c '^R ' "$d/log$lf")" = \
					"$(_kv records "$(cat "$d/out$lf")")" ] || logs=0
			done
		fi
		# t_counter exits 3 when its log is not whole.
		[ "$wl" = counter ] && [ "$rc" -eq 3 ] && logs=0
		if [ "$logs" = 1 ]; then
			v=$(env -u LD_PRELOAD "$h/t_verify" -v "$f" "${want[@]/#/$d/}" 2>&1)
			nolost=$(_no "is missing" "$v")
			noextra=$(_no "never acknowledged" "$v")
			placed=$(_no "was acknowledged at\|survived truncate" "$v")
		fi
		if [ "$wl" = counter ]; then
			# Zeros where a failed write was aimed are the kernel's too;
			# the size may be the last truncate's length.
			if [ "$logs" = 1 ]; then
				# (Zeros past the data are exact's business.)
				nohole=$(awk -v bs=4096 -v end="$(_kv data_end "$census")" \
					'/^block [0-9]+: zeros/ { if ($2 * bs < end) bad = 1 }
					END { print bad ? 0 : 1 }' <<<"$v")
				tl=$(sed -n 's/^T [0-9]* //p' "$d/log0" | tail -n 1)
				census=$(env -u LD_PRELOAD "$h/t_census" -m "${tl:-0}" "$f" 2>&1)
				exact=$(_b "$(($(_kv trailing "$census") == 0))")
				grep -q "the last truncate was to" <<<"$v" && exact=0
			else
				nohole="?"
			fi
		fi
		answers=$(_no "^wrong:\|position .* after a write" "$(cat "$d/err")")
		;;
	*)
		local out stat_bad bad
		out=$(tail -n 1 "$d/out")
		stat_bad=$(_kv statbad "$out")
		bad=$(_kv bad "$out")
		if [ -n "$stat_bad" ]; then
			answers=$(_b "$((stat_bad == 0))")
		else
			answers=$(_no "submitted\|reaped, size" "$(cat "$d/err")")
		fi
		# Every write acknowledged (the program reaped them all, none
		# failed): every record must be there, once.
		if [ -n "$bad" ] && ! grep -q "block [0-9]*: result\|fdatasync:" "$d/err"; then
			nolost=$(_b "$(($(_kv records "$census") - $(_kv dup "$census") == FQ_BLOCKS))")
		fi
		[[ $wl == *-seq ]] && placed=$(_b "$(($(_kv misplaced "$census") == 0))")
		;;
	esac
	p[answers]=$answers p[nolost]=$nolost p[noextra]=$noextra
	p[placed]=$placed p[nohole]=$nohole p[exact]=$exact
	if env -u LD_PRELOAD getfattr -n user.dioshim.eof "$f" >/dev/null 2>&1; then
		p[noxattr]=0
	else
		p[noxattr]=1
	fi
	seg=$(find "$shm" -mindepth 1 -type f ! -name 'dioshim-hint*' 2>/dev/null)
	p[noseg]=$(_b "$([ -z "$seg" ] && echo 1)")
	{
		echo "status $rc"
		echo "census $census"
		[ -z "$v" ] || printf '%s\n' "$v" | sed 's/^/verify /' | head -n 12
		[ -z "$seg" ] || printf '%s\n' "$seg" | sed 's/^/left /'
		[ -z "$leaks" ] || printf '%s\n' "$leaks" | sed 's/^/leak /' | head -n 4
		sed 's/^/out /' "$d/out" | head -n 4
		sed 's/^/err /' "$d/err" | head -n 8
	} >"$d/detail"
	# A program killed (a crash, a hang) leaves its reserved tail, its
	# record and its segment to recovery, as kill -9 does (dioshim(7),
	# CRASHES): what it leaves is not compared.
	if [ "$rc" -gt 128 ]; then
		p[exact]="?" p[noxattr]="?" p[noseg]="?"
	fi
	# A program of ours aborts when its memory cannot be had (a failed
	# mmap: pthread_create, posix_memalign), as with the kernel alone.
	[ "$rc" -eq 134 ] && [ "$sc" = mmap ] && p[nocrash]="?"
	for k in $FAULT_PROPS; do
		echo "$k ${p[$k]}"
	done >"$d/props"
}

# fault_run WL SIDE INJ DIR MNT: one run, from a fresh file and segment
# directory; DIR/props and DIR/detail.
fault_run() {
	local wl=$1 side=$2 inj=$3 d=$4 mnt=$5 shm f
	mkdir -p "$d"
	f=$mnt/f
	rm -f "$f"
	shm=$(mktemp -d "${FAULTS_SHM:-/dev/shm}/run.XXXXXX")
	_fault_cmd "$side" "$inj" || return 2
	DIOSHIM_SHM_DIR=$shm fault_workload "$wl" "$d" "$f"
	fault_props "$wl" "$d" "$f" "$shm" "$inj"
	rm -rf "$shm"
	rm -f "$f"
}

# fault_diff CONTROL SHIM: the properties (names) that hold in every
# CONTROL props file and not in SHIM's.
fault_diff() {
	local shim=$1 k v
	shift
	while read -r k v; do
		[ "$v" = 0 ] || continue
		[[ " $FAULT_COMPARED " == *" $k "* ]] || continue
		awk -v k="$k" '$1 == k && $2 != 1 { bad = 1 } END { exit bad }' "$@" &&
			printf '%s ' "$k"
	done <"$shim"
	echo
}

# fault_props_line DIR: "name=value ..." of a run's props.
fault_props_line() { awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $2 }' "$1/props"; echo; }

# fault_calls WL SIDE DIR MNT: the system calls a clean run makes, one
# line each, "SYSCALL MAX" with MAX the most calls any one thread made
# (what strace's when= counts to).
fault_calls() {
	local wl=$1 side=$2 d=$3 mnt=$4 shm f=$4/f
	mkdir -p "$d"
	rm -f "$f"
	shm=$(mktemp -d "${FAULTS_SHM:-/dev/shm}/run.XXXXXX")
	# strace -ff: one file per thread, named by its id.
	_fault_cmd "$side" none strace -f -ff -qq -o "$d/trace"
	DIOSHIM_SHM_DIR=$shm fault_workload "$wl" "$d" "$f"
	rm -rf "$shm"
	rm -f "$f"
	awk 'FNR == 1 { delete seen } /^[a-z0-9_]+\(/ {
		c = substr($0, 1, index($0, "(") - 1); n[FILENAME, c]++
		if (n[FILENAME, c] > max[c]) max[c] = n[FILENAME, c] }
		END { for (c in max) print c, max[c] }' "$d"/trace.* | sort
	rm -f "$d"/trace.*
}

# fault_resolve WL SIDE SYSCALL:ERRNO:WHEN DIR MNT: the injection with a
# WHEN relative to the count a clean run on SIDE reaches (the most calls
# of SYSCALL one thread makes), so that a case keeps its aim while the
# shim's own calls change: "last" is that count, "2/3+" fails from two
# thirds of it on (as make faults's persistent failures do).  Other WHENs
# are given back as they are.
fault_resolve() {
	local wl=$1 side=$2 inj=$3 d=$4 mnt=$5 sc er when max
	IFS=: read -r sc er when <<<"$inj"
	case $when in
	last | 2/3+) ;;
	*) echo "$inj"; return 0 ;;
	esac
	max=$(fault_calls "$wl" "$side" "$d" "$mnt" | awk -v c="$sc" '$1 == c { print $2 }')
	: "${max:=1}"
	case $when in
	last) echo "$sc:$er:$max" ;;
	2/3+) echo "$sc:$er:$(((2 * max + 2) / 3))+" ;;
	esac
}
