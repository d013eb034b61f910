#!/usr/bin/env bats
# fs: ext4 xfs
# Hole prefill: random writes into sparse files read back exactly, sizes
# never change, a punched hole is written again, allocation grows in
# whole chunks where prefill is on (ext4 by default), ENOSPC while
# prefilling loses nothing.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/sparse.$BATS_TEST_NUMBER
	cd "$BATS_TEST_TMPDIR"
}

# fio_sparse shim|noshim [FIO ARGS...]: 4 processes, each random-writing
# and verifying a 32M region of its own in a 128M sparse file.
fio_sparse() {
	local launcher=$1
	shift
	"$launcher" fio --name=holes --filename="$F" --rw=randwrite --bs=4k \
		--direct=1 --ioengine=psync --numjobs=4 --size=32M \
		--offset_increment=32M --fallocate=none --verify=crc32c \
		--do_verify=1 --randrepeat=0 --group_reporting "$@"
}

@test "4 fio processes random-writing a sparse file verify their data, also read back outside the shim; the size never changes" {
	truncate -s 128M "$F"
	run fio_sparse shim
	echo "$output" | tail -5
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((128 << 20)) ]
	run fio_sparse noshim --verify_only
	echo "$output" | tail -3
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "random writes with punched holes written again read back exactly, under the shim and outside it" {
	run shim "$HELPERS/holes" "$F" $((64 << 20)) 20000 punch
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"size=$((64 << 20))"* ]]
}

@test "allocation grows in whole chunks where prefill is on, and not where it is off" {
	local du_on du_off
	# Three blocks, far apart, in a 64M sparse file.
	run shim "$HELPERS/holes" "$F" $((64 << 20)) 3
	[ "$status" -eq 0 ]
	du_on=$(du -k "$F" | cut -f1)
	rm -f "$F"
	run env DIOSHIM_PREFILL=off "$DIOSHIM" "$HELPERS/holes" "$F" $((64 << 20)) 3
	[ "$status" -eq 0 ]
	du_off=$(du -k "$F" | cut -f1)
	echo "du with prefill on: ${du_on}k, off: ${du_off}k"
	[ "$du_off" -le 64 ]
	if [ "$FS_TYPE" = ext4 ]; then
		# auto means on for ext4: 3 chunks of 1 MiB.
		[ "$du_on" -ge 3072 ] && [ "$du_on" -le 4096 ]
	else
		# auto means off for XFS: it fills holes in parallel itself.
		[ "$du_on" -le 64 ]
	fi
}

@test "DIOSHIM_PREFILL_CHUNK sets the chunk" {
	run env DIOSHIM_PREFILL=on DIOSHIM_PREFILL_CHUNK=256k \
		"$DIOSHIM" "$HELPERS/holes" "$F" $((64 << 20)) 3
	[ "$status" -eq 0 ]
	local du
	du=$(du -k "$F" | cut -f1)
	echo "du ${du}k"
	[ "$du" -ge 768 ] && [ "$du" -le 1024 ]
}

@test "a filesystem almost full: prefill fails, the writes still land; nothing written is lost" {
	local free
	# Leave about 8 MiB free, then write a 512M sparse file at random.
	free=$(df -B1 --output=avail "$SCRATCH_MNT" | tail -1)
	fallocate -l $((free - (8 << 20))) "$SCRATCH_MNT/filler"
	run env DIOSHIM_PREFILL=on "$DIOSHIM" "$HELPERS/holes" "$F" $((512 << 20)) 100000
	echo "$output"
	rm -f "$SCRATCH_MNT/filler"
	[ "$status" -eq 0 ]
	[[ "$output" == *"enospc=1"* ]]
}

# fallocates_keep_size FILE: the offsets of the fallocate(KEEP_SIZE) calls
# an strace log shows, one per line.
fallocates_keep_size() {
	grep 'fallocate(.*FALLOC_FL_KEEP_SIZE' "$1" | sed 's/.*KEEP_SIZE, \([0-9]*\),.*/\1/'
}

# overlapping_fills TRACE: the KEEP_SIZE fallocates of TRACE that allocate
# a byte another one allocated too (a chunk the kernel's size cut is
# filled up to it, and later on from there: never twice over).
overlapping_fills() {
	grep 'fallocate(.*FALLOC_FL_KEEP_SIZE' "$1" |
		sed 's/.*KEEP_SIZE, \([0-9]*\), \([0-9]*\).*/\1 \2/' | sort -n |
		awk '$1 < end { print } $1 + $2 > end { end = $1 + $2 }'
}

# racing_writers FILE: 8 threads of 4 KiB random direct writes into FILE's
# first 64 MiB under the shim (prefill on, XFS too), traced for fallocate.
racing_writers() {
	DIOSHIM_PREFILL=on strace -f -qq -e trace=fallocate -o "$BATS_TEST_TMPDIR/st" \
		"$DIOSHIM" fio --name=race --filename="$1" --rw=randwrite --bs=4k \
		--direct=1 --ioengine=psync --thread --numjobs=8 --size=64M \
		--number_ios=400 --fallocate=none --randrepeat=0 \
		--group_reporting >/dev/null
}

@test "racing writers prefill each chunk once; a preallocated or written file is not prefilled at all" {
	command -v strace >/dev/null || skip "strace is not installed"
	racing_writers "$F"
	echo "sparse: $(fallocates_keep_size "$BATS_TEST_TMPDIR/st" | wc -l) prefills"
	[ "$(fallocates_keep_size "$BATS_TEST_TMPDIR/st" | wc -l)" -gt 0 ]
	overlapping_fills "$BATS_TEST_TMPDIR/st"
	[ -z "$(overlapping_fills "$BATS_TEST_TMPDIR/st")" ]

	# Allocated by the kernel alone beforehand: unwritten, then written.
	rm -f "$F"
	fallocate -l 64M "$F"
	racing_writers "$F"
	echo "preallocated: $(fallocates_keep_size "$BATS_TEST_TMPDIR/st" | wc -l) prefills"
	[ -z "$(fallocates_keep_size "$BATS_TEST_TMPDIR/st")" ]
	rm -f "$F"
	dd if=/dev/zero of="$F" bs=1M count=64 oflag=direct status=none
	racing_writers "$F"
	echo "written: $(fallocates_keep_size "$BATS_TEST_TMPDIR/st" | wc -l) prefills"
	[ -z "$(fallocates_keep_size "$BATS_TEST_TMPDIR/st")" ]
}
