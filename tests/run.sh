#!/usr/bin/env bash
# Runs every test and ends with one line: "N passed, N failed, N skipped".
#
#   tests/run.sh                 unit programs, then every bats suite
#   tests/run.sh unit            unit programs only
#   tests/run.sh FILE.bats...    those suites only
#
# Scratch filesystems the suites make are torn down by the suites; this
# script tears down whatever a killed suite left in its registry.
set -u
cd "$(dirname "$0")/.."
export TOP=$PWD BUILD=${BUILD:-$PWD/build}
export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-test-$$.registry
# The tests' segments live in a directory of their own.
export DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-test.XXXXXX)
source tests/lib/scratchfs.sh
cleanup() {
	scratch_destroy_all
	rm -rf "$DIOSHIM_SHM_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0 skip=0
failed=() suite_times=() test_times=()

run_unit() {
	local t name rc out
	for t in "$BUILD"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		name=unit/$(basename "$t")
		out=$(timeout 300 "$t" 2>&1)
		rc=$?
		case $rc in
		0) pass=$((pass + 1)); echo "ok      $name" ;;
		77) skip=$((skip + 1)); echo "skip    $name: ${out##*$'\n'}" ;;
		*) fail=$((fail + 1)); failed+=("$name")
		   echo "FAIL    $name (exit $rc)"; printf '%s\n' "$out" | sed 's/^/        /' | tail -40 ;;
		esac
	done
}

# One suite under one filesystem (FS, read by the suite's setup_file).
run_suite() {
	local file=$1 fs=$2 line tag name ms=0 start=$SECONDS
	tag=$(basename "$file" .bats)${fs:+[$fs]}
	while IFS= read -r line; do
		# bats --timing: "ok 3 name in 123ms", "... in 4ms # skip why"
		if [[ $line =~ ^((not )?ok\ .*)\ in\ ([0-9]+)ms(\ #\ skip.*)?$ ]]; then
			line=${BASH_REMATCH[1]}${BASH_REMATCH[4]}
			ms=${BASH_REMATCH[3]}
		fi
		name=${line#*ok }
		name="$tag ${name#* }"
		[[ $line != ok* && $line != "not ok"* ]] ||
			test_times+=("$((ms / 1000)) $name")
		case $line in
		"ok "*"# skip"*) skip=$((skip + 1)); echo "skip    $name" ;;
		"ok "*) pass=$((pass + 1)); echo "ok      $name" ;;
		"not ok "*) fail=$((fail + 1)); failed+=("$name"); echo "FAIL    $name" ;;
		"#"*) echo "        $line" ;;
		esac
	done < <(FS=$fs DIOSHIM_SHM_DIR=$(suite_shm) bats --tap --timing "$file" 2>&1)
	# Where make test's time goes.
	echo "        $tag took $((SECONDS - start)) s"
	suite_times+=("$((SECONDS - start)) $tag")
}

# Each suite run gets segments of its own: a suite's filesystems reuse
# loop devices and inode numbers, so a segment one suite left on purpose
# (a killed writer, a planted one) must not meet the next suite's files.
suite_shm() {
	mktemp -d "$DIOSHIM_SHM_DIR/suite.XXXXXX"
}

# A suite whose header says "# fs: ext4 xfs" runs once per filesystem.
run_bats() {
	local file fss fs
	for file in "$@"; do
		fss=$(sed -n 's/^# fs: *//p' "$file" | head -n 1)
		if [ -z "$fss" ]; then
			run_suite "$file" ""
		else
			for fs in $fss; do
				run_suite "$file" "$fs"
			done
		fi
	done
}

if [ $# -eq 0 ]; then
	run_unit
	run_bats tests/bats/*.bats
elif [ "$1" = unit ]; then
	run_unit
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
