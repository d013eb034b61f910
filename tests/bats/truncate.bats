#!/usr/bin/env bats
# fs: ext4 xfs
# Size changes racing shimmed appenders: ftruncate from a thread of the
# writing process, truncate(2) and truncate(1) from other processes, and an
# O_TRUNC open.  t_appender logs where every acknowledged record went and
# whether its write was before or after the truncate; t_verify (outside the
# shim) then proves that no record written before a truncate survives past
# its length, that every record written after it is in place, untorn and
# once, and that the size is exactly the truncate's length plus what was
# appended after it.

load helper


setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/trunc.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	BG=
}
teardown() {
	reap_bg "$T/go" "$T/pre" "$T/mark"
}


seg_eof() {
	"$DIOSHIM" status "$1" | awk '$2 == "eof" { print $3 }'
}

field() { sed -n "s/.*$1=\\([0-9]*\\).*/\\1/p" <<<"$2"; }

@test "ftruncate shrinking and growing 6 times while 4 threads append: no record survives past a truncate, every later record in place, size exact" {
	run shim "$HELPERS/t_appender" -t 4 -n 500 -T 6 -c -l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field truncates "$output")" -eq 6 ]
	local size
	size=$(field size "$output")
	[ "$(real_size "$F")" -eq "$size" ]
	grep '^T' "$T/log"
	run noshim "$HELPERS/t_verify" -z -S "$size" "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "control: the same ftruncate race without the shim passes the same checks on ext4 (on XFS the kernel itself loses O_APPEND writes)" {
	run noshim "$HELPERS/t_appender" -t 4 -n 500 -T 6 -c -l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	run noshim "$HELPERS/t_verify" -z "$F" "$T/log"
	echo "$output"
	if [ "$FS_TYPE" = xfs ]; then
		echo "# xfs without the shim: ${lines[-1]}" >&3
	else
		[ "$status" -eq 0 ]
	fi
}

@test "ftruncate down and up with a reservation standing: every answer, the size and the contents as with the kernel alone" {
	local ops=(w 0 64K x41 kernel trunc 128K size end r 0 1M w 128K 4K x42
		size trunc 32K size end r 0 1M trunc 2M size end w 2M 4K x43 size
		kernel ptrunc 100 size end stat r 0 1M)
	shim "$HELPERS/t_fops" -d -c "$F.shim" "${ops[@]}" >"$T/shim"
	DIOSHIM_DISABLE=1 shim "$HELPERS/t_fops" -d -c "$F.kernel" "${ops[@]}" >"$T/kernel"
	cat "$T/shim"
	diff -u <(grep -v '^kernel' "$T/kernel") <(grep -v '^kernel' "$T/shim")
	# A reservation stood: the kernel's size was ahead of the logical one.
	[ "$(awk '$1 == "kernel" { print $3; exit }' "$T/shim")" -gt 65536 ]
	[ "$(real_size "$F.shim")" -eq 100 ]
	cmp "$F.shim" "$F.kernel"
	assert_no_segment "$F.shim"
}

verify_truncated() {
	local size
	size=$(field size "$(cat "$T/out")")
	echo "truncated to $TRUNC_LEN; the writer saw size $size"
	[ "$(real_size "$F")" -eq "$size" ]
	# Records written after the truncate exist (the check is not vacuous).
	[ "$(awk '$1 == "R" && $5 == 1' "$T/log" | wc -l)" -ge 400 ]
	run noshim "$HELPERS/t_verify" -x "$TRUNC_LEN" -S "$size" "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "truncate(2) of the path by another shimmed process while 4 threads append: no record survives past it, every later record in place, size exact" {
	shim "$HELPERS/t_appender" -t 4 -n 20000 -c -r "400:$T/ready" \
		-m "$T/pre:$T/mark" -k 100 -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	TRUNC_LEN=$(seg_eof "$F")
	TRUNC_LEN=$((TRUNC_LEN / 2 / 4096 * 4096))
	touch "$T/pre"
	run shim "$HELPERS/t_fops" -n "$F" ptrunc "$TRUNC_LEN"
	touch "$T/mark"
	[ "$output" = "ptrunc $TRUNC_LEN = 0" ]
	wait "$BG"
	BG=
	cat "$T/out"
	verify_truncated
}

@test "coreutils truncate -s under the shim while 4 threads append: no record survives past it, every later record in place, size exact" {
	shim "$HELPERS/t_appender" -t 4 -n 20000 -c -r "400:$T/ready" \
		-m "$T/pre:$T/mark" -k 100 -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	TRUNC_LEN=$(seg_eof "$F")
	TRUNC_LEN=$((TRUNC_LEN / 2 / 4096 * 4096))
	touch "$T/pre"
	shim truncate -s "$TRUNC_LEN" "$F"
	touch "$T/mark"
	wait "$BG"
	BG=
	cat "$T/out"
	verify_truncated
}

@test "open(O_TRUNC|O_DIRECT) by another shimmed process while 4 threads append: nothing from before survives, every later record in place, size exact" {
	shim "$HELPERS/t_appender" -t 4 -n 20000 -c -r "400:$T/ready" \
		-m "$T/pre:$T/mark" -k 100 -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	TRUNC_LEN=0
	touch "$T/pre"
	shim "$HELPERS/t_fops" -d -t "$F"
	touch "$T/mark"
	wait "$BG"
	BG=
	cat "$T/out"
	verify_truncated
}

@test "a shell's '>' redirection (buffered O_TRUNC) under the shim while 4 threads append: nothing from before survives, every later record in place, size exact" {
	shim "$HELPERS/t_appender" -t 4 -n 20000 -c -r "400:$T/ready" \
		-m "$T/pre:$T/mark" -k 100 -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	TRUNC_LEN=0
	touch "$T/pre"
	# shellcheck disable=SC2016
	shim sh -c ': >"$1"' sh "$F"
	touch "$T/mark"
	wait "$BG"
	BG=
	cat "$T/out"
	verify_truncated
}

# A writer that pauses after 200 records (819200 bytes) with its
# reservation standing, lets truncate(1) change the size relative to what
# it sees, then appends 200 more.
relative_truncate() {
	shim "$HELPERS/t_appender" -t 4 -n 100 -c -p "200:$T/ready:$T/go" \
		-m "$T/pre:$T/mark" -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	# The kernel's size is the reservation: a size computed from it
	# would be wrong.
	[ "$(real_size "$F")" -gt 819200 ]
	touch "$T/pre"
	shim truncate -s "$1" "$F"
	touch "$T/mark" "$T/go"
	wait "$BG"
	BG=
	cat "$T/out"
}

@test "coreutils truncate -s +64K under the shim grows from the logical size while a writer holds a reservation" {
	relative_truncate +64K
	[ "$(real_size "$F")" -eq $((819200 + 65536 + 819200)) ]
	run noshim "$HELPERS/t_verify" -z -x $((819200 + 65536)) -S $((819200 + 65536 + 819200)) "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" zeros=16 "* ]]
	assert_no_segment "$F"
}

@test "coreutils truncate -s -64K under the shim shrinks from the logical size while a writer holds a reservation" {
	relative_truncate -64K
	[ "$(real_size "$F")" -eq $((819200 - 65536 + 819200)) ]
	run noshim "$HELPERS/t_verify" -x $((819200 - 65536)) -S $((819200 - 65536 + 819200)) "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "control: a truncate from outside the shim while shimmed threads append is not coordinated (all writers must be shimmed): the checks above catch it" {
	shim "$HELPERS/t_appender" -t 4 -n 20000 -c -r "400:$T/ready" \
		-m "$T/pre:$T/mark" -k 100 -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	TRUNC_LEN=$(seg_eof "$F")
	TRUNC_LEN=$((TRUNC_LEN / 2 / 4096 * 4096))
	touch "$T/pre"
	noshim truncate -s "$TRUNC_LEN" "$F"
	touch "$T/mark"
	wait "$BG"
	BG=
	run noshim "$HELPERS/t_verify" -x "$TRUNC_LEN" "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 1 ]
}
