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

@test "descriptions opened buffered before any O_DIRECT writer (a dup, a reader, a fork child's): once a segment stands, fstat and SEEK_END say the logical size, F_SETFL moves both dups, and their appends beside the child's lose nothing" {
	# Under the shim these descriptions are quiet (nothing kept for
	# them) until the child's segment appears: the first call wakes each.
	# A place of its own: no segment anywhere when they are opened.
	local side sides=shim want said
	DIOSHIM_SHM_DIR=$(mktemp -d "$DIOSHIM_SHM_DIR/quiet.XXXXXX")
	# The control where the kernel alone keeps concurrent O_DIRECT
	# appends: XFS alone loses some (the problem dioshim solves).
	[ "$FS_TYPE" = xfs ] || sides="kernel shim"
	for side in $sides; do
		if [ $side = kernel ]; then
			run noshim "$HELPERS/t_mixed" quiet "$F.$side" 200
		else
			run shim "$HELPERS/t_mixed" quiet "$F.$side" 200
		fi
		echo "$side: $output"
		[ "$status" -eq 0 ]
		said=${lines[-1]}
		want=$((300 * 4096))
		echo "$side: size $(real_size "$F.$side"), written $want"
		[ "$(real_size "$F.$side")" -eq "$want" ]
		run noshim "$APPENDBENCH" check -t 3 -n 100 "$F.$side"
		echo "$output"
		[ "$status" -eq 0 ]
	done
	# Not vacuous: the kernel's size was ahead while the checks ran.
	[[ "$said" == *" with-reservation=1" ]]
	assert_no_segment "$F.shim"
}

@test "a number closed and opened again for another file (signal handler, other thread) while the program dups it: the new file's appends land at its end, as with the kernel alone" {
	# The descriptions are quiet; a dup wakes one.  A wake must not put
	# the old file's books on the number the new file took meanwhile.
	DIOSHIM_SHM_DIR=$(mktemp -d "$DIOSHIM_SHM_DIR/race.XXXXXX")
	mkdir -p "$F.kernel" "$F.shim"
	run noshim "$HELPERS/quietrace" "$F.kernel" 1000
	echo "kernel: $output"
	[ "$status" -eq 0 ]
	run shim "$HELPERS/quietrace" "$F.shim" 1000
	echo "shim: $output"
	[ "$status" -eq 0 ]
	[ "$output" = "rounds=1000 size=8192000" ]
	assert_no_segment "$F.shim/b"
}

@test "one process writing with O_DIRECT and reading through a stdio stream: fseek(SEEK_END)/ftell and fread see the logical size" {
	# glibc's stdio reads and seeks through its internal entry points,
	# which no LD_PRELOAD library can interpose (dioshim(7): "WHAT DIOSHIM
	# CANNOT SEE"); kept to show the limit, and for the day it is lifted.
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
