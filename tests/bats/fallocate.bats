#!/usr/bin/env bats
# fs: ext4 xfs
# Every fallocate mode under the shim, on a file with a reservation standing
# (an O_DIRECT write first, so the kernel's size is ahead of the logical
# one): sizes, contents and every answer must be what the kernel alone
# gives for the same calls.  The reference is the same helper run with
# DIOSHIM_DISABLE=1; files are compared outside the shim.

load helper


setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/fa.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	BG=
}
teardown() {
	reap_bg "$T/go"
}


# The size and the sha256 of a file, seen outside the shim.
describe() {
	echo "size $(real_size "$1") sha256 $(noshim sha256sum <"$1" | cut -c1-64)"
}

# Run t_fops OPS... on a new file under the shim and, as the reference,
# with the shim disabled; every answer (but the kernel's own size), the
# final size and the contents must agree.  The shimmed run must have had a
# reservation standing after its first write.
same_as_kernel() {
	rm -f "$F.shim" "$F.kernel"
	# shellcheck disable=SC2086 # FOPTS: more t_fops options, or none
	shim "$HELPERS/t_fops" -d ${FOPTS:-} -c "$F.shim" "$@" >"$T/shim" 2>&1
	# shellcheck disable=SC2086
	DIOSHIM_DISABLE=1 shim "$HELPERS/t_fops" -d ${FOPTS:-} -c "$F.kernel" \
		"$@" >"$T/kernel" 2>&1
	echo "--- under the shim"
	cat "$T/shim"
	echo "--- kernel alone"
	cat "$T/kernel"
	diff -u <(grep -v '^kernel' "$T/kernel") <(grep -v '^kernel' "$T/shim")
	# Not vacuous: the first "kernel" line shows the reservation.
	local k
	k=$(awk '$1 == "kernel" { print $3; exit }' "$T/shim")
	echo "kernel size under the shim after the first write: $k"
	[ "${k:-0}" -gt 65536 ]
	local ds dk
	ds=$(describe "$F.shim")
	dk=$(describe "$F.kernel")
	echo "shim:   $ds"
	echo "kernel: $dk"
	[ "$ds" = "$dk" ]
	assert_no_segment "$F.shim"
}

@test "fallocate mode 0 past EOF inside the reservation: the size grows to off+len, as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa 0 128K 64K size end stat statx \
		r 0 256K w 192K 4K x42 size end
	grep -q '^size = 196608$' "$T/shim"
}

@test "fallocate mode 0 past the reservation: the size grows to off+len, as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa 0 4M 64K size end stat \
		data 64K hole 64K r 4M 128K w 4160K 4K x42 size end
	grep -q '^size = 4263936$' "$T/shim"
}

@test "fallocate mode 0 inside EOF and over EOF: the size is what the kernel alone gives" {
	same_as_kernel w 0 64K x41 kernel fa 0 0 32K size fa 0 32K 64K size end \
		r 0 1M
}

@test "fallocate KEEP_SIZE inside and past the reservation: the size does not change, as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa keep 128K 64K size end \
		fa keep 4M 64K size end data 64K hole 64K r 0 8M w 64K 4K x42 size
	grep -q '^size = 69632$' "$T/shim"
}

@test "fallocate KEEP_SIZE past EOF: the blocks it preallocated are still allocated after the last close, as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa keep 128K 64K size
	echo "allocated 512-byte blocks of data: shim $(data_blocks "$F.shim"), kernel alone $(data_blocks "$F.kernel")"
	[ "$(data_blocks "$F.shim")" -eq "$(data_blocks "$F.kernel")" ]
}

@test "PUNCH_HOLE|KEEP_SIZE inside EOF and across it: the range reads as zeros, the size does not change, as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa punch,keep 8K 8K r 0 64K size end \
		data 8K hole 0 fa punch,keep 60K 64K size end r 0 1M w 64K 4K x42 size
	grep -q '^r 0 65536 = 65536 zeros=8192 ' "$T/shim"
}

@test "ZERO_RANGE inside EOF, and past EOF with and without KEEP_SIZE: as with the kernel alone" {
	same_as_kernel w 0 64K x41 kernel fa zero 8K 8K r 0 64K size \
		fa zero,keep 60K 16K size end r 0 1M fa zero 60K 16K size end \
		r 0 1M w 76K 4K x42 size fa zero 2M 64K size end
	grep -q '^fa zero,keep 61440 16384 = 0$' "$T/shim"
	grep -q '^size = 2162688$' "$T/shim"
}

@test "COLLAPSE_RANGE with a reservation standing: size and contents as with the kernel alone; the next write lands at the new EOF" {
	same_as_kernel w 0 128K kernel fa collapse 16K 16K size end r 0 1M \
		kernel w 112K 4K x43 size end fa collapse 0 4K size r 0 1M
	grep -q '^fa collapse 16384 16384 = 0$' "$T/shim"
}

@test "INSERT_RANGE with a reservation standing: size and contents as with the kernel alone; the next write lands at the new EOF" {
	same_as_kernel w 0 128K kernel fa insert 16K 16K size end r 0 1M \
		kernel w 144K 4K x43 size end fa insert 0 4K size r 0 1M
	grep -q '^fa insert 16384 16384 = 0$' "$T/shim"
}

@test "COLLAPSE_RANGE reaching EOF and INSERT_RANGE at EOF fail with EINVAL under the shim, as with the kernel alone (the reservation does not make them valid)" {
	same_as_kernel w 0 64K kernel fa collapse 48K 16K fa collapse 32K 64K \
		fa insert 64K 4K fa insert 128K 4K size end fa insert 60K 4K size
	grep -q '^fa collapse 49152 16384 = -1 EINVAL$' "$T/shim"
	grep -q '^fa insert 65536 4096 = -1 EINVAL$' "$T/shim"
}

@test "posix_fallocate inside EOF, inside the reservation and past it: the size is what the kernel alone gives" {
	same_as_kernel w 0 64K x41 kernel pfa 0 32K size pfa 64K 64K size end \
		pfa 4M 4K size end r 0 8M w 128K 4K x42 size
	grep -q '^size = 4198400$' "$T/shim"
}

@test "fallocate growing the file refused (EFBIG, a mode the kernel does not know), then an append: it lands at the end, as with the kernel alone" {
	FOPTS=-a same_as_kernel a 64K x41 kernel fa 0 64K 0x7ffffffffffff000 \
		size a 4K x42 size fa 0x1000 64K 64K size a 4K x43 size end \
		r 0 1M
	grep -q '^size = 73728$' "$T/shim"
}

# The size after "fa 0 64K 8G" (ENOSPC) in t_fops output $1, and the
# kernel's own size then.
after_enospc() {
	awk '/ENOSPC$/ { on = 1; next } on && $1 == "size" { s = $3 }
	     on && $1 == "kernel" { print s, $3; exit }' "$1"
}

@test "fallocate growing the file past the free space (ENOSPC): the size it leaves is the kernel's (ext4 keeps what it allocated), and an append goes after it, as with the kernel alone" {
	local ops=(a 64K x41 fa 0 64K 8G size kernel a 4K x42 size trunc 0)
	rm -f "$F.k" "$F.s"
	DIOSHIM_DISABLE=1 shim "$HELPERS/t_fops" -d -a -c "$F.k" "${ops[@]}" \
		>"$T/kernel" 2>&1
	rm -f "$F.k"
	sync
	shim "$HELPERS/t_fops" -d -a -c "$F.s" "${ops[@]}" >"$T/shim" 2>&1
	echo "--- kernel alone"
	cat "$T/kernel"
	echo "--- under the shim"
	cat "$T/shim"
	local ks kk ss sk
	read -r ks kk <<<"$(after_enospc "$T/kernel")"
	read -r ss sk <<<"$(after_enospc "$T/shim")"
	grep -q '^fa 0 65536 8589934592 = -1 ENOSPC$' "$T/shim"
	if [ "$ks" -eq 65536 ]; then
		# XFS: a refused fallocate leaves the size alone
		[ "$ss" -eq 65536 ]
	else
		# ext4: the size covers what was allocated, for both
		[ "$ss" -gt 65536 ] && [ "$ss" -eq "$sk" ]
	fi
	# The append: refused (no room), or at the size; never elsewhere.
	local r sz
	r=$(awk '$1 == "a" && $2 == 4096 { print $4 }' "$T/shim")
	sz=$(awk '$1 == "size" { s = $3 } END { print s }' "$T/shim")
	if [ "$r" = 4096 ]; then [ "$sz" -eq $((ss + 4096)) ]; else [ "$sz" -eq "$ss" ]; fi
	assert_no_segment "$F.s"
}

# util-linux fallocate(1), run under the shim by another process while a
# shimmed O_APPEND|O_DIRECT writer holds the file open with a reservation;
# the writer then appends and reads everything back.  Reference: the same
# with the shim disabled everywhere.
tool_run() {
	local f=$1
	shift
	rm -f "$f" "$T/go" "$T/ready"
	shim "$HELPERS/t_fops" -d -a -c "$f" a 64K x41 a 64K x42 kernel \
		touch "$T/ready" wait "$T/go" size end kernel a 4K x43 size end \
		r 0 1M >"$T/writer" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	shim fallocate "$@" "$f"
	echo "fallocate $*: rc $?" >>"$T/writer"
	touch "$T/go"
	wait "$BG"
	BG=
}

tool_same_as_kernel() {
	tool_run "$F.shim" "$@"
	mv "$T/writer" "$T/shim"
	DIOSHIM_DISABLE=1 tool_run "$F.kernel" "$@"
	mv "$T/writer" "$T/kernel"
	echo "--- fallocate $*: under the shim"
	cat "$T/shim"
	echo "--- kernel alone"
	cat "$T/kernel"
	diff -u <(grep -v '^kernel' "$T/kernel") <(grep -v '^kernel' "$T/shim")
	local k
	k=$(awk '$1 == "kernel" { print $3; exit }' "$T/shim")
	[ "${k:-0}" -gt 131072 ]
	local ds dk
	ds=$(describe "$F.shim")
	dk=$(describe "$F.kernel")
	echo "shim:   $ds"
	echo "kernel: $dk"
	[ "$ds" = "$dk" ]
	assert_no_segment "$F.shim"
}

@test "util-linux fallocate -o -l past EOF, by another shimmed process while an appender holds the file: as with the kernel alone" {
	tool_same_as_kernel -o 256K -l 64K
	grep -q '^size = 327680$' "$T/shim"
}

@test "util-linux fallocate -n (KEEP_SIZE) by another shimmed process while an appender holds the file: as with the kernel alone" {
	tool_same_as_kernel -n -o 128K -l 1M
	grep -q '^size = 131072$' "$T/shim"
}

@test "util-linux fallocate -p (punch) by another shimmed process while an appender holds the file: as with the kernel alone" {
	tool_same_as_kernel -p -o 60K -l 8K
}

@test "util-linux fallocate -z (zero range past EOF) by another shimmed process while an appender holds the file: as with the kernel alone" {
	tool_same_as_kernel -z -o 120K -l 64K
	grep -q '^size = 188416$' "$T/shim"
}

@test "util-linux fallocate -c (collapse) by another shimmed process while an appender holds the file: the appender continues at the new EOF, as with the kernel alone" {
	tool_same_as_kernel -c -o 16K -l 16K
	grep -q '^size = 114688$' "$T/shim"
}

@test "util-linux fallocate -i (insert) by another shimmed process while an appender holds the file: the appender continues at the new EOF, as with the kernel alone" {
	tool_same_as_kernel -i -o 16K -l 16K
	grep -q '^size = 147456$' "$T/shim"
}

@test "blocks the program allocated past EOF (KEEP_SIZE) stay allocated after a last close through a read-only descriptor, as with the kernel alone" {
	local side blocks=()
	for side in shim kernel; do
		mkdir -p "$SCRATCH_MNT/keep.$side"
		# shellcheck disable=SC2046
		$([ "$side" = kernel ] && echo "env DIOSHIM_DISABLE=1") \
			"$DIOSHIM" "$HELPERS/p_do" "$SCRATCH_MNT/keep.$side" >"$T/$side" <<'SCRIPT'
fresh k
rep 8 write @a 4k
fallocate @w KEEP_SIZE 48k 1m
close @a
close @w
close @rw
close @r
SCRIPT
		blocks+=("$(noshim stat -c %s "$SCRATCH_MNT/keep.$side/k") $(data_blocks "$SCRATCH_MNT/keep.$side/k")")
	done
	echo "shim: ${blocks[0]}, kernel alone: ${blocks[1]}"
	[ "${blocks[0]}" = "${blocks[1]}" ]
}
