#!/usr/bin/env bats
# fs: ext4 xfs
# Parallel appends: every record lands exactly once, sizes are exact under
# the shim and, after the last close, for tools outside it.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 2G; }
teardown_file() { fs_teardown_file; }
setup() { fs_require; F=$SCRATCH_MNT/append.$BATS_TEST_NUMBER; }

@test "threads appending at a shared offset counter: every record once, size exact" {
	run shim "$APPENDBENCH" run -m counter -t 8 -n 500 "$F"
	[ "$status" -eq 0 ]
	[[ "$output" == *"size=16384000 "* ]]
	[ "$(real_size "$F")" -eq 16384000 ]
	run noshim "$APPENDBENCH" check -t 8 -n 500 "$F"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "processes appending with O_APPEND: every record once, size exact" {
	run shim "$APPENDBENCH" run -m append -t 2 -p 4 -n 300 "$F"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((8 * 300 * 4096)) ]
	run noshim "$APPENDBENCH" check -t 2 -p 4 -n 300 "$F"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "O_APPEND appenders: a size read while they run never covers an append in flight" {
	run timeout 120 "$DIOSHIM" "$HELPERS/appendwatch" "$F" 8 400
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((8 * 400 * 4096)) ]
}

# refused_racing MODE: badappend's refused appends (MODE: write, aio,
# uring, signal) racing good ones leave no trace, under the shim as with
# the kernel alone (the control): no hole, exact size.
refused_racing() {
	local n=1500 out
	out=$(noshim "$HELPERS/badappend" $n "$F.klog" "$F.k" "$1")
	echo "kernel: $out"
	[[ "$out" == "good=$n refused="* ]]
	[[ "$out" != *"refused=0 "* ]]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F.k" "$F.klog"
	echo "$output"
	[ "$status" -eq 0 ]
	out=$(shim "$HELPERS/badappend" $n "$F.log" "$F" "$1")
	echo "dioshim: $out"
	[[ "$out" == "good=$n refused="* ]]
	[[ "$out" != *"refused=0 "* ]]
	[ "$(real_size "$F")" -eq $((n * 4096)) ]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$F.log"
	echo "$output"
	[ "$status" -eq 0 ]
	rm -f "$F" "$F.k" "$F.log" "$F.klog"
}

@test "appends the kernel refuses, racing good ones, leave no trace: no hole, exact size (kernel alone as control)" {
	refused_racing write
}

@test "queued appends the kernel refuses (libaio, io_uring), racing good ones, leave no trace" {
	refused_racing aio
	refused_racing uring
}

@test "appends the kernel refuses from a signal handler that interrupted the shim leave no trace" {
	refused_racing signal
}

@test "a slow append (in flight 3 s) holds back the size and the append behind it, as ext4's kernel alone does (issue 11, case 2)" {
	run noshim "$HELPERS/slowappend" "$F.k"
	[ "$status" -ne 3 ] || skip "$output"
	echo "kernel: $output"
	# ext4 alone runs O_APPEND writes one at a time; XFS alone lets the
	# second land on the first's offset, which is no control.
	[ "$FS_TYPE" != ext4 ] ||
		[[ "$output" == *"second_off=1048576 "*"covered=0 size=1052672" ]]
	run shim "$HELPERS/slowappend" "$F"
	echo "dioshim: $output"
	[ "$status" -eq 0 ]
	[[ "$output" == "first_off=0 second_off=1048576 "*"covered=0 size=1052672" ]]
	# The second returned only once the first had.
	awk -v o="$output" 'BEGIN {
		match(o, /first=[0-9.]+/); f = substr(o, RSTART + 6, RLENGTH - 6)
		match(o, /second=[0-9.]+/); s = substr(o, RSTART + 7, RLENGTH - 7)
		exit !(f >= 2.9 && s >= f - 0.01) }'
	[ "$(real_size "$F")" -eq 1052672 ]
}
