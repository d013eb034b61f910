#!/usr/bin/env bats
# fs: ext4 xfs
# A failure at a system call the shim makes for itself (issue 28): the
# program did not make that call, so the kernel alone never meets the
# failure — the file must end as the kernel alone leaves it.  Each test
# injects the failure with strace (-e inject=CALL:error=ERRNO:when=N)
# into a run under the shim and into the same run outside it, the
# control, and checks both files with tools outside the shim.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 512M; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v strace >/dev/null || skip "strace is not installed"
	D=$SCRATCH_MNT/fail.$BATS_TEST_NUMBER
	rm -rf "$D"
	mkdir -p "$D"
	T=$BATS_TEST_TMPDIR
}

# injected SIDE SPEC CMD...: CMD under the shim (SIDE shim) or outside it
# (noshim), the failure SPEC (CALL:error=ERRNO:when=N, or :signal=SIG)
# injected by strace; the exit status is CMD's.
injected() {
	local side=$1 spec=$2 launch=$DIOSHIM
	shift 2
	[ "$side" = noshim ] && launch="env -u LD_PRELOAD"
	timeout 120 strace -f -qq -o /dev/null -e trace="${spec%%:*}" \
		-e inject="$spec" $launch "$@"
}

# What a file is left as, seen from outside the shim: its size, whether
# it keeps an EOF record, whether a segment is left for it.
left() { echo "size=$(real_size "$1") $(left_behind "$1")"; }

# For each N in NS, CMD... (its file $D/f.N, "@" in CMD) run with SPEC
# (CALL:error=ERRNO, :when=N added) under the shim and outside it: the
# files must end alike, as EXPECT says.
each_n_alike() {
	local spec=$1 ns=$2 expect=$3 n side got bad=0
	shift 3
	# The place's hints made first: the calls counted are the file's.
	shim "$HELPERS/recwrite" "$D/warm" a 4K >/dev/null
	for n in $ns; do
		for side in noshim shim; do
			rm -f "$D/f.$n.$side"
			injected "$side" "$spec:when=$n" "${@//@/$D/f.$n.$side}" \
				>/dev/null 2>&1
			got=$(left "$D/f.$n.$side")
			if [ "$got" != "$expect" ]; then
				echo "$spec:when=$n, $side: $got (expected $expect)"
				bad=1
			fi
		done
	done
	return "$bad"
}

@test "the last close's ftruncate (the cut of the reserved tail) fails once: the file ends at its data, no record, no segment" {
	each_n_alike ftruncate:error=EIO "1 2 3 4 5 6" \
		"size=8192 record=0 segment=0" \
		"$HELPERS/recwrite" @ a 4K a 4K
}

@test "the lock test that says whether another writer lives (fcntl F_OFD_GETLK) fails for a moment at any of the first calls: the last close still cuts" {
	each_n_alike fcntl:error=EAGAIN "$(seq 1 16)" \
		"size=8192 record=0 segment=0" \
		"$HELPERS/recwrite" @ a 4K a 4K
}

@test "fstat, fremovexattr, unlinkat or statx fails once: size, record and segment as the kernel alone leaves them" {
	each_n_alike fstat:error=EIO "$(seq 1 10)" \
		"size=8192 record=0 segment=0" "$HELPERS/recwrite" @ a 4K a 4K
	each_n_alike fremovexattr:error=EIO "1 2" \
		"size=8192 record=0 segment=0" "$HELPERS/recwrite" @ a 4K a 4K
	each_n_alike unlinkat:error=EBUSY "$(seq 1 6)" \
		"size=8192 record=0 segment=0" "$HELPERS/recwrite" @ a 4K a 4K
	each_n_alike statx:error=ENOMEM "1 2 3" \
		"size=8192 record=0 segment=0" "$HELPERS/recwrite" @ a 4K a 4K
}

@test "a process killed between counting a segment in its place's hint and publishing it: the next shimmed process counts the place anew" {
	local hint
	# The hints exist first: the next linkat is the segment's.
	shim "$HELPERS/recwrite" "$D/warm" a 4K >/dev/null
	hint=$(ls "$DIOSHIM_SHM_DIR"/dioshim-hint*."$(id -u)")
	[ "$(od -An -tu8 -j64 -N8 "$hint" | tr -d ' ')" -eq 0 ]
	run injected shim linkat:signal=SIGKILL:when=1 \
		"$HELPERS/recwrite" "$D/f" a 4K
	[ "$status" -ne 0 ]
	echo "live after the kill: $(od -An -tu8 -j64 -N8 "$hint")"
	[ "$(od -An -tu8 -j64 -N8 "$hint" | tr -d ' ')" -eq 1 ]
	shim true
	echo "live after the next process: $(od -An -tu8 -j64 -N8 "$hint")"
	[ "$(od -An -tu8 -j64 -N8 "$hint" | tr -d ' ')" -eq 0 ]
}

# ---- an append that fails among appends in parallel (issue 28, case 6) --

# No zero block in FILE, and its size ends at its last block.
no_hole() {
	local blocks zeros
	blocks=$(noshim "$HELPERS/t_blocks" "$1" | wc -l)
	zeros=$(noshim "$HELPERS/t_blocks" "$1" | grep -c '^00$' || true)
	echo "$1: blocks=$blocks zeros=$zeros size=$(real_size "$1")"
	[ "$zeros" -eq 0 ] && [ "$(real_size "$1")" -eq $((blocks * 4096)) ]
}

@test "appends the kernel refuses in a way nobody foresees (an aligned buffer not mapped: EFAULT) among another thread's appends: every record, no zero block, size exact, as with the kernel alone" {
	local side
	for side in noshim shim; do
		run $side "$HELPERS/badappend" 2000 "$T/l.$side" "$D/b.$side" \
			unmapped
		echo "$side: $output"
		[ "$status" -eq 0 ]
		run noshim "$HELPERS/t_verify" -S $((2000 * 4096)) \
			"$D/b.$side" "$T/l.$side"
		echo "$output"
		[ "$status" -eq 0 ]
	done
	assert_no_segment "$D/b.shim"
}

@test "4 threads appending, each one's Nth write failing (EIO; EINTR, the program retrying): every acknowledged record once, no zero block, the size at the data" {
	local e n retry
	for e in EIO EINTR; do
		retry=
		[ "$e" = EINTR ] && retry=-R
		for n in 50 150; do
			# The kernel alone (its write fails): no hole either.
			injected noshim "write:error=$e:when=$n" \
				"$HELPERS/t_appender" -t 4 -n 300 $retry \
				-l "$T/k.$e.$n" "$D/k.$e.$n" >/dev/null 2>&1 || true
			no_hole "$D/k.$e.$n"
			# Under the shim its pwritev2 fails.
			injected shim "pwritev2:error=$e:when=$n" \
				"$HELPERS/t_appender" -t 4 -n 300 $retry \
				-l "$T/s.$e.$n" "$D/s.$e.$n" >/dev/null 2>&1 || true
			run noshim "$HELPERS/t_verify" "$D/s.$e.$n" "$T/s.$e.$n"
			echo "shim, $e at $n: $output"
			[ "$status" -eq 0 ]
			no_hole "$D/s.$e.$n"
			assert_no_segment "$D/s.$e.$n"
		done
	done
}

@test "kill -9 of a process whose appends move over failed ones: the next writer neither hangs nor leaves a hole after its data" {
	local i
	for i in 1 2 3; do
		"$DIOSHIM" "$HELPERS/badappend" 100000 "$T/l.$i" "$D/m" \
			unmapped >/dev/null 2>&1 &
		sleep 0.$((i + 2))
		kill -9 $! 2>/dev/null || true
		wait $! 2>/dev/null || true
	done
	run "$DIOSHIM" recover "$D/m"
	echo "$output"
	off=$(real_size "$D/m")
	run shim "$HELPERS/t_appender" -t 4 -n 200 -l "$T/l.after" "$D/m"
	echo "$output"
	[ "$status" -eq 0 ]
	run noshim "$HELPERS/t_verify" -o "$off" "$D/m" "$T/l.after"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$D/m"
}
