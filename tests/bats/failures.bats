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
left() {
	local rec=0 seg=0
	noshim getfattr -n user.dioshim.eof "$1" >/dev/null 2>&1 && rec=1
	[ -e "$(segment_of "$1")" ] && seg=1
	echo "size=$(real_size "$1") record=$rec segment=$seg"
}

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
