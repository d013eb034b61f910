#!/usr/bin/env bats
# fs: ext4 xfs
# A small filesystem filled by shimmed appenders until ENOSPC: the shim's
# reservations run out first and it falls back to exact writes; every write
# the program saw succeed must be in the file, the size must be exactly the
# acknowledged data, and nothing unacknowledged (zeros) may sit inside it.
# The logs of acknowledged records live in BATS_TEST_TMPDIR, off the full
# filesystem.

load helper


# XFS refuses filesystems under 300 MB: it gets 320 MB and a filler file.
setup_file() {
	if [ "${FS:-ext4}" = xfs ]; then
		fs_setup_file xfs 320M
	else
		fs_setup_file ext4 64M
	fi
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/full.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	# Start each test with about 40 MB free, 8 MB of it in a ballast file
	# a test may delete.
	rm -f "$SCRATCH_MNT"/full.* "$SCRATCH_MNT/filler" "$SCRATCH_MNT/ballast"
	sync -f "$SCRATCH_MNT"
	local avail
	avail=$(noshim df -B1 --output=avail "$SCRATCH_MNT" | tail -n 1)
	if [ "$avail" -gt $((48 << 20)) ]; then
		noshim fallocate -l $((avail - (48 << 20))) "$SCRATCH_MNT/filler"
	fi
	noshim fallocate -l 8M "$SCRATCH_MNT/ballast"
}

field() { sed -n "s/.*$1=\\([0-9]*\\).*/\\1/p" <<<"$2"; }

# Append with THREADS threads of BS-byte records until ENOSPC; checks.
fill() {
	local threads=$1 bs=$2 size n
	run shim "$HELPERS/t_appender" -t "$threads" -b "$bs" -n 1000000 -c -e \
		-l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	# The filesystem did fill up.
	[ "$(field enospc "$output")" -ge 1 ]
	n=$(field records "$output")
	size=$(field size "$output")
	echo "acknowledged $n records of $bs bytes; the writer saw size $size"
	[ "$n" -gt 0 ]
	# Every acknowledged record in place, nothing else, size exact.
	run noshim "$HELPERS/t_verify" -b "$bs" -S $((n * bs)) "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$size" -eq $((n * bs)) ]
	[ "$(real_size "$F")" -eq $((n * bs)) ]
	assert_no_segment "$F"
}

@test "4 threads append 4 KiB O_DIRECT records until ENOSPC: every acknowledged record is in the file, once, in place; the size is exactly the acknowledged data" {
	fill 4 4096
}

@test "8 threads append 64 KiB O_DIRECT records until ENOSPC: every acknowledged record is in the file, once, in place; the size is exactly the acknowledged data" {
	fill 8 65536
}

@test "control: the kernel alone (no shim) meets the same checks: ENOSPC, every acknowledged record in place, size exact (4 threads on ext4; 1 on XFS, whose parallel O_APPEND loses writes)" {
	local threads=4 n
	[ "$FS_TYPE" = xfs ] && threads=1
	run noshim "$HELPERS/t_appender" -t "$threads" -n 1000000 -c -e -l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field enospc "$output")" -ge 1 ]
	n=$(field records "$output")
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "after ENOSPC, once space is freed, shimmed appends go on at exactly the EOF the filled file has" {
	run shim "$HELPERS/t_appender" -t 4 -n 1000000 -c -e -l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field enospc "$output")" -ge 1 ]
	local filled
	filled=$(real_size "$F")
	[ "$filled" -eq "$(field size "$output")" ]
	noshim rm -f "$SCRATCH_MNT/ballast"
	run shim "$HELPERS/t_appender" -t 4 -w 4 -n 100 -l "$T/log2" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field records "$output")" -eq 400 ]
	[ "$(real_size "$F")" -eq $((filled + 400 * 4096)) ]
	# The second run's records, each in place from the filled EOF on (what
	# the first run left is the business of the tests above).
	run noshim "$HELPERS/t_verify" -o "$filled" -S $((filled + 400 * 4096)) "$F" "$T/log2"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

# held_then_filled HOW: a process (under the shim or not, per side) holds
# a file with one record, its tail reserved, while another fills the
# filesystem with 4 KiB appends; HOW: "" (the file stays), "renamed" or
# "unlinked" (log rotation, a temporary file) before the filler starts.
# Prints the filler's records for the kernel alone and for the shim.
held_then_filled() {
	local how=$1 a=$SCRATCH_MNT/full.held side
	declare -A n
	for side in noshim shim; do
		rm -f "$a" "$a.moved" "$F" "$T/ready" "$T/go"
		DIOSHIM_RESERVE=4M "$side" "$HELPERS/t_appender" -t 1 -n 2 -c -e \
			-p "1:$T/ready:$T/go" "$a" >/dev/null &
		wait_file "$T/ready"
		[ "$side" = noshim ] || [ "$(real_size "$a")" -gt $((1 << 20)) ]
		case $how in
		renamed) noshim mv "$a" "$a.moved" ;;
		unlinked) noshim rm "$a" ;;
		esac
		run "$side" "$HELPERS/t_appender" -t 1 -n 1000000 -c -e -l "$T/log.$side" "$F"
		[ "$status" -eq 0 ]
		n[$side]=$(field records "$output")
		touch "$T/go"
		wait
		run noshim "$HELPERS/t_verify" -S $((n[$side] * 4096)) "$F" "$T/log.$side"
		[ "$status" -eq 0 ]
	done
	echo "${n[noshim]} ${n[shim]}"
}

@test "a writer out of space has the reserved tail another process holds given back, and writes as much as with the kernel alone (the file where it was, renamed, unlinked)" {
	local how k s
	for how in "" renamed unlinked; do
		read -r k s < <(held_then_filled "$how")
		echo "${how:-in place}: records kernel alone $k, shim $s"
		[ "$s" -ge $((k - 64)) ]
	done
	assert_no_segment "$F"
}

@test "out of space, a planted segment naming a FIFO is not opened: the reclaim opens nothing but the regular file a segment belongs to" {
	local a=$SCRATCH_MNT/full.held seg fake
	noshim mkfifo "$T/fifo"
	chmod 666 "$T/fifo"
	# A real segment with a tail, copied under another inode's name with
	# its path pointing at the FIFO, given to another user.
	rm -f "$T/ready" "$T/go"
	DIOSHIM_RESERVE=4M shim "$HELPERS/t_appender" -t 1 -n 2 -c -e \
		-p "1:$T/ready:$T/go" "$a" >/dev/null &
	wait_file "$T/ready"
	seg=$(segment_of "$a")
	fake=$(printf '%s/dioshim.%x.%x' "$DIOSHIM_SHM_DIR" "$(noshim stat -c %d "$a")" 999999)
	cp "$seg" "$fake"
	printf '%016x' 999999 | sed 's/../& /g' | awk '{ for (i = NF; i > 0; i--) printf "\\x%s", $i }' |
		xargs -0 printf | dd of="$fake" bs=1 seek=24 conv=notrunc status=none
	printf '%s\0' "$T/fifo" | dd of="$fake" bs=1 seek=640 conv=notrunc status=none
	chown 65534 "$fake"
	chmod 660 "$fake"
	touch "$T/go"
	wait
	# Whoever opens the FIFO for writing lets this reader through.
	timeout 60 sh -c "exec 3<'$T/fifo'; touch '$T/opened'" &
	local reader=$!
	run shim "$HELPERS/t_appender" -t 1 -n 1000000 -c -e -l "$T/log" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	sleep 0.5
	kill "$reader" 2>/dev/null || true
	wait "$reader" 2>/dev/null || true
	rm -f "$fake"
	[ ! -e "$T/opened" ]
}

@test "out of space, a writer of another file stopped mid-write (SIGSTOP) does not hold up the give-back: the full writer ends, every record in place" {
	local a=$SCRATCH_MNT/full.stopped pid n
	rm -f "$T/stop"
	DIOSHIM_RESERVE=4M shim "$HELPERS/t_appender" -t 2 -n 1000000 -c -e \
		-s "$T/stop" "$a" >/dev/null &
	pid=$!
	while [ "$(real_size "$a" 2>/dev/null || echo 0)" -lt $((1 << 20)) ]; do
		sleep 0.05
	done
	# Two threads writing without pause: stopped, one of them is almost
	# always between its write and its count going down.
	pkill -STOP -f -- "-s $T/stop"
	sleep 0.2
	run timeout 60 "$DIOSHIM" "$HELPERS/t_appender" -t 1 -n 1000000 -c -e -l "$T/log" "$F"
	touch "$T/stop"
	pkill -CONT -f -- "-s $T/stop"
	wait "$pid" || true
	echo "$output"
	[ "$status" -eq 0 ]
	n=$(field records "$output")
	run noshim "$HELPERS/t_verify" -S $((n * 4096)) "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

# free_while_open MODE N: the filesystem's free bytes while a process
# under MODE keeps N files of 4 KiB open (each engaged from its first
# write, as a contended file is).
free_while_open() {
	local mode=$1 n=$2 free
	rm -rf "$SCRATCH_MNT/logs" "$T/fifo"
	mkdir "$SCRATCH_MNT/logs"
	mkfifo "$T/fifo"
	DIOSHIM_ENGAGE=always "$mode" "$BUILD/filesbench" open "$SCRATCH_MNT/logs" \
		"$n" 4096 4096 <"$T/fifo" >"$T/open.out" &
	exec 7>"$T/fifo"
	while ! grep -q ready "$T/open.out" 2>/dev/null; do sleep 0.1; done
	free=$(noshim df -B1 --output=avail "$SCRATCH_MNT" | tail -n 1)
	echo >&7
	exec 7>&-
	wait
	rm -rf "$SCRATCH_MNT/logs"
	echo "$free"
}

@test "the reservations of many open files together hold at most 1/16 of the free space (the kernel alone as control)" {
	local k s
	k=$(free_while_open noshim 40)
	s=$(free_while_open shim 40)
	echo "free while 40 files are open: kernel alone $k, shim $s"
	[ "$s" -ge $((k - k / 16 - (1 << 20))) ]
	assert_no_segment "$SCRATCH_MNT/logs/f0"
}

@test "two threads append through libaio with 3 MB free (exact writes, each under the file's ext_lock through its submission): no stall, every record once, size exact" {
	local avail
	avail=$(noshim df -B1 --output=avail "$SCRATCH_MNT" | tail -n 1)
	noshim fallocate -l $((avail - (3 << 20))) "$SCRATCH_MNT/full.fill"
	# The build before waited 30 s for a lock, then hung.
	run timeout 30 "$DIOSHIM" "$HELPERS/aiothreads" "$F" 2 200
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((401 * 4096)) ]
	assert_no_segment "$F"
}

@test "two threads append through libaio in batches larger than their contexts (the kernel takes them in part) with 3 MB free: no stall, every record once, size exact" {
	local avail
	avail=$(noshim df -B1 --output=avail "$SCRATCH_MNT" | tail -n 1)
	noshim fallocate -l $((avail - (3 << 20))) "$SCRATCH_MNT/full.fill"
	run timeout 60 "$DIOSHIM" "$HELPERS/aiothreads" "$F" 2 5 32
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq $((321 * 4096)) ]
	assert_no_segment "$F"
}
