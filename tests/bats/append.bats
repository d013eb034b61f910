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

@test "appends the kernel refuses, racing good ones, leave no trace: no hole, exact size (kernel alone as control)" {
	local n=1500 out
	# The control: the kernel alone refuses the misaligned appends and
	# the good ones follow each other with no gap.
	out=$(noshim "$HELPERS/badappend" $n "$F.klog" "$F.k")
	echo "kernel: $out"
	[[ "$out" == "good=$n refused="* ]]
	[[ "$out" != *"refused=0 "* ]]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F.k" "$F.klog"
	echo "$output"
	[ "$status" -eq 0 ]
	out=$(shim "$HELPERS/badappend" $n "$F.log" "$F")
	echo "dioshim: $out"
	[[ "$out" == "good=$n refused="* ]]
	[[ "$out" != *"refused=0 "* ]]
	[ "$(real_size "$F")" -eq $((n * 4096)) ]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$F.log"
	echo "$output"
	[ "$status" -eq 0 ]
	rm -f "$F" "$F.k" "$F.log" "$F.klog"
}
