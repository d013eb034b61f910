#!/usr/bin/env bats
# fs: ext4 xfs
# Recovery exactness (issue 10, cases 7-9).  After a kill -9 or a power
# cut the size is the last one the program made durable, or larger only
# by data it wrote past it: never rounded up to a block, never below what
# fsync acknowledged; a size change cut short by a kill -9 leaves no hole
# for the next append; data past the record is found from the extent map,
# whatever a program outside the shim left in the page cache.  The kernel
# alone, run beside the shim on the same filesystem, is the control.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 512M; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	F=$SCRATCH_MNT/rec.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	PIDS=()
}
teardown() { kill_writers; }


# A power cut: the filesystem goes down without flushing its log, the
# shared segments go with the machine; then it comes back.
power_cut_and_back() {
	xfs_io -x -c shutdown "$SCRATCH_MNT"
	kill_writers
	rm -f "$DIOSHIM_SHM_DIR"/dioshim.*
	scratch_remount
}

# Keep FILE's pages cached and mapped by a process outside the shim.
hold_mapped() {
	rm -f "$T/mapped"
	env -u LD_PRELOAD "$HELPERS/holdmap" "$1" "$T/mapped" 3>&- &
	PIDS+=($!)
	wait_file "$T/mapped"
}

# recover FILE by ROUTE: "command" (dioshim recover) or "open" (the first
# shimmed open, by a process that appends nothing).
recover_by() {
	if [ "$1" = command ]; then
		run "$DIOSHIM" recover "$2"
		echo "$output"
		[ "$status" -eq 0 ]
	else
		run "$DIOSHIM" "$HELPERS/openclose" "$2"
		[ "$status" -eq 0 ]
	fi
}

# ---- case 7: kill -9 inside ftruncate -----------------------------------

@test "kill -9 inside ftruncate after the kernel cut the file: a live writer's next append lands at the new size, no hole, every round" {
	run noshim "$HELPERS/killtrunc" -t -a -r 20 "$F.kernel"
	echo "kernel alone: $output"
	[ "$status" -eq 0 ]
	DIOSHIM_LOG=$T/log DIOSHIM_RESERVE=64k run shim "$HELPERS/killtrunc" -t -a -r 30 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	# Every round, the child died with the kernel's size cut and the
	# words not: each time a live user took over and recomputed them.
	grep -c "cut short" "$T/log"
	[ "$(grep -c 'cut short' "$T/log")" -eq 30 ]
	[ "$(real_size "$F")" -eq "$(sed -n 's/.*size \([0-9]*\).*/\1/p' <<<"$output")" ]
	assert_no_segment "$F"
}

@test "kill -9 inside ftruncate, every writer gone: the first user after them appends at the new size" {
	run noshim "$HELPERS/killtrunc" -t -r 10 "$F.kernel"
	[ "$status" -eq 0 ]
	DIOSHIM_RESERVE=64k run shim "$HELPERS/killtrunc" -t -r 20 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "kill -9 at random moments of appends and truncates: nothing hangs, the next append lands at the size" {
	run noshim "$HELPERS/killtrunc" -a -r 30 "$F.kernel"
	[ "$status" -eq 0 ]
	DIOSHIM_LOG=$T/log DIOSHIM_RESERVE=64k run shim "$HELPERS/killtrunc" -a -r 60 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "# takeovers after a size change cut short: $(grep -c 'cut short' "$T/log")" >&3
	DIOSHIM_RESERVE=64k run shim "$HELPERS/killtrunc" -r 30 "$F.2"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
	assert_no_segment "$F.2"
}

# ---- case 8: sizes after kill -9 and power cuts --------------------------

# Run OPS under the shim and outside it, kill -9 both, recover by ROUTE;
# both files must then have size EXPECT.
kill_and_compare() {
	local route=$1 expect=$2
	shift 2
	start_writer shim "$F" "$@"
	start_writer noshim "$F.kernel" "$@"
	kill_writers
	recover_by "$route" "$F"
	echo "shim: $(real_size "$F"), kernel alone: $(real_size "$F.kernel"), expected $expect"
	[ "$(real_size "$F.kernel")" -eq "$expect" ]
	[ "$(real_size "$F")" -eq "$expect" ]
	cmp "$F" "$F.kernel"
	assert_no_segment "$F"
}

@test "three 512-byte O_DIRECT appends and an fsync, kill -9: 1536 after dioshim recover, as with the kernel alone" {
	kill_and_compare command 1536 a 512 a 512 a 512 fsync
}

@test "three 512-byte O_DIRECT appends and an fsync, kill -9: 1536 after the first shimmed open" {
	kill_and_compare open 1536 a 512 a 512 a 512 fsync
}

@test "512-byte appends after the last fsync, kill -9: the size they reached, not the end of their block" {
	kill_and_compare command 2560 a 512 a 512 fsync a 512 a 512 a 512
}

@test "64 KiB written, the last 32 KiB punched, fsync, kill -9: 65536, as with the kernel alone" {
	kill_and_compare command 65536 a 64K punch 32K 32K fsync
}

@test "64 KiB written, the last 16 KiB zeroed (ZERO_RANGE), fdatasync, kill -9: 65536" {
	kill_and_compare open 65536 a 64K zero 48K 16K fdatasync
}

@test "4 KiB written, the size grown to 1 MiB by fallocate and not synced, kill -9: 1 MiB after the first shimmed open, as with the kernel alone (issue 28, case 9)" {
	kill_and_compare open 1048576 a 4K grow 1M
}

@test "the same growth, kill -9, dioshim recover: 1 MiB, as with the kernel alone" {
	kill_and_compare command 1048576 a 4K grow 1M
}

@test "the same growth synced, then grown again unsynced, kill -9: the last size, as with the kernel alone" {
	kill_and_compare open 2097152 a 4K grow 1M fdatasync grow 2M
}

@test "a power cut that leaves the killed writers' segment in place: its words are not the disk's, the size is the synced one" {
	start_writer shim "$F" a 4K fsync grow 1M
	xfs_io -x -c shutdown "$SCRATCH_MNT"
	kill_writers
	# The segment stays (a filesystem that went down and came back
	# without a reboot): a new mount, not the one its words were of.
	scratch_remount
	recover_by open "$F"
	echo "shim: $(real_size "$F") (synced $(synced "$F"))"
	[ "$(real_size "$F")" -eq "$(synced "$F")" ]
}

# Run OPS under the shim and outside it, cut the power, recover; both
# files must have the size the last sync acknowledged.
cut_and_compare() {
	start_writer shim "$F" "$@"
	start_writer noshim "$F.kernel" "$@"
	power_cut_and_back
	run "$DIOSHIM" recover "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "shim: $(real_size "$F") (synced $(synced "$F")), kernel alone: $(real_size "$F.kernel") (synced $(synced "$F.kernel"))"
	[ "$(real_size "$F.kernel")" -eq "$(synced "$F.kernel")" ]
	[ "$(real_size "$F")" -eq "$(synced "$F")" ]
	cmp "$F" "$F.kernel"
}

@test "power cut after 512-byte appends and fsync: the size fsync acknowledged, not rounded up to the block" {
	cut_and_compare a 4096 a 512 a 512 a 512 fsync
}

@test "power cut after 512-byte appends, each fsynced, up to a block's end: every one, 4096 (the record inside a block is rewritten)" {
	cut_and_compare a 512 fsync a 512 fsync a 512 fsync a 512 fsync \
		a 512 fsync a 512 fsync a 512 fsync a 512 fsync
}

@test "power cut after a 512-byte append and a 3584-byte one, each synced: 4096" {
	cut_and_compare a 512 fsync a 3584 fdatasync
}

@test "power cut after 512-byte appends and fdatasync, with the journal committed before it: the size fdatasync acknowledged" {
	# The appends are committed by the journal on its own first; the
	# record is then the only change left for the sync, which ext4's
	# fdatasync alone would leave behind.
	cut_and_compare a 512 a 512 a 512 sleep 6 fdatasync
}

@test "power cut after a punch of the tail and fdatasync: never below what the sync acknowledged" {
	cut_and_compare a 64K punch 32K 32K fdatasync
}

# ---- case 9: data past the record from the extent map --------------------

# A writer under the shim wrote 32 KiB and was killed with its reserved
# tail standing (segprobe a).
crashed_with_tail() {
	( "$DIOSHIM" "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	[ "$(real_size "$F")" -gt 32768 ]
}

@test "dioshim recover while a program outside the shim has the reserved tail cached and mapped: cut to the data" {
	crashed_with_tail
	noshim cat "$F" >/dev/null
	hold_mapped "$F"
	recover_by command "$F"
	[ "$(real_size "$F")" -eq 32768 ]
}

@test "the first shimmed open recovers to the data while the tail is cached and mapped outside the shim" {
	crashed_with_tail
	hold_mapped "$F"
	recover_by open "$F"
	[ "$(real_size "$F")" -eq 32768 ]
	assert_no_segment "$F"
}

@test "the last close cuts the reserved tail that a program outside the shim read and keeps mapped" {
	"$DIOSHIM" "$HELPERS/t_fops" -d -c "$F" w 0 32K touch "$T/wrote" wait "$T/go" \
		>/dev/null 2>&1 3>&- &
	PIDS+=($!)
	wait_file "$T/wrote"
	[ "$(real_size "$F")" -gt 32768 ]
	hold_mapped "$F"
	touch "$T/go"
	wait "${PIDS[0]}"
	[ "$(real_size "$F")" -eq 32768 ]
	assert_no_segment "$F"
}

@test "power cut, then a buffered read of the whole file outside the shim: recovery cuts the whole reserved tail" {
	start_writer shim "$F" a 32K fsync
	[ "$(real_size "$F")" -gt 32768 ]
	power_cut_and_back
	noshim cat "$F" >/dev/null
	hold_mapped "$F"
	recover_by command "$F"
	[ "$(real_size "$F")" -eq 32768 ]
}

@test "a buffered write outside the shim into the reserved tail after a crash is data: recovery keeps it" {
	crashed_with_tail
	# Still dirty in the page cache, over an unwritten extent.
	noshim xfs_io -c "pwrite -S 0x55 40960 4096" "$F" >/dev/null
	recover_by command "$F"
	[ "$(real_size "$F")" -eq 45056 ]
	cmp <(noshim dd if="$F" bs=4096 skip=10 count=1 2>/dev/null) \
		<(head -c 4096 /dev/zero | tr '\0' U)
}

@test "recovery through a read-only descriptor keeps the POSIX locks the program holds on the file (no second descriptor opened and closed)" {
	# The program locks the file before any segment exists; a writer
	# then crashes with its tail reserved; the program's O_DIRECT open
	# is the first use after it and recovers the file.
	noshim touch "$F"
	mkfifo "$T/script"
	"$DIOSHIM" "$HELPERS/p_do" "$F" <"$T/script" >"$T/out" 2>&1 &
	PIDS+=($!)
	exec 4>"$T/script"
	printf 'open l %%1 RDONLY\nlock @l\nlockseen @l\n' >&4
	while ! grep -q held= "$T/out"; do sleep 0.05; done
	crashed_with_tail
	printf 'open r %%1 RDONLY|DIRECT\npread @r 4k 0\nlockseen @l\nksize @r\n' >&4
	exec 4>&-
	wait "${PIDS[0]}"
	PIDS=()
	cat "$T/out"
	[ "$(grep -c 'held=1' "$T/out")" -eq 2 ]
	[ "$(real_size "$F")" -eq 32768 ]
}

# ---- durable cuts and recovery at any open (issue 28, case 1) ------------

# Run OPS to the end (a clean close) under the shim and outside it, then
# cut the power: both files come back at the size their last sync made
# durable, with no record left — looked at outside the shim, before any
# shimmed open could recover anything.
close_cut_and_compare() {
	local out
	out=$T/$(basename "$F").out
	# The kernel alone first: its syncs commit the log, the shim's cut
	# with it, had it come first.
	noshim "$HELPERS/recwrite" "$F.kernel" "$@" >"$T/$(basename "$F.kernel").out" 2>&1
	shim "$HELPERS/recwrite" "$F" "$@" >"$out" 2>&1
	power_cut_and_back
	echo "shim: $(real_size "$F") (synced $(synced "$F")), kernel alone: $(real_size "$F.kernel") (synced $(synced "$F.kernel"))"
	[ "$(real_size "$F.kernel")" -eq "$(synced "$F.kernel")" ]
	[ "$(real_size "$F")" -eq "$(synced "$F")" ]
	run noshim getfattr -n user.dioshim.eof "$F"
	[ "$status" -ne 0 ]
	cmp "$F" "$F.kernel"
}

@test "power cut after a clean close of a file synced by fsync, O_DSYNC and libaio writes (generic/737): the synced size, no record" {
	close_cut_and_compare a 4K fsync aio 1M dsync 4K
}

@test "the same with the default engagement: the libaio write engages the file, its cut is durable" {
	DIOSHIM_ENGAGE=contention close_cut_and_compare a 4K fsync aio 1M dsync 4K
}

@test "power cut after a clean close of a file fsynced while reserved, then appended and fsynced again: the last synced size" {
	close_cut_and_compare a 64K fsync a 4K a 4K fdatasync
}

# A writer under the shim synced 32 KiB with its tail reserved; the
# power went (the segment went with it).
cut_with_tail() {
	start_writer shim "$F" a 32K fsync
	power_cut_and_back
	[ "$(real_size "$F")" -gt 32768 ]
}

# Then OPEN (a command line run under the shim) is the first shimmed
# open of the file: it recovers it.
recovered_by_open() {
	cut_with_tail
	shim "$@" >"$T/open.out"
	head -c 300 "$T/open.out"
	[ "$(real_size "$F")" -eq 32768 ]
	run noshim getfattr -n user.dioshim.eof "$F"
	[ "$status" -ne 0 ]
	assert_no_segment "$F"
}

@test "a crash's reserved tail is cut by the first shimmed open for reading (cat)" {
	recovered_by_open cat "$F"
	[ "$(stat -c %s "$T/open.out")" -eq 32768 ]
}

@test "... by a read-only open of xfs_io, and a buffered read-write one" {
	recovered_by_open xfs_io -r -c "stat" "$F"
	cut_with_tail
	run shim xfs_io -c "pread 0 4k" "$F"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq 32768 ]
}

@test "... by a stdio reader (fopen: sha256sum), which then reads the data alone" {
	recovered_by_open sha256sum "$F"
	[ "$(cut -d' ' -f1 "$T/open.out")" = "$(noshim sha256sum "$F" | cut -d' ' -f1)" ]
}
