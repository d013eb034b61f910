#!/usr/bin/env bats
# fs: ext4 xfs
# Asynchronous submitters under the shim: fio's libaio engine with
# verification, the project's own libaio and liburing writer (sequential,
# random into a sparse file, O_APPEND, registered files, SQPOLL), sizes and
# truncates racing writes in flight, a kill -9 with writes in flight, and
# the errors the kernel gives, compared with the kernel alone.  Files are
# checked outside the shim.

load helper

setup_file() {
	fs_setup_file "${FS:-ext4}" 1G
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/async.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	AW=$HELPERS/asyncwrite
	HUGEPAGES_WAS=
}
teardown() {
	if [ -n "$HUGEPAGES_WAS" ]; then
		echo "$HUGEPAGES_WAS" >/proc/sys/vm/nr_hugepages
	fi
}

# Two huge pages for this test, if there are none (root): given back in
# teardown.
hugepages_lend() {
	local was
	was=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null) || return 0
	[ "$was" = 0 ] || return 0
	echo 2 >/proc/sys/vm/nr_hugepages 2>/dev/null || return 0
	HUGEPAGES_WAS=$was
}

need() {
	command -v "$1" >/dev/null || skip "$1 is not installed"
}

# fio libaio, 2 jobs each writing its own 3100 KiB region of one file and
# verifying it (crc32c); then the exact size outside the shim.
fio_libaio() {
	need fio
	cd "$T"
	run timeout 300 "$DIOSHIM" fio --name=aio --filename="$F" --direct=1 \
		--ioengine=libaio --bs=4k --size=3100k --numjobs=2 \
		--offset_increment=3100k --fallocate=none --verify=crc32c \
		--verify_state_save=0 --group_reporting "$@"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"err= 0"* ]]
	[[ "$output" != *"verify: bad"* ]]
	[ "$(real_size "$F")" -eq $((2 * 3100 * 1024)) ]
	assert_no_segment "$F"
}

@test "fio libaio sequential new file, QD 1, --verify=crc32c: verify passes, exact size" {
	fio_libaio --rw=write --iodepth=1
}

@test "fio libaio sequential new file, QD 32, --verify=crc32c: verify passes, exact size" {
	fio_libaio --rw=write --iodepth=32
}

@test "fio libaio random writes into a sparse file, QD 1, --verify=crc32c: verify passes, exact size" {
	fio_libaio --rw=randwrite --iodepth=1
}

@test "fio libaio random writes into a sparse file, QD 32, --verify=crc32c: verify passes, exact size" {
	fio_libaio --rw=randwrite --iodepth=32
}

# asyncwrite reads its file back and checks it; the size again outside.
aw_ok() {
	local blocks=$4
	run shim "$AW" "$@"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((blocks * 4096)) ]
	assert_no_segment "$F"
}

@test "libaio QD 16, a new file written in order: every record in place, every size seen whole and covering what was reaped" {
	aw_ok aio seq "$F" 6000 16 stat
}

@test "liburing QD 16, a new file written in order: every record in place, every size seen whole and covering what was reaped" {
	aw_ok uring seq "$F" 6000 16 stat
}

@test "libaio and liburing QD 16, random blocks of a sparse file: every record in place, sizes exact all along" {
	aw_ok aio rand "$F" 4000 16 stat
	aw_ok uring rand "$F" 4000 16 stat
}

@test "libaio and liburing QD 16 with O_APPEND: every record exactly once, the size their sum" {
	aw_ok aio append "$F" 4000 16
	aw_ok uring append "$F" 4000 16
}

@test "control: libaio O_APPEND appends without the shim (XFS loses records, which is why the shim exists)" {
	run noshim "$AW" aio append "$F" 4000 16
	echo "$output" | tail -n 1
	if [ "$FS_TYPE" = xfs ]; then
		echo "# xfs without the shim: $(echo "$output" | tail -n 1)" >&3
	else
		[ "$status" -eq 0 ]
	fi
}

@test "liburing with the file registered (IOSQE_FIXED_FILE): records in place, sizes exact" {
	aw_ok uring seq "$F" 4000 16 fixed stat
}

@test "truncates racing writes in flight (libaio, liburing): the size ends exact, every block a record or zeros, the last ones all there" {
	aw_ok aio seq "$F" 3000 16 trunc
	aw_ok uring seq "$F" 3000 16 trunc
}

@test "fdatasync through the engines (IO_CMD_FDSYNC, IORING_OP_FSYNC) after the writes: 0, and the file whole" {
	aw_ok aio seq "$F" 2000 8 fsync
	aw_ok uring seq "$F" 2000 8 fsync
}

@test "refused requests and failed completions reach the program as the kernel alone gives them (libaio)" {
	noshim "$AW" aio errors "$F.k" >"$T/kernel"
	shim "$AW" aio errors "$F" >"$T/shim"
	cat "$T/shim"
	diff "$T/kernel" "$T/shim"
	[ "$(wc -l <"$T/shim")" -eq 14 ]
}

@test "libaio: an iocb or array read once, then unmapped, protected (in full, in part, read-only, down to a growing mapping's start), mapped over (a huge page too, shared memory with SHM_REMAP), guarded (process_madvise too), moved, detached, cut short, not forked (fork, _Fork), its context destroyed; a neighbour protected; write-only iocbs; batches read in part: the answers of the kernel alone" {
	hugepages_lend
	noshim "$AW" aio gone "$F.k" >"$T/kernel"
	shim "$AW" aio gone "$F" >"$T/shim"
	cat "$T/shim"
	diff "$T/kernel" "$T/shim"
	# (A huge page refused still takes the old mapping away.)
	[ "$(grep -c 'submit=-14' "$T/shim")" -eq 16 ]
	grep -q '^hugetlb submit=-14' "$T/shim"
	grep -q '^shmat-remap submit=-14' "$T/shim"
	grep -q '^process-madvise-guard submit=-14' "$T/shim"
	grep -q '^dontfork-_Fork-child submit=-14' "$T/shim"
	grep -q '^neighbour submit=1 res=4096' "$T/shim"
	grep -q '^mprotect-growsdown=0$' "$T/shim"
	grep -q '^growsdown submit=-14' "$T/shim"
	grep -q '^ctx-destroyed submit=-22' "$T/shim"
	grep -q '^batch-writeonly submit=2 res=4096 res=4096' "$T/shim"
	grep -q '^batch-array-cut submit=1 res=4096' "$T/shim"
	[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
}

@test "refused requests and failed completions reach the program as the kernel alone gives them (liburing, fallocate included)" {
	noshim "$AW" uring errors "$F.k" >"$T/kernel"
	shim "$AW" uring errors "$F" >"$T/shim"
	cat "$T/shim"
	diff "$T/kernel" "$T/shim"
	[ "$(wc -l <"$T/shim")" -eq 14 ]
	[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
}

@test "a queued write past the end, then an append before it is reaped: the append lands after it, as behind ext4's kernel alone" {
	local e
	for e in aio uring; do
		run shim "$AW" "$e" past-then-append "$F"
		echo "$e dioshim: $output"
		[ "$output" = "size=1052672 at0=A at1m=B" ]
		[ "$(real_size "$F")" -eq 1052672 ]
	done
	# The control where the kernel alone is certain: ext4 makes an
	# extending libaio write before io_submit returns (XFS and io_uring
	# let the append race it).
	run noshim "$AW" aio past-then-append "$F.k"
	echo "aio kernel: $output"
	[ "$FS_TYPE" != ext4 ] || [ "$output" = "size=1052672 at0=A at1m=B" ]
}

@test "queued appends with a flag the shim does not know (RWF_DONTCACHE), four per submission: every record once (the kernel alone's errors where it refuses the flag)" {
	local e
	for e in aio uring; do
		noshim "$AW" "$e" flagged "$F.k" >"$T/kernel"
		shim "$AW" "$e" flagged "$F" >"$T/shim"
		echo "$e: kernel $(cat "$T/kernel"), dioshim $(cat "$T/shim")"
		# XFS alone hands concurrent direct appends one offset: where
		# the kernel takes the flag, the shim must keep every record.
		if grep -q "^ok=0 " "$T/kernel"; then
			diff "$T/kernel" "$T/shim"
		else
			[ "$(cat "$T/shim")" = "ok=200 failed=0 size=819200 distinct=200" ]
		fi
	done
}

@test "one submission writing to 40 files, appends and positioned writes, each file reserved: every write tracked, the kernel alone's sizes and data" {
	local e
	mkdir "$F.k" "$F"
	for e in aio uring; do
		noshim "$AW" "$e" wide "$F.k" >"$T/kernel"
		shim "$AW" "$e" wide "$F" >"$T/shim"
		echo "$e kernel: $(cat "$T/kernel")"
		echo "$e dioshim: $(cat "$T/shim")"
		grep -q " ok=40 bad=0$" "$T/kernel"
		diff "$T/kernel" "$T/shim"
		[ "$(noshim stat -c %s "$F"/wide* | sort -u)" = 8192 ]
		assert_no_segments "$F"/wide*
	done
}

@test "libaio: appending iocbs reaped and submitted again from an array cut by an unmapped page: every readable one appends, as with the kernel alone" {
	mkdir "$F.k" "$F"
	noshim "$AW" aio recut "$F.k" >"$T/kernel"
	shim "$AW" aio recut "$F" >"$T/shim"
	cat "$T/shim"
	[ "$(grep -c "size=12288 ABC$" "$T/kernel")" -eq 17 ]
	diff "$T/kernel" "$T/shim"
}

@test "io_uring: a write past the end linked behind a read that comes up short (cancelled), a pwrite and an append meanwhile: as the kernel alone" {
	noshim "$AW" uring linked "$F.k" >"$T/kernel"
	shim "$AW" uring linked "$F" >"$T/shim"
	cat "$T/shim"
	diff "$T/kernel" "$T/shim"
	[ "$(tail -1 "$T/shim")" = "size=8192: B C" ]
}

# InnoDB's pattern (issue 11, case 0): 4 threads fill and submit entries
# of one ring under a lock of their own; a fifth reaps with
# io_uring_wait_cqe outside it.  A wait that submitted would publish
# another thread's entry, maybe half filled.  MODE: positional or -a.
uring_waiter_case() {
	local run=$1 f=$2
	shift 2
	if [ "$run" = shim ]; then
		run timeout 120 "$DIOSHIM" "$HELPERS/uring_waiter" -n 20000 "$@" "$f"
	else
		run timeout 120 env -u LD_PRELOAD "$HELPERS/uring_waiter" -n 20000 \
			"$@" "$f"
	fi
	echo "$run $*: status $status: $output"
	[ "$status" -eq 0 ] || return 1
	[ "$(real_size "$f")" -eq $((20000 * 4096)) ] ||
		{ echo "size $(real_size "$f")"; return 1; }
	assert_no_segment "$f"
}

@test "io_uring: submitters under their own lock, a thread reaping with io_uring_wait_cqe: every submit 1, every completion its own, no hang" {
	uring_waiter_case noshim "$F.k"
	uring_waiter_case shim "$F"
	uring_waiter_case shim "$F.a" -a
	# O_APPEND: the kernel alone on XFS may give two one offset.
	[ "$FS_TYPE" = xfs ] || uring_waiter_case noshim "$F.ka" -a
}

@test "a signal handler calls fstat while its thread is inside io_submit and io_getevents: no hang, every write whole (issue 11, case 5)" {
	run timeout 120 env -u LD_PRELOAD "$HELPERS/sigfstat" 20000 "$F.k"
	echo "kernel alone: status $status: $output"
	[ "$status" -eq 0 ]
	run timeout 120 "$DIOSHIM" "$HELPERS/sigfstat" 20000 "$F"
	echo "under the shim: status $status: $output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((20000 * 4096)) ]
	assert_no_segment "$F"
}

@test "a signal handler submitting its own appends (libaio, io_uring) while its thread is inside the shim's submission: every record acknowledged is there once, no zero block (the handler's are refused with EAGAIN where the shim cannot track them)" {
	local e
	for e in aio uring; do
		run timeout 120 "$DIOSHIM" "$HELPERS/sigsubmit" "$e" 3000 \
			"$T/l.$e" "$F.$e"
		echo "$e: status $status: $output"
		[ "$status" -eq 0 ]
		run noshim "$HELPERS/t_verify" "$F.$e" "$T/l.$e"
		echo "$output"
		[ "$status" -eq 0 ]
		assert_no_segment "$F.$e"
	done
}

@test "io_uring without SUBMIT_ALL: appends the kernel leaves queued after a refused entry, a write(2) append, then the next submit: no wait, every record once, size exact (the kernel alone as control on ext4)" {
	local k
	for k in noshim shim; do
		# XFS alone may give two O_APPEND writes one offset.
		[ "$k" = noshim ] && [ "$FS_TYPE" = xfs ] && continue
		run $k "$HELPERS/uringstop" "$F.$k"
		echo "$k: $output"
		[ "$status" -eq 0 ]
		[[ "$output" == "submit=2 write=4096 (0."*") submit=2 "* ]]
		[[ "$output" == *" size=16384" ]]
		local blocks=${output##*blocks=}
		blocks=${blocks%% *}
		[ "$(echo "$blocks" | fold -w1 | sort | tr -d '\n')" = ACDW ]
	done
	assert_no_segment "$F.shim"
}

@test "a struct io_uring freed without io_uring_queue_exit (a thread's stack), a write of it still unseen, then another ring at its address: no crash, every size as the kernel alone's" {
	run noshim "$HELPERS/ringgone" "$F.k"
	[ "$status" -eq 0 ] || skip "$output"
	local want=$output
	run shim "$HELPERS/ringgone" "$F"
	echo "kernel: $(echo $want)"
	echo "shim:   $(echo $output)"
	[ "$status" -eq 0 ]
	[ "$output" = "$want" ]
	[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
	assert_no_segment "$F"
}

@test "a ring set up with SQPOLL passes through untouched: the shim makes no fallocate, the data and the final size are the kernel's" {
	need strace
	run timeout 300 strace -f -e trace=fallocate -o "$T/trace" \
		"$DIOSHIM" "$AW" uring seq "$F" 3000 16 sqpoll
	echo "$output"
	[ "$status" -eq 0 ]
	! grep -q 'fallocate(' "$T/trace"
	[ "$(real_size "$F")" -eq $((3000 * 4096)) ]
	noshim "$AW" uring check "$F"
	assert_no_segment "$F"
}

@test "kill -9 with libaio writes in flight: the next user finds every block a record or zeros, the file ending at its data, no segment left" {
	# The launcher execs the writer: $! is the writer itself.
	"$DIOSHIM" "$AW" aio seq "$F" 100000 16 &
	local pid=$!
	sleep 0.5
	kill -9 "$pid"
	wait "$pid" || true
	# A shimmed open and close after the kill: the next user cuts the
	# tail the killed writer left, never its data.
	shim dd if="$F" of=/dev/null bs=1M iflag=direct status=none
	run noshim "$AW" aio check "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"records="* ]]
	[[ "$output" != *"records=0 "* ]]
	# The last block is a record: the size is where the data ends.
	local size=${output#size=}
	size=${size%% *}
	[ "$size" -gt 0 ]
	noshim dd if="$F" of="$T/last" bs=4096 skip=$((size / 4096 - 1)) count=1 status=none
	[ "$(tr -d '\0' <"$T/last" | wc -c)" -gt 0 ]
}

# Leave 6 MiB free, write 16 MiB at queue depth 16: the kernel says
# ENOSPC in completions; every acknowledged record must be in place and
# the size end at the last of them (under the shim, outside it, after).
nospc_run() {
	local avail m
	sync -f "$SCRATCH_MNT"
	# Fill up (free blocks include ext4's root reserve, and ext4 keeps a
	# reserve of its own for metadata): a big filler, then 1 MiB at a
	# time until ENOSPC; then punch 6 MiB back.
	avail=$(noshim stat -f -c '%f * %S' "$SCRATCH_MNT")
	noshim fallocate -l $((avail - (64 << 20))) "$SCRATCH_MNT/filler"
	for ((m = 0; m < 128; m++)); do
		noshim fallocate -o $((m << 20)) -l 1M "$SCRATCH_MNT/filler2" \
			2>/dev/null || break
	done
	[ "$m" -gt 6 ]
	noshim fallocate -p -o 0 -l 6M "$SCRATCH_MNT/filler2"
	run shim "$AW" "$1" "$2" "$F" 4096 16 nospc
	echo "$output"
	rm -f "$SCRATCH_MNT/filler" "$SCRATCH_MNT/filler2"
	[ "$status" -eq 0 ]
	[ "$(field nospc "$output")" -gt 0 ]
	[ "$(real_size "$F")" -eq "$(field size "$output")" ]
	assert_no_segment "$F"
	rm -f "$F"
}

field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

@test "a filesystem filling up under libaio and liburing writes at QD 16: ENOSPC in completions, every acknowledged record in place, the size at the last" {
	nospc_run aio seq
	nospc_run uring seq
	nospc_run aio rand
}

@test "libaio: an iocb reaped and reused at once by another thread is never changed under it (kernel alone as control)" {
	local n=6000 out
	out=$(noshim "$HELPERS/aioreuse" $n "$F.klog" "$F.k") || true
	echo "kernel: $out"
	[[ "$out" == "appends=$n "*" changed=0 badres=0" ]]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F.k" "$F.klog"
	echo "kernel: $output"
	# XFS alone gives queued O_APPEND direct writes the same offset
	# while one is in flight, and loses records: printed, not asserted.
	[ "$FS_TYPE" = xfs ] || [ "$status" -eq 0 ]
	run shim "$HELPERS/aioreuse" $n "$F.log" "$F"
	echo "dioshim: $output"
	[ "$status" -eq 0 ]
	[[ "$output" == "appends=$n "*" changed=0 badres=0" ]]
	echo "size after exit: $(real_size "$F")"
	noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$F.log" || true
	[ "$(real_size "$F")" -eq $((n * 4096)) ]
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$F.log"
	echo "$output"
	[ "$status" -eq 0 ]
	rm -f "$F" "$F.k" "$F.log" "$F.klog"
}

@test "liburing IOSQE_CQE_SKIP_SUCCESS writes: the completions, sizes and data of the kernel alone (issue 11, case 4)" {
	run noshim "$HELPERS/uring_skip" "$F.k"
	echo "kernel alone:"
	echo "$output"
	[ "$status" -eq 0 ]
	local want=$output
	run shim "$HELPERS/uring_skip" "$F"
	echo "under the shim:"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "$want" ]
	[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
	cmp "$F" "$F.k"
	rm -f "$F" "$F.k"
}

@test "libaio: an iocb the shim rewrote, submitted again changed or not, a refused one in a batch, a refused append beside one in flight: as the kernel alone" {
	local c want
	for c in off setfl nowait batch epoch; do
		want=$(noshim "$HELPERS/aioedges" $c "$F.k")
		run shim "$HELPERS/aioedges" $c "$F"
		echo "$c: kernel alone: $want"
		echo "$c: under the shim: $output"
		[ "$status" -eq 0 ]
		[ "$output" = "$want" ]
		[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
	done
	rm -f "$F" "$F.k"
}

# Issue 13, case 1: queued reads at and across the logical end return what
# the kernel alone returns (the reserved tail is not read as zeros).
@test "io_uring READ, READ_FIXED and READV, libaio PREAD and PREADV, at and across the end, direct and buffered: the kernel alone's counts" {
	local k s
	k=$(noshim "$HELPERS/qread" "$F.k")
	s=$(shim "$HELPERS/qread" "$F")
	echo "kernel alone:"
	echo "$k"
	echo "under the shim:"
	echo "$s"
	[ "$s" = "$k" ]
	grep -q '^read_across_end 4096$' <<<"$k"
	[ "$(real_size "$F")" = "$(real_size "$F.k")" ]
	assert_no_segment "$F"
}

# ringreap: completions taken from the ring with no call the shim sees.
# The kernel alone is the control: the same size and bytes, and after the
# shimmed run no reserved tail, no xattr, no segment (issue 14: qemu-img
# convert with aio=native left 13-67 MB of tail and its segment).
ringreap_both() {
	local kind=$1 when=$2 out
	noshim "$HELPERS/ringreap" "$kind" "$F.k" 96 "$when"
	run shim "$HELPERS/ringreap" "$kind" "$F" 96 "$when"
	echo "$output"
	[ "$status" -eq 0 ]
	out=$output
	[ "$(real_size "$F")" -eq $((96 * 65536)) ]
	[ "$(real_size "$F.k")" -eq $((96 * 65536)) ]
	noshim cmp "$F" "$F.k"
	run noshim getfattr -n user.dioshim.eof "$F"
	[ "$status" -ne 0 ]
	assert_no_segment "$F"
	# "stat": the size a tool outside the shim saw while the program was
	# still alive, after its stat.
	if [ "$when" = stat ]; then
		[ "$out" = $((96 * 65536)) ]
	fi
	rm -f "$F" "$F.k"
}

@test "completions taken from the aio ring and the CQ by the program itself, then fdatasync and close (QEMU's end): the kernel's size and bytes, no tail, no xattr, no segment" {
	ringreap_both aio after
	ringreap_both uring after
}

@test "a close with writes still in flight, their completions taken from the ring after it: the file is kept open for them, as the kernel does, and cut at the next call the shim sees (or the exit)" {
	ringreap_both aio inflight
	ringreap_both uring inflight
	ringreap_both aio stat
	ringreap_both uring stat
}

@test "dioshim status counts queued writes, taken from the ring by the program (aio, io_uring): 96 writes, 6291456 bytes" {
	local kind
	for kind in aio uring; do
		run shim env RINGREAP_DIOSHIM="$DIOSHIM" "$HELPERS/ringreap" \
			"$kind" "$F" 96 status
		echo "$output"
		[ "$status" -eq 0 ]
		[[ "$output" == *" writes 96 bytes 6291456 "* ]]
		[ "$(real_size "$F")" -eq $((96 * 65536)) ]
		rm -f "$F"
	done
}

@test "a fork right after a close with writes in flight, the child outliving the parent: the parent's writes are not the child's, and the file is left as the kernel leaves it" {
	ringreap_both aio fork
	ringreap_both uring fork
}

@test "100 files closed with writes in flight, every descriptor swept (closefrom), the numbers handed to another file: that file and its descriptors untouched, every file the kernel's size, no segment" {
	# The loop device completes a throttled write at once: this one runs
	# in /var/tmp, on its disk slowed to 25 writes a second (once).
	[ "$FS_TYPE" = ext4 ] || skip "runs once, on /var/tmp's filesystem"
	local d
	d=$(mktemp -d /var/tmp/dioshim-kept.XXXXXX)
	case $(noshim stat -f -c %T "$d") in
	ext2/ext3 | xfs) ;;
	*) rm -rf "$d"; skip "/var/tmp is not on ext4 or XFS" ;;
	esac
	mkdir "$d/s" "$d/k"
	SLOW_DEV=$(findmnt -no MAJ:MIN -T "$d" | tr -d ' ')
	SLOW_DEV=$SLOW_DEV slowed_run kernel write_iops_device 25 "$HELPERS/keptfds" "$d/k" 100
	[ "$status" -eq 0 ]
	SLOW_DEV=$SLOW_DEV slowed_run shim write_iops_device 25 "$HELPERS/keptfds" "$d/s" 100
	local st=$status
	[ "$(real_size "$d/s/victim")" -eq $((100 << 20)) ] || { rm -rf "$d"; false; }
	# Each file the kernel alone's size; one stat per side.
	(cd "$d/k" && noshim stat -c '%n %s' f*) | sort >"$BATS_TEST_TMPDIR/k"
	(cd "$d/s" && noshim stat -c '%n %s' f*) | sort >"$BATS_TEST_TMPDIR/s"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/s")" -eq 100 ] &&
		diff "$BATS_TEST_TMPDIR/k" "$BATS_TEST_TMPDIR/s" &&
		assert_no_segments "$d"/s/f* || { rm -rf "$d"; false; }
	rm -rf "$d"
	[ "$st" -eq 0 ]
}
