#!/usr/bin/env bash
# Runs every test and ends with one line: "N passed, N failed, N skipped".
#
#   tests/run.sh                 unit programs, then every bats suite
#   tests/run.sh unit            unit programs only
#   tests/run.sh FILE.bats...    those suites only
# (DEBUG_BUILD=DIR adds the unit programs and DEBUG_SUITES of the debug
# build, make debug's, on ext4.)
#
# JOBS=N runs N suites at a time: most of a suite's time is spent
# waiting (on loop devices, on servers, on sleeps), not computing.  Two
# runs of one suite (ext4 and XFS) never overlap: they share the suite's
# global state (huge pages lent, server ports).  Each suite's report is
# printed whole when it ends.  The default is 2 (make test within about
# 15 minutes on two cores); JOBS=1 runs them in order.
#
# Scratch filesystems the suites make are torn down by the suites; this
# script tears down whatever a killed suite left in its registry (one per
# suite run: a registry is rewritten as filesystems go).
set -u
cd "$(dirname "$0")/.."
export TOP=$PWD BUILD=${BUILD:-$PWD/build}
RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-test.XXXXXX")
export SCRATCH_REGISTRY=$RUN_DIR/unit.registry
# The tests' segments live in a directory of their own.
export DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-test.XXXXXX)
JOBS=${JOBS:-2}
# DEBUG_BUILD (make test sets it): the debug build, whose unit programs
# and DEBUG_SUITES run too, checking the lock order at every take.
DEBUG_BUILD=${DEBUG_BUILD:-}
DEBUG_SUITES=${DEBUG_SUITES:-append async fsync grow mixed model xfer}
[ -z "$DEBUG_BUILD" ] || [ -x "$DEBUG_BUILD/dioshim" ] || DEBUG_BUILD=
source tests/lib/scratchfs.sh
# A suite still running (interrupted): it and everything under it.
kill_tree() {
	local child
	for child in $(pgrep -P "$1"); do
		kill_tree "$child"
	done
	kill "$1" 2>/dev/null
}
cleanup() {
	local r pid
	for pid in $(jobs -p); do
		kill_tree "$pid"
	done
	wait
	for r in "$RUN_DIR"/*.registry; do
		SCRATCH_REGISTRY=$r scratch_destroy_all
	done
	rm -rf "$DIOSHIM_SHM_DIR" "$RUN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0 skip=0
failed=() suite_times=() test_times=()

# Count one program's result (0 pass, 77 skip, else fail) and print it;
# "said" adds its last line to a pass too (what a check found).
count() {
	local name=$1 rc=$2 out=$3 said=${4:-}
	case $rc in
	0) pass=$((pass + 1)); echo "ok      $name${said:+: ${out##*$'\n'}}" ;;
	77) skip=$((skip + 1)); echo "skip    $name: ${out##*$'\n'}" ;;
	*) fail=$((fail + 1)); failed+=("$name")
	   echo "FAIL    $name (exit $rc)"; printf '%s\n' "$out" | sed 's/^/        /' | tail -40 ;;
	esac
}

# Unit programs of BUILD, or of the debug build with "debug".
run_unit() {
	local t out build=$BUILD prefix=unit
	if [ "${1:-}" = debug ]; then
		[ -n "${DEBUG_BUILD:-}" ] || return 0
		build=$DEBUG_BUILD prefix=unit-debug
	fi
	for t in "$build"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		out=$(timeout 300 "$t" 2>&1)
		count "$prefix/$(basename "$t")" $? "$out"
	done
}

# The checks of the house (tests/checks/: layers, sizes, exports).
run_checks() {
	local t out
	for t in tests/checks/*.sh; do
		out=$(BUILD=$BUILD "$t" 2>&1)
		count "check/$(basename "$t" .sh)" $? "$out" said
	done
}

# One suite under one filesystem (FS, read by the suite's setup_file):
# its report on stdout, its results in OUT.res (lines "pass", "skip",
# "fail NAME", "test SECONDS NAME", "suite SECONDS TAG") for tally.
run_suite() {
	local file=$1 fs=$2 out=$3 variant=${4:-} line tag name ms=0
	local start=$SECONDS build=$BUILD
	tag=$(basename "$file" .bats)${fs:+[$fs${variant:+ $variant}]}
	[ "$variant" != debug ] || build=$DEBUG_BUILD
	while IFS= read -r line; do
		# bats --timing: "ok 3 name in 123ms", "... in 4ms # skip why"
		if [[ $line =~ ^((not )?ok\ .*)\ in\ ([0-9]+)ms(\ #\ skip.*)?$ ]]; then
			line=${BASH_REMATCH[1]}${BASH_REMATCH[4]}
			ms=${BASH_REMATCH[3]}
		fi
		name=${line#*ok }
		name="$tag ${name#* }"
		[[ $line != ok* && $line != "not ok"* ]] ||
			echo "test $((ms / 1000)) $name" >>"$out.res"
		case $line in
		"ok "*"# skip"*) echo skip >>"$out.res"; echo "skip    $name" ;;
		"ok "*) echo pass >>"$out.res"; echo "ok      $name" ;;
		"not ok "*) echo "fail $name" >>"$out.res"; echo "FAIL    $name" ;;
		"#"*) echo "        $line" ;;
		esac
	done < <(FS=$fs BUILD=$build DIOSHIM_SHM_DIR=$(suite_shm) \
		SCRATCH_REGISTRY=$out.registry bats --tap --timing "$file" 2>&1)
	# Where make test's time goes.
	echo "        $tag took $((SECONDS - start)) s"
	echo "suite $((SECONDS - start)) $tag" >>"$out.res"
}

# Add a suite run's results to the totals.
tally() {
	local kind rest
	while read -r kind rest; do
		case $kind in
		pass) pass=$((pass + 1)) ;;
		skip) skip=$((skip + 1)) ;;
		fail) fail=$((fail + 1)); failed+=("$rest") ;;
		test) test_times+=("$rest") ;;
		suite) suite_times+=("$rest") ;;
		esac
	done <"$1.res"
}

# Each suite run gets segments of its own: a suite's filesystems reuse
# loop devices and inode numbers, so a segment one suite left on purpose
# (a killed writer, a planted one) must not meet the next suite's files.
suite_shm() {
	mktemp -d "$DIOSHIM_SHM_DIR/suite.XXXXXX"
}

# A suite whose header says "# fs: ext4 xfs" runs once per filesystem.
run_bats() {
	local file fss fs variant n=0 i pid
	local -a todo=()
	for file in "$@"; do
		fss=$(sed -n 's/^# fs: *//p' "$file" | head -n 1)
		for fs in ${fss:-""}; do
			todo+=("$file $fs")
		done
		[ -n "$fss" ] || todo+=("$file ")
		# The lock-order checks (lockrank.h) on the debug build: the
		# suites that take every lock, once, on ext4.
		if [ -n "${DEBUG_BUILD:-}" ] &&
		   [[ " $DEBUG_SUITES " == *" $(basename "$file" .bats) "* ]]; then
			todo+=("$file ext4 debug")
		fi
	done
	# By the pid of its job: the suite file a run runs, where it reports.
	# A run starts when a slot is free and no run of its suite is on.
	declare -A running_file=() running_out=()
	while [ ${#todo[@]} -gt 0 ] || [ ${#running_file[@]} -gt 0 ]; do
		for i in "${!todo[@]}"; do
			[ ${#running_file[@]} -lt "$JOBS" ] || break
			read -r file fs variant <<<"${todo[$i]}"
			[[ " ${running_file[*]} " != *" $file "* ]] || continue
			n=$((n + 1))
			run_suite "$file" "$fs" "$RUN_DIR/$n" "$variant" \
				>"$RUN_DIR/$n.log" &
			running_file[$!]=$file
			running_out[$!]=$RUN_DIR/$n
			unset 'todo[i]'
		done
		todo=("${todo[@]}")
		wait -n -p pid "${!running_file[@]}"
		cat "${running_out[$pid]}.log"
		tally "${running_out[$pid]}"
		unset 'running_file[$pid]' 'running_out[$pid]'
	done
}

if [ $# -eq 0 ]; then
	run_checks
	run_unit
	run_unit debug
	run_bats tests/bats/*.bats
elif [ "$1" = unit ]; then
	run_checks
	run_unit
	run_unit debug
else
	run_bats "$@"
fi

if [ ${#failed[@]} -gt 0 ]; then
	echo
	echo "failed:"
	printf '  %s\n' "${failed[@]}"
fi
if [ ${#suite_times[@]} -gt 1 ]; then
	echo
	echo "slowest suites (s):"
	printf '%s\n' "${suite_times[@]}" | sort -rn | head -n 8 | sed 's/^/  /'
	echo "slowest tests (s):"
	printf '%s\n' "${test_times[@]}" | sort -rn | head -n 12 | cut -c1-110 |
		sed 's/^/  /'
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
