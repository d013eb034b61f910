#!/usr/bin/env bats
# fs: ext4 xfs
# Unmodified tools writing one file with O_DIRECT under the shim: dd from
# several processes (disjoint regions, and O_APPEND), fio's psync, pvsync
# and pvsync2 engines with verification, and sysbench fileio.  Sizes are
# chosen off the 1 MiB reservation grid, so an untrimmed reservation shows
# as a wrong size; files are checked outside the shim.

load helper


setup_file() {
	fs_setup_file "${FS:-ext4}" 1G
	# Four 250-block fill patterns, bytes 41..44, off the filesystem.
	local i
	for i in 0 1 2 3; do
		head -c $((250 * 4096)) /dev/zero |
			tr '\0' "\\$(printf '%03o' $((0x41 + i)))" >"$BATS_FILE_TMPDIR/pat$i"
	done
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/tools.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	P=$BATS_FILE_TMPDIR
}

# Block counts per fill byte: "COUNT BYTE" lines, sorted by byte.
block_census() {
	noshim "$HELPERS/t_blocks" "$1" | sort | uniq -c | awk '{ print $1, $2 }'
}

need() {
	command -v "$1" >/dev/null || skip "$1 is not installed"
}

@test "dd oflag=direct conv=notrunc from 4 processes writing disjoint regions in parallel: every block in place, size exact" {
	local i pids=()
	for i in 3 1 0 2; do
		shim dd if="$P/pat$i" of="$F" bs=4096 seek=$((i * 250)) \
			oflag=direct conv=notrunc status=none &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	[ "$(real_size "$F")" -eq $((1000 * 4096)) ]
	# Block b holds pattern b / 250, whatever order the writers ran in.
	noshim "$HELPERS/t_blocks" "$F" | awk '
		{ want = sprintf("%02x", 65 + int((NR - 1) / 250)) }
		$1 != want { print "block " NR - 1 ": " $1 ", want " want; bad = 1 }
		END { exit bad || NR != 1000 }'
	assert_no_segment "$F"
}

@test "dd oflag=direct,append conv=notrunc from 4 processes in parallel: every block present exactly once, untorn, size the sum" {
	local i pids=()
	: >"$F"
	for i in 0 1 2 3; do
		shim dd if="$P/pat$i" of="$F" bs=4096 oflag=direct,append \
			conv=notrunc status=none &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	run block_census "$F"
	echo "$output"
	[ "$output" = "$(printf '250 41\n250 42\n250 43\n250 44')" ]
	[ "$(real_size "$F")" -eq $((1000 * 4096)) ]
	assert_no_segment "$F"
}

@test "control: the same parallel dd appends without the shim (ext4 keeps every block; XFS loses some, which is why the shim exists)" {
	local i pids=()
	: >"$F"
	for i in 0 1 2 3; do
		noshim dd if="$P/pat$i" of="$F" bs=4096 oflag=direct,append \
			conv=notrunc status=none &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	run block_census "$F"
	echo "$output"
	if [ "$FS_TYPE" = xfs ]; then
		echo "# xfs without the shim: size $(real_size "$F") of $((1000 * 4096)); blocks: ${output//$'\n'/, }" >&3
	else
		[ "$output" = "$(printf '250 41\n250 42\n250 43\n250 44')" ]
	fi
}

# fio, 4 jobs each writing its own 3100 KiB region of one new file with
# O_DIRECT and verifying it (crc32c) after; fio's jobs end in _exit.
fio_regions() {
	need fio
	# fio leaves state files in its working directory.
	cd "$T"
	run timeout 300 "$DIOSHIM" fio --name=regions --filename="$F" --direct=1 \
		--bs=4k --size=3100k --numjobs=4 --offset_increment=3100k \
		--verify=crc32c --verify_state_save=0 --group_reporting "$@"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"err= 0"* ]]
	[[ "$output" != *"verify: bad"* ]]
	[ "$(real_size "$F")" -eq $((4 * 3100 * 1024)) ]
	assert_no_segment "$F"
}

@test "fio psync, 4 jobs writing regions of a new file with --direct=1 --verify=crc32c: exit 0, verify passes, exact size after fio exits" {
	fio_regions --ioengine=psync --rw=write --fallocate=none
}

@test "fio pvsync, 4 jobs writing regions of a new file with --direct=1 --verify=crc32c: exit 0, verify passes, exact size after fio exits" {
	fio_regions --ioengine=pvsync --rw=write --fallocate=none
}

@test "fio pvsync2, 4 jobs writing regions of a new file with --direct=1 --verify=crc32c: exit 0, verify passes, exact size after fio exits" {
	fio_regions --ioengine=pvsync2 --rw=write --fallocate=none
}

@test "fio psync randwrite into a preallocated file with --direct=1 --verify=crc32c: exit 0, verify passes, size unchanged" {
	noshim fallocate -l $((4 * 3100 * 1024)) "$F"
	fio_regions --ioengine=psync --rw=randwrite --fallocate=none
}

@test "fio pvsync2 randwrite into a sparse file with --direct=1 --verify=crc32c: exit 0, verify passes, exact size" {
	fio_regions --ioengine=pvsync2 --rw=randwrite --fallocate=none
}

@test "fio psync with fio's own preallocation (--fallocate=native) and --verify=crc32c: exit 0, verify passes, exact size" {
	fio_regions --ioengine=psync --rw=write --fallocate=native
}

# 65520 KiB: just under 64 MiB, off the reservation grid, 4095 16 KiB blocks.
SB_FILE="--file-num=1 --file-total-size=65520K --file-extra-flags=direct"

@test "sysbench fileio prepare with --file-extra-flags=direct under the shim: the file is exactly the size asked for" {
	need sysbench
	cd "$SCRATCH_MNT"
	mkdir "sb.$BATS_TEST_NUMBER" && cd "sb.$BATS_TEST_NUMBER"
	# shellcheck disable=SC2086
	run timeout 300 "$DIOSHIM" sysbench fileio $SB_FILE prepare
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size test_file.0)" -eq $((65520 * 1024)) ]
	# Every block was written (sysbench writes zeros): no hole.
	[ "$(noshim stat -c %b test_file.0)" -ge $((65520 * 2)) ]
	assert_no_segment test_file.0
}

@test "sysbench fileio prepare, then rndwr and seqrewr runs with 4 threads under the shim, then cleanup: exit 0, size unchanged throughout" {
	need sysbench
	cd "$SCRATCH_MNT"
	mkdir "sb.$BATS_TEST_NUMBER" && cd "sb.$BATS_TEST_NUMBER"
	# shellcheck disable=SC2086
	timeout 300 "$DIOSHIM" sysbench fileio $SB_FILE prepare >/dev/null
	[ "$(real_size test_file.0)" -eq $((65520 * 1024)) ]
	local mode
	for mode in rndwr seqrewr; do
		# shellcheck disable=SC2086
		run timeout 300 "$DIOSHIM" sysbench fileio $SB_FILE --threads=4 \
			--file-test-mode=$mode --time=0 --events=4000 run
		echo "$output"
		[ "$status" -eq 0 ]
		[[ "$output" == *"total number of events:              4000"* ]]
		[ "$(real_size test_file.0)" -eq $((65520 * 1024)) ]
		assert_no_segment test_file.0
	done
	# shellcheck disable=SC2086
	run shim sysbench fileio $SB_FILE cleanup
	[ "$status" -eq 0 ]
	[ ! -e test_file.0 ]
}
