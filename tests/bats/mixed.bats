#!/usr/bin/env bats
# fs: ext4 xfs
# One file used several ways at once: O_DIRECT and buffered descriptors in
# one process, children that fork, exec or posix_spawn and write through an
# inherited descriptor or their own, and closefrom/close_range in a process
# that goes on working.

load helper


setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/mixed.$BATS_TEST_NUMBER
}

@test "one process writing with O_DIRECT and reading through buffered descriptors (opened before and after): fstat, SEEK_END, pread and read() see the logical size, no zeros past it" {
	run shim "$HELPERS/t_mixed" dual "$F" 200
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == "ok checks=200 "* ]]
	# Not vacuous: the kernel's size was ahead while the checks ran.
	[[ "${lines[-1]}" != *" with-reservation=0" ]]
}

@test "one process writing with O_DIRECT and reading through buffered descriptors: after it exits the file has exactly the bytes written" {
	run shim "$HELPERS/t_mixed" dual "$F" 200
	[ "$status" -eq 0 ]
	echo "size after exit $(real_size "$F"), written 819200"
	[ "$(real_size "$F")" -eq 819200 ]
	run noshim "$APPENDBENCH" check -t 1 -n 200 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "one process writing with O_DIRECT and reading through a stdio stream: fseek(SEEK_END)/ftell and fread see the logical size" {
	# glibc's stdio reads and seeks through its internal entry points,
	# which no LD_PRELOAD library can interpose (README: "What dioshim
	# cannot see"); kept to show the limit, and for the day it is lifted.
	skip "stdio is not seen by the shim (documented limit)"
	run shim "$HELPERS/t_mixed" stdio "$F" 50
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == "ok checks=50 "* ]]
}

@test "a parent, a fork child, exec'd children on the inherited O_APPEND|O_DIRECT descriptor, an exec'd child reopening the file and a posix_spawn'd child append at once: every record once, size exact" {
	run shim "$HELPERS/t_mixed" spawn "$F" 300
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "ok size=$((7 * 300 * 4096))" ]
	[ "$(real_size "$F")" -eq $((7 * 300 * 4096)) ]
	run noshim "$APPENDBENCH" check -t 7 -n 300 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "close_range above the file, then closefrom(3) and close_range(3, ~0U) in a process that keeps appending: the reservation stays while open, each last close trims, every record once, size exact" {
	# Descriptor 3 is bats' own: the helper must not inherit it.
	run shim "$HELPERS/t_mixed" closefrom "$F" 200 3>&-
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = ok ]
	[ "$(real_size "$F")" -eq $((4 * 200 * 4096)) ]
	run noshim "$APPENDBENCH" check -t 1 -n 800 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}
