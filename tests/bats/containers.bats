#!/usr/bin/env bats
# fs: ext4 xfs
# Writers in other pid namespaces (containers sharing the host's /dev/shm
# and the data): a pid recorded there means nothing here, and /proc may not
# show it.  Their lifelines (an OFD lock the kernel drops when they die)
# tell whether they live: a killed one is reclaimed — its tail cut by the
# next user, by dioshim recover and by dioshim gc — and a live one is left
# alone.

load helper

setup_file() {
	fs_setup_file "${FS:-ext4}" 1G
	[ -n "${FS_SKIP:-}" ] && return 0
	if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
		export FS_SKIP="cannot make pid namespaces here (unshare --pid)"
	fi
	return 0
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/ns.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	export DIOSHIM_LOG=$T/log
}
teardown() {
	[ -n "${WPID:-}" ] && kill -9 "$WPID" 2>/dev/null
	reap_bg "$T/go"
	rm -f "$F"
}

# A writer in a pid namespace of its own: 50 records acknowledged, then
# it waits for $T/go.  WPID: its pid here.
writer_in_namespace() {
	unshare --pid --fork --mount-proc -- "$DIOSHIM" "$HELPERS/t_appender" \
		-t 2 -n 400 -p "50:$T/ready:$T/go" -l "$T/l" "$F" &
	BG=$!
	wait_file "$T/ready"
	WPID=$(descendant_named "$BG" t_appender)
	[ -n "$WPID" ]
}

# The process called NAME among the descendants of PID (not the newest of
# that name on the machine: other suites run their own at the same time).
descendant_named() {
	local kids=$1 p
	while [ -n "$kids" ]; do
		for p in $kids; do
			if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ]; then
				echo "$p"
				return 0
			fi
		done
		kids=$(pgrep -d ' ' -P "${kids// /,}")
	done
	return 1
}

# No zero block, and at least N blocks of records.
ends_at_data() {
	local blocks zeros
	blocks=$(noshim "$HELPERS/t_blocks" "$1" | wc -l)
	zeros=$(noshim "$HELPERS/t_blocks" "$1" | grep -c '^00$' || true)
	echo "blocks=$blocks zeros=$zeros size=$(real_size "$1")"
	[ "$zeros" -eq 0 ] && [ "$blocks" -ge "$2" ] &&
		[ "$(real_size "$1")" -eq $((blocks * 4096)) ]
}

@test "a writer alive in another pid namespace is in use: recover and gc leave its file alone" {
	writer_in_namespace
	before=$(real_size "$F")
	run "$DIOSHIM" recover "$F"
	echo "$output"
	[[ "$output" == *"left alone"* ]]
	run "$DIOSHIM" gc
	echo "$output"
	[[ "$output" == *"in use"* ]]
	[ "$(real_size "$F")" -eq "$before" ]
	touch "$T/go"
	wait "$BG"
	BG= WPID=
	noshim "$HELPERS/t_verify" -S $((800 * 4096)) "$F" "$T/l"
	assert_no_segment "$F"
}

@test "a writer killed in another pid namespace: dioshim recover cuts its tail to the data" {
	writer_in_namespace
	kill -9 "$WPID"
	wait "$BG" || true
	BG= WPID=
	[ "$(real_size "$F")" -gt $((50 * 4096)) ]
	run "$DIOSHIM" recover "$F"
	echo "$output"
	[[ "$output" != *"left alone"* ]]
	ends_at_data "$F" 50
}

@test "a writer killed in another pid namespace: dioshim gc cuts its tail and removes its segment" {
	writer_in_namespace
	kill -9 "$WPID"
	wait "$BG" || true
	BG= WPID=
	run "$DIOSHIM" gc
	echo "$output"
	[[ "$output" != *"in use"* ]]
	ends_at_data "$F" 50
	assert_no_segment "$F"
}

@test "a writer killed in another pid namespace: the next writer here appends after its data, and the last close cuts the tail" {
	writer_in_namespace
	kill -9 "$WPID"
	wait "$BG" || true
	BG= WPID=
	run timeout 120 "$DIOSHIM" "$HELPERS/t_appender" -t 1 -n 20 -w 9 \
		-l "$T/l2" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	ends_at_data "$F" 70
	assert_no_segment "$F"
}

# A program in a pid namespace of its own that closes its file with
# writes in flight and takes their completions from the ring itself
# (ringreap, async.bats): the copy the shim keeps of its descriptor and
# the cut at the last completion work there as here.
@test "a close with writes in flight in another pid namespace (aio, io_uring): the kernel's size and bytes, no tail, no xattr, no segment" {
	local kind
	for kind in aio uring; do
		noshim "$HELPERS/ringreap" "$kind" "$F.k" 96 inflight
		run unshare --pid --fork --mount-proc -- "$DIOSHIM" \
			"$HELPERS/ringreap" "$kind" "$F" 96 inflight
		echo "$output"
		[ "$status" -eq 0 ]
		[ "$(real_size "$F")" -eq $((96 * 65536)) ]
		noshim cmp "$F" "$F.k"
		run noshim getfattr -n user.dioshim.eof "$F"
		[ "$status" -ne 0 ]
		assert_no_segment "$F"
		rm -f "$F" "$F.k"
	done
}

# maker_in_namespace TAG DELAY_US WRITER: a lone appender (one thread, so
# the same thread number in every namespace) in a pid namespace of its
# own, held DELAY_US at its first link (its segment's, the hints being
# made) between making the segment and publishing it.
maker_in_namespace() {
	unshare --pid --fork --mount-proc -- strace -f -qq -o /dev/null \
		-e inject=linkat:delay_enter="$2":when=1 \
		"$DIOSHIM" "$HELPERS/t_appender" -t 1 -n 100 -w "$3" \
		-l "$T/l.$1" "$F" >"$T/out.$1" 2>&1
}

@test "two makers of one file's segment in two pid namespaces, with the same thread number, both between making and publishing it: one segment for both, every record of each in place, the size exact" {
	command -v strace >/dev/null || skip "strace missing"
	export DIOSHIM_ENGAGE=always
	# The hints exist: the makers' first link is the segment's.
	shim dd if=/dev/zero of="$F.warm" bs=4k count=1 oflag=direct status=none
	: >"$F"
	maker_in_namespace a 2000000 0 &
	local a=$!
	sleep 0.5
	maker_in_namespace b 1000000 1 &
	local b=$!
	wait "$a"
	wait "$b"
	cat "$T/out.a" "$T/out.b"
	run noshim "$HELPERS/t_verify" -S $((200 * 4096)) "$F" "$T/l.a" "$T/l.b"
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$(grep "cannot create" "$T/log" 2>/dev/null)" ]
	assert_no_segment "$F"
	rm -f "$F.warm"
}
