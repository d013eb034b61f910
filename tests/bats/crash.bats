#!/usr/bin/env bats
# fs: ext4 xfs
# Crash safety: a simulated power cut (the filesystem shut down without
# flushing its log) while writers append and sync; kill -9 of writers and
# of a barrier raiser at random moments.  Every acknowledged record
# survives, nothing hangs, and afterwards the file ends at its data.

load helper

setup_file() {
	fs_setup_file "${FS:-ext4}" 1G
	export ROUNDS=${CRASH_ROUNDS:-6}
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	F=$SCRATCH_MNT/crash.$BATS_TEST_NUMBER
}
# Each test's files go with it: the power-cut rounds on a fast device
# write hundreds of MiB, and the next test must not meet a full filesystem.
teardown() { rm -f "$F" "$F".*; }

# The filesystem goes down as in a power cut: no log flush.  The shared
# segments go too (/dev/shm does not survive a power cut); then the
# filesystem comes back and recovery runs.  CUT_AT is when the cut began:
# a sync still running then may return 0 on XFS for data the shutdown
# dropped (xfs_file_fsync checks for shutdown only on entry), which a real
# power cut could never acknowledge, so checks count only earlier acks.
power_cut() {
	CUT_AT=$(date +%s%N)
	xfs_io -x -c "shutdown" "$SCRATCH_MNT"
}
come_back() {
	rm -f "$DIOSHIM_SHM_DIR"/dioshim.*
	scratch_remount
}

# kill -9 up to N of PID's children, at random moments, leaving one.
kill_some_children() {
	local pid=$1 n=$2 kids
	for _ in $(seq "$n"); do
		sleep "0.$((RANDOM % 7 + 2))"
		mapfile -t kids < <(pgrep -P "$pid")
		[ ${#kids[@]} -gt 1 ] || break
		kill -9 "${kids[RANDOM % ${#kids[@]}]}" 2>/dev/null || true
	done
}

# PID must finish within two minutes; a hang fails the test.
finishes_or_hangs() {
	local pid=$1
	for _ in $(seq 120); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	if kill -0 "$pid" 2>/dev/null; then
		pkill -9 -P "$pid"
		kill -9 "$pid"
		echo "hung"
		return 1
	fi
	wait "$pid" || true
}

# One round: writers append (mode $1) and sync (sync flag $2) until the
# power goes at a random moment; then recover and check.
crash_round() {
	local mode=$1 sync=$2 round=$3 ack=$BATS_TEST_TMPDIR/ack.$round pid
	local writers=${4:+$4 $5 $6 $7}
	writers=${writers:-"-t 2 -p 2"}
	rm -f "$F"
	# shellcheck disable=SC2086
	"$DIOSHIM" "$APPENDBENCH" run -m "$mode" $writers -s 60 -F 1 $sync -E \
		-A "$ack" "$F" >/dev/null 2>&1 &
	pid=$!
	sleep "0.$((RANDOM % 9 + 2))"
	power_cut
	# Writers see EIO and stop; any that do not are killed.
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	pkill -9 -P "$pid" 2>/dev/null || true
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" || true
	come_back
	[ -s "$ack" ] || { echo "round $round: nothing acknowledged"; return 1; }
	run "$DIOSHIM" recover "$F"
	echo "round $round: $output"
	[ "$status" -eq 0 ]
	# shellcheck disable=SC2086
	run noshim "$APPENDBENCH" check $writers -A "$ack" -X "$CUT_AT" "$F"
	echo "$output" | tail -5
	[ "$status" -eq 0 ]
}

@test "power cut while appenders fdatasync: acknowledged records survive, the file ends at its data" {
	for r in $(seq "$ROUNDS"); do
		crash_round counter "" "$r"
	done
}

@test "power cut while O_APPEND appenders fsync: acknowledged records survive, the file ends at its data" {
	for r in $(seq "$ROUNDS"); do
		crash_round append -f "$r"
	done
}

@test "after a power cut the first shimmed open recovers the file, not only dioshim recover" {
	local ack=$BATS_TEST_TMPDIR/ack.open size
	"$DIOSHIM" "$APPENDBENCH" run -m counter -t 2 -s 60 -F 1 -E -A "$ack" "$F" \
		>/dev/null 2>&1 &
	local pid=$!
	sleep 0.5
	power_cut
	sleep 0.5
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" || true
	come_back
	# The reserved tail is there for a reader outside the shim...
	size=$(real_size "$F")
	# ... and gone after any shimmed open.
	run "$DIOSHIM" "$HELPERS/openclose" "$F"
	[ "$status" -eq 0 ]
	run noshim "$APPENDBENCH" check -t 2 -A "$ack" -X "$CUT_AT" "$F"
	echo "$output" | tail -3
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -le "$size" ]
}

@test "kill -9 of writers and of a barrier raiser at random moments: no hang, nothing acknowledged lost" {
	local ack=$BATS_TEST_TMPDIR/ack.kill pid
	# Small chunks: reservations (the extension lock) are frequent; the
	# -T process raises the barrier all the time.
	DIOSHIM_RESERVE=64k DIOSHIM_RESERVE_MAX=64k "$DIOSHIM" \
		"$APPENDBENCH" run -m counter -t 2 -p 4 -s 6 -A "$ack" -T 512M "$F" \
		>/dev/null 2>&1 &
	pid=$!
	kill_some_children "$pid" 6
	# The survivors finish: no lock, count or barrier of the dead holds
	# them up.
	finishes_or_hangs "$pid"
	run noshim "$APPENDBENCH" check -t 2 -p 4 -A "$ack" -T 512M "$F"
	echo "$output" | tail -5
	[ "$status" -eq 0 ]
	# Every writer is gone: the next open trims what the dead left.
	run "$DIOSHIM" "$HELPERS/openclose" "$F"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((512 * 1024 * 1024)) ]
	assert_no_segment "$F"
}

@test "kill -9 of O_APPEND writers mid-run: survivors finish, acknowledged records kept, size ends at the data" {
	local ack=$BATS_TEST_TMPDIR/ack.killa pid
	DIOSHIM_RESERVE=64k DIOSHIM_RESERVE_MAX=128k "$DIOSHIM" \
		"$APPENDBENCH" run -m append -t 2 -p 4 -s 4 -A "$ack" "$F" \
		>/dev/null 2>&1 &
	pid=$!
	kill_some_children "$pid" 3
	finishes_or_hangs "$pid"
	run "$DIOSHIM" "$HELPERS/openclose" "$F"
	run noshim "$APPENDBENCH" check -t 2 -p 4 -A "$ack" "$F"
	echo "$output" | tail -5
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "dioshim gc after a killed writer's file was deleted (RocksDB drops its unfinished SSTs) or renamed: the segment goes, the renamed file is cut where its data ends" {
	local seg
	( "$DIOSHIM" "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	( "$DIOSHIM" "$HELPERS/segprobe" "$F.r" a ) 2>/dev/null || true
	seg=$(segment_of "$F")
	local segr
	segr=$(segment_of "$F.r")
	[ -e "$seg" ] && [ -e "$segr" ]
	[ "$(real_size "$F.r")" -gt 32768 ]
	rm "$F"
	mkdir -p "$SCRATCH_MNT/moved"
	mv "$F.r" "$SCRATCH_MNT/moved/r"
	run "$DIOSHIM" gc
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed (its file was deleted)"* ]]
	[[ "$output" == *"moved from $F.r to $SCRATCH_MNT/moved/r"* ]]
	# What it did is said of the file where it is now.
	[[ "$output" == *"$SCRATCH_MNT/moved/r: record eof 0 phys "*"-> 32768"* ]]
	[[ "$output" != *"/proc/self/fd/"* ]]
	[ ! -e "$seg" ] && [ ! -e "$segr" ]
	[ "$(real_size "$SCRATCH_MNT/moved/r")" -eq 32768 ]
	run "$DIOSHIM" gc
	[ "$status" -eq 0 ]
	rm -rf "$SCRATCH_MNT/moved"
}

@test "makers of shared files killed between making and publishing them (each link): dioshim gc removes what they left once it is a minute old and its thread gone, and nothing else" {
	local w n f dir
	# A segment directory of this test's own: only its leftovers.
	dir=$(mktemp -d /dev/shm/dioshim-crash.XXXXXX)
	# The first link is the user's hint's, the second its group hint's
	# (the first made by then), the next the segment's (both made).
	for w in 1 2 2; do
		DIOSHIM_SHM_DIR=$dir DIOSHIM_ENGAGE=always strace -f -qq -o /dev/null \
			-e inject=linkat:signal=KILL:when=$w \
			"$DIOSHIM" -- dd if=/dev/zero of="$F" bs=4k count=1 \
			oflag=direct conv=notrunc 2>/dev/null || true
	done
	n=$(find "$dir" -name 'dioshim*.tmp*' | wc -l)
	[ "$n" -eq 3 ]
	# A segment among them.
	find "$dir" -name 'dioshim.*.tmp*' | grep -q .
	# Fresh: a maker may be at work.
	run env DIOSHIM_SHM_DIR=$dir "$DIOSHIM" gc
	[ "$(find "$dir" -name 'dioshim*.tmp*' | wc -l)" -eq "$n" ]
	# Names fresh makers use: the thread's number and a random one.
	find "$dir" -name 'dioshim*.tmp*' | grep -Eq '\.tmp[1-9][0-9]*\.[0-9a-f]{16}$'
	# A minute old; beside them, what gc must leave: one whose thread is
	# alive (this shell's), names no maker makes, and a group directory
	# that is a link to another directory holding a leftover's name.
	local keep=$BATS_TEST_TMPDIR/keep victim=$BATS_TEST_TMPDIR/victim
	mkdir "$keep" "$victim"
	for f in "dioshim.1.2.tmp$$" dioshim.tmp999999 dioshimZZ.tmp999999 \
		'dioshim.1.2.tmp+999999' 'dioshim.1.2.tmp 999999' \
		dioshim.1.2.tmp0999999 dioshim.1.2.tmp999999.0123 \
		dioshim.1.2.tmp999999.; do
		echo x >"$dir/$f"
		echo x >"$keep/$f"
	done
	echo data >"$victim/dioshim.1.2.tmp999999"
	ln -s "$victim" "$dir/dioshim-g4242"
	find "$dir" "$victim" -name 'dioshim*.tmp*' -exec touch -h -d '2 minutes ago' {} +
	run env DIOSHIM_SHM_DIR=$dir "$DIOSHIM" gc
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c "a shared file its maker died making: removed" <<<"$output")" -eq "$n" ]
	[ "$(cd "$dir" && find . -maxdepth 1 -name 'dioshim*.tmp*' | sort)" = \
		"$(cd "$keep" && find . -name 'dioshim*.tmp*' | sort)" ]
	[ -z "$(find "$dir" -mindepth 2 -name 'dioshim*.tmp*')" ]
	[ -e "$victim/dioshim.1.2.tmp999999" ]
	# The file is served again from the directory gc left.
	find "$dir" -maxdepth 1 -name 'dioshim*.tmp*' -delete
	rm "$dir/dioshim-g4242"
	run env DIOSHIM_SHM_DIR=$dir DIOSHIM_ENGAGE=always "$DIOSHIM" "$HELPERS/t_appender" -t 2 -n 50 -c "$F.2"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F.2")" -eq $((100 * 4096)) ]
	rm -rf "$dir"
}

@test "each dioshim subcommand answers --help and refuses an option it does not know before doing anything: a killed writer's tail and segment stay" {
	local seg sub
	( "$DIOSHIM" "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	seg=$(printf '%s/dioshim.%x.%x' "$DIOSHIM_SHM_DIR" \
		"$(noshim stat -c %d "$F")" "$(noshim stat -c %i "$F")")
	[ -e "$seg" ]
	[ "$(real_size "$F")" -gt 32768 ]
	for sub in gc status recover; do
		run "$DIOSHIM" $sub --help
		[ "$status" -eq 0 ]
		[[ "$output" == "usage: dioshim $sub"* ]]
		run "$DIOSHIM" $sub --bogus "$F"
		echo "$output"
		[ "$status" -eq 2 ]
		[[ "$output" == *"unknown option --bogus"* ]]
	done
	run "$DIOSHIM" gc "$F"
	[ "$status" -eq 2 ]
	run "$DIOSHIM" recover
	[ "$status" -eq 2 ]
	# Nothing was done: the tail and the segment are as the writer left
	# them, and the settings list is config.def's.
	[ -e "$seg" ]
	[ "$(real_size "$F")" -gt 32768 ]
	run "$DIOSHIM" --help
	[[ "$output" == *"DIOSHIM_ENGAGE=contention"* ]]
	# Then gc does its work.
	run "$DIOSHIM" gc
	[ "$status" -eq 0 ]
	[ ! -e "$seg" ]
	[ "$(real_size "$F")" -eq 32768 ]
}

@test "dioshim gc cuts the tail a killed writer left and removes its segment; a segment in use is kept" {
	local seg
	( "$DIOSHIM" "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	seg=$(printf '%s/dioshim.%x.%x' "$DIOSHIM_SHM_DIR" \
		"$(noshim stat -c %d "$F")" "$(noshim stat -c %i "$F")")
	[ -e "$seg" ]
	# The writer wrote 32 KiB and died with its reservation standing.
	[ "$(real_size "$F")" -gt 32768 ]
	# A live user of another file keeps that file's segment.
	"$DIOSHIM" "$HELPERS/t_fops" -d -c "$F.live" w 0 8192 touch "$BATS_TEST_TMPDIR/ready" \
		wait "$BATS_TEST_TMPDIR/go" >/dev/null 2>&1 &
	local pid=$!
	for _ in $(seq 100); do [ -e "$BATS_TEST_TMPDIR/ready" ] && break; sleep 0.1; done
	run "$DIOSHIM" gc
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"in use ($F.live)"* ]]
	[ ! -e "$seg" ]
	[ "$(real_size "$F")" -eq 32768 ]
	touch "$BATS_TEST_TMPDIR/go"
	wait "$pid"
	[ "$(real_size "$F.live")" -eq 8192 ]
	assert_no_segment "$F.live"
}
