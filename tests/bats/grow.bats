#!/usr/bin/env bats
# fs: ext4 xfs
# Growth without a drain (issue 29).  A program that grows a file past
# its end — a zero range per new cluster (qcow2), posix_fallocate ahead
# (InnoDB), KEEP_SIZE ahead (RocksDB), ftruncate up (Seastar) — is
# served from the reservation: over reserved blocks nothing has touched,
# the call reaches no kernel call (strace shows it), and every answer,
# size, content, SEEK_DATA/SEEK_HOLE and the allocation the last close
# leaves is the kernel alone's.  The kernel alone, run beside the shim on
# the same filesystem, is the control; files are read outside the shim.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v strace >/dev/null || skip "strace missing"
	F=$SCRATCH_MNT/grow.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	PIDS=()
	BG=
}
teardown() {
	reap_bg "$T/written" "$T/go"
	kill_writers
}

# t_fops OPS... under the shim and with the kernel alone, each traced
# ($T/trace.shim, $T/trace.kernel: fallocate and ftruncate calls); every
# answer but the kernel's own size, the final size, the contents and the
# allocated blocks must agree.
same_traced() {
	local how
	rm -f "$F.shim" "$F.kernel"
	shim strace -f -qq -P "$F.shim" -e trace=fallocate,ftruncate -o "$T/trace.shim" \
		"$HELPERS/t_fops" -d -c "$F.shim" "$@" >"$T/shim" 2>&1
	DIOSHIM_DISABLE=1 shim strace -f -qq -P "$F.kernel" -e trace=fallocate,ftruncate \
		-o "$T/trace.kernel" "$HELPERS/t_fops" -d -c "$F.kernel" "$@" \
		>"$T/kernel" 2>&1
	echo "--- under the shim"
	cat "$T/shim"
	diff -u <(grep -v '^kernel' "$T/kernel") <(grep -v '^kernel' "$T/shim")
	for how in kernel shim; do
		echo "$how: size $(real_size "$F.$how") blocks $(data_blocks "$F.$how") fallocate $(calls fallocate "$how") ftruncate $(calls ftruncate "$how")"
	done
	cmp "$F.shim" "$F.kernel"
	assert_no_segment "$F.shim"
}

# calls NAME RUN [PATTERN]: the NAME calls the run made (matching PATTERN).
calls() { grep "$1(" "$T/trace.$2" | grep -c -- "${3:-}" || true; }

same_blocks() { [ "$(data_blocks "$F.shim")" -eq "$(data_blocks "$F.kernel")" ]; }

# OPS growing the file 16 times by CLUSTER, each growth then a 4 KiB
# write into what it grew: "GROW" names the t_fops call, with @OFF@ and
# @END@ for the cluster's start and end.
clusters() {
	local grow=$1 c=$2 i off end ops=""
	for ((i = 1; i <= 16; i++)); do
		off=$((i * c))
		end=$((off + c))
		ops+=" ${grow//@OFF@/$off} w $off 4K x4$((i % 10))"
		ops="${ops//@END@/$end}"
	done
	echo "$ops"
}

@test "a zero range per new cluster past EOF (qcow2): no zero range reaches the kernel; answers, contents and allocation as with the kernel alone" {
	# shellcheck disable=SC2046 # the operations, one word each
	same_traced w 0 64K x41 kernel $(clusters "fa zero @OFF@ 64K" 65536) \
		size end data 0 hole 0 data 70K hole 70K r 0 2M
	[ "$(calls fallocate kernel ZERO_RANGE)" -eq 16 ]
	[ "$(calls fallocate shim ZERO_RANGE)" -eq 0 ]
	same_blocks
	grep -q '^size = 1114112$' "$T/shim"
}

@test "posix_fallocate of 1 MiB past EOF at a time (InnoDB): far fewer kernel fallocates than calls; as with the kernel alone" {
	# shellcheck disable=SC2046
	same_traced w 0 64K x41 kernel $(clusters "pfa @OFF@ 1M" 1048576) \
		size end data 1M hole 1M r 0 20M
	[ "$(calls fallocate kernel)" -ge 16 ]
	# One reservation step covers several extensions.
	[ "$(calls fallocate shim)" -le 8 ]
	same_blocks
}

@test "fallocate ZERO_RANGE and mode 0 spanning EOF: the zero range is the kernel's as issued (zeroing and growing in one call, as alone); of mode 0, the part inside EOF; as with the kernel alone" {
	same_traced w 0 64K x41 kernel fa zero 32K 64K r 0 256K size \
		fa 0 64K 64K w 100K 4K x42 size data 0 hole 0 r 0 256K
	[ "$(calls fallocate shim 'FALLOC_FL_ZERO_RANGE, 32768, 65536')" -eq 1 ]
	[ "$(calls fallocate shim 'FALLOC_FL_KEEP_SIZE, 65536, 32768')" -eq 1 ]
	[ "$(calls fallocate shim ', 0, 65536, ')" -eq 0 ]
	same_blocks
}

@test "KEEP_SIZE ahead of appends (RocksDB): inside the reservation no kernel call; the blocks stay allocated after the last close; as with the kernel alone" {
	# shellcheck disable=SC2046
	same_traced w 0 64K x41 kernel $(clusters "fa keep @OFF@ 64K" 65536) \
		size end data 0 hole 0 fa keep 2M 256K size end r 0 4M
	[ "$(calls fallocate kernel KEEP_SIZE)" -eq 17 ]
	[ "$(calls fallocate shim KEEP_SIZE)" -le 2 ]
	same_blocks
}

@test "ftruncate up ahead of the writes (Seastar): no kernel truncate until the last close; sizes, contents and holes as with the kernel alone" {
	# shellcheck disable=SC2046
	same_traced w 0 64K x41 kernel $(clusters "trunc @END@" 262144) \
		size end data 300K hole 300K data 0 hole 0 r 0 8M stat statx
	[ "$(calls ftruncate kernel)" -eq 16 ]
	# The last close's cut is the one truncate the kernel sees.
	[ "$(calls ftruncate shim)" -le 1 ]
	# What the writes did not reach of the growth is a hole again.
	same_blocks
}

@test "a zero range past EOF over blocks a failed write reached, and over punched ones: the kernel zeroes and allocates them; as with the kernel alone" {
	same_traced w 0 64K x41 kernel wv 64K 64K unmap wv 64K 64K keep \
		fa zero 64K 128K r 0 1M size fa punch,keep 512K 64K \
		fa zero 256K 512K size data 256K hole 256K r 0 1M
	same_blocks
}

@test "growth by each way with 8 writers racing into what is grown: every record in place, the file the kernel alone writes" {
	local how
	for how in zero falloc keep trunc none; do
		rm -f "$F.k" "$F.s"
		noshim "$HELPERS/t_grow" -m $how -t 8 -k 1024 "$F.k"
		shim "$HELPERS/t_grow" -m $how -t 8 -k 1024 "$F.s"
		noshim "$HELPERS/t_grow" -v -k 1024 "$F.s"
		cmp "$F.k" "$F.s"
		echo "$how: blocks kernel $(data_blocks "$F.k") shim $(data_blocks "$F.s")"
		[ "$(data_blocks "$F.s")" -eq "$(data_blocks "$F.k")" ]
		assert_no_segment "$F.s"
	done
}

@test "data another process wrote into an ftruncate-grown range (buffered, through a mapping) before the last close: kept, never punched" {
	local how
	for how in buffered mapped; do
		rm -f "$F" "$T/grown" "$T/written"
		shim "$HELPERS/t_fops" -d -c "$F" w 0 64K x41 trunc 1M \
			touch "$T/grown" wait "$T/written" size >"$T/a" 2>&1 3>&- &
		BG=$!
		wait_file "$T/grown"
		if [ $how = buffered ]; then
			shim xfs_io -c "pwrite -S 0x42 512k 4k" "$F" >/dev/null
		else
			shim xfs_io -c "mmap -rw 0 1m" -c "mwrite -S 0x42 512k 4k" \
				"$F" >/dev/null
		fi
		touch "$T/written"
		wait "$BG"
		BG=
		cat "$T/a"
		[ "$(real_size "$F")" -eq 1048576 ]
		# The 4 KiB at 512 KiB are B's, read outside the shim.
		[ "$(noshim od -v -An -tx1 -j 524288 -N 4096 "$F" | tr -s ' \n' '\n' | sort -u | grep -v '^$')" = 42 ]
		assert_no_segment "$F"
	done
}

# ---- crashes -------------------------------------------------------------


# Run OPS under the shim and outside it, then kill -9 both (CUT=kill) or
# cut the power (CUT=power); recover; both files must have the same size
# and contents, at least the size the last sync acknowledged.
crash_and_compare() {
	local cut=$1
	shift
	start_writer shim "$F" "$@"
	start_writer noshim "$F.kernel" "$@"
	if [ "$cut" = power ]; then
		xfs_io -x -c shutdown "$SCRATCH_MNT"
		kill_writers
		rm -f "$DIOSHIM_SHM_DIR"/dioshim.*
		scratch_remount
	else
		kill_writers
	fi
	run "$DIOSHIM" recover "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "shim: $(real_size "$F") (synced $(synced "$F")), kernel alone: $(real_size "$F.kernel") (synced $(synced "$F.kernel"))"
	[ "$(real_size "$F")" -ge "$(synced "$F")" ]
	[ "$(real_size "$F")" -eq "$(real_size "$F.kernel")" ]
	cmp "$F" "$F.kernel"
	assert_no_segment "$F"
}

@test "kill -9 after a zero range, an ftruncate and a fallocate past EOF, none synced: the size the kernel alone keeps" {
	crash_and_compare kill a 64K zgrow 64K a 4K tgrow 100K grow 1M a 4K \
		tgrow 3K fsync zgrow 8K tgrow 5000
}

@test "power cut after a zero range past EOF and fsync: the synced size, as with the kernel alone" {
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	crash_and_compare power a 64K zgrow 64K fsync
}

@test "power cut after an ftruncate up (to inside a block) and fsync: the synced size, as with the kernel alone" {
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	crash_and_compare power a 64K a 4K tgrow 70000 fsync
}

@test "power cut after a fallocate past EOF through an O_DSYNC descriptor, no sync: the size it made, durable as the kernel makes it" {
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	crash_and_compare power a 64K a 4K fsync dgrow 1M
}

@test "power cut after KEEP_SIZE ahead, appends into it and fdatasync: the synced size, as with the kernel alone" {
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	crash_and_compare power a 64K kgrow 1M a 4K a 4K fdatasync
}

# ---- what the kernel refuses --------------------------------------------

@test "growth the kernel refuses: a read-only descriptor, an append-only file, past the largest size; the kernel's answers" {
	command -v chattr >/dev/null || skip "chattr (e2fsprogs) missing"
	local how ro big=()
	# Past ext4's largest file (16 TiB less a block); XFS's is 8 EiB.
	[ "$FS" = xfs ] || big=(fa zero 16T 64K fa 0 16T 4K trunc 16T)
	for how in shim kernel; do
		rm -f "$F.$how"
		ro=$F.$how.ro
		noshim touch "$ro"
		if [ $how = kernel ]; then export DIOSHIM_DISABLE=1; fi
		shim "$HELPERS/t_fops" -d -c "$F.$how" w 0 64K x41 \
			"${big[@]/16T/17592186044416}" \
			fa 0 9223372036854710272 65536 size >"$T/$how.1" 2>&1
		shim "$HELPERS/t_fops" -d -r "$ro" fa 0 0 64K fa zero 0 64K \
			trunc 64K size >>"$T/$how.1" 2>&1
		noshim chattr +a "$F.$how"
		shim "$HELPERS/t_fops" -d -a "$F.$how" a 4K x42 kernel \
			fa zero 128K 64K fa 0 128K 64K fa keep 1M 64K \
			trunc 1M size end >"$T/$how.2" 2>&1
		noshim chattr -a "$F.$how"
		unset DIOSHIM_DISABLE
	done
	cat "$T/shim.1" "$T/shim.2"
	diff -u "$T/kernel.1" "$T/shim.1"
	diff -u <(grep -v '^kernel' "$T/kernel.2") <(grep -v '^kernel' "$T/shim.2")
	grep -q '^fa zero 131072 65536 = -1 EPERM' "$T/shim.2"
	grep -q '^trunc 1048576 = -1 EPERM' "$T/shim.2"
	cmp "$F.shim" "$F.kernel"
	assert_no_segment "$F.shim"
}

@test "ftruncate up past RLIMIT_FSIZE: SIGXFSZ and EFBIG, as with the kernel alone" {
	local how
	for how in shim kernel; do
		rm -f "$F.$how"
		if [ $how = kernel ]; then export DIOSHIM_DISABLE=1; fi
		(
			trap '' XFSZ
			ulimit -f 1024
			shim "$HELPERS/t_fops" -d -c "$F.$how" w 0 64K x41 \
				trunc 512K trunc 2M fa 0 1M 2M fa zero 600K 64K \
				size
		) >"$T/$how" 2>&1
		unset DIOSHIM_DISABLE
	done
	cat "$T/shim"
	diff -u "$T/kernel" "$T/shim"
	grep -q '^trunc 2097152 = -1 EFBIG' "$T/shim"
	cmp "$F.shim" "$F.kernel"
}

# A holder (no limit) has the reservation far ahead; a second process runs
# OPS with RLIMIT_FSIZE at 2 MiB and SIGXFSZ ignored, under the shim or
# (how=kernel) not: its answers into $T/$how.
limited_beside_holder() {
	local how=$1
	shift
	rm -f "$F.$how" "$T/held" "$T/go"
	if [ "$how" = kernel ]; then export DIOSHIM_DISABLE=1; fi
	shim "$HELPERS/t_fops" -d -c "$F.$how" w 0 4M x41 w 4M 4M x42 kernel \
		touch "$T/held" wait "$T/go" size >"$T/$how.holder" 2>&1 3>&- &
	BG=$!
	wait_file "$T/held"
	(
		trap '' XFSZ
		ulimit -f 2048
		shim "$HELPERS/t_fops" -d "$F.$how" "$@"
	) >"$T/$how" 2>&1
	touch "$T/go"
	wait "$BG"
	BG=
	unset DIOSHIM_DISABLE
}

@test "fallocate and posix_fallocate past RLIMIT_FSIZE inside another process's reservation: EFBIG, as with the kernel alone" {
	limited_beside_holder shim size fa 0 0 9M size pfa 0 10M fa zero 8M 1M \
		trunc 9M size
	limited_beside_holder kernel size fa 0 0 9M size pfa 0 10M fa zero 8M 1M \
		trunc 9M size
	cat "$T/shim.holder" "$T/shim"
	# Not vacuous: the holder's reservation reached past what is asked.
	[ "$(awk '$1 == "kernel" { print $3 }' "$T/shim.holder")" -gt 9437184 ]
	diff -u "$T/kernel" "$T/shim"
	grep -q '^fa 0 0 9437184 = -1 EFBIG' "$T/shim"
	[ "$(real_size "$F.shim")" -eq "$(real_size "$F.kernel")" ]
}

@test "a growth of a file with a capability: the kernel's to make, which drops it, as alone" {
	command -v setcap >/dev/null || skip "setcap (libcap2-bin) missing"
	local how
	for how in shim kernel; do
		rm -f "$F.$how" "$T/held" "$T/go"
		if [ $how = kernel ]; then export DIOSHIM_DISABLE=1; fi
		shim "$HELPERS/t_fops" -d -c "$F.$how" w 0 64K x41 kernel \
			touch "$T/held" wait "$T/go" fa 0 64K 64K fa zero 128K 64K \
			trunc 512K size >"$T/$how" 2>&1 3>&- &
		BG=$!
		wait_file "$T/held"
		noshim setcap cap_net_raw+ep "$F.$how"
		touch "$T/go"
		wait "$BG"
		BG=
		unset DIOSHIM_DISABLE
		echo "$how: $(grep -v '^kernel' "$T/$how" | tr '\n' ' ') cap '$(noshim getcap "$F.$how")'"
	done
	diff -u <(grep -v '^kernel' "$T/kernel") <(grep -v '^kernel' "$T/shim")
	[ -z "$(noshim getcap "$F.kernel")" ]
	[ -z "$(noshim getcap "$F.shim")" ]
}
