#!/usr/bin/env bats
# fs: ext4 xfs
# Pay only for parallelism (DESIGN.md 7), in the default mode: a file with
# one writer reaches the kernel as the program wrote it — no reservation,
# no EOF record, no trim, no prefill — and the shim engages a file as
# soon as a second write is in flight on it.  Files are checked against
# the kernel alone, with tools outside the shim.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	export DIOSHIM_ENGAGE=contention
	D=$SCRATCH_MNT/engage.$BATS_TEST_NUMBER
	rm -rf "$D"
	mkdir -p "$D"
	T=$BATS_TEST_TMPDIR
}

# traced LOG CMD...: strace -f -y of the launcher running CMD (strace is
# not preloaded), the calls that change sizes and xattrs.
traced() {
	local log=$1
	shift
	timeout 300 strace -f -qq -y -s 0 \
		-e trace=fallocate,ftruncate,fsetxattr,fremovexattr,setxattr \
		-o "$log" "$DIOSHIM" "$@"
}

# calls LOG: the traced calls on files under $D (not on shared memory).
# The files are new: O_TRUNC has nothing to cut, and the shim's own
# truncate (which drains the writers of a file that exists) is not made.
calls() { grep -c "<$D/" "$1" || true; }

@test "one writer per file (create, 4 KiB and 64 KiB pwrites, fsync, close): no fallocate, ftruncate or xattr reaches the kernel; sizes and contents as the kernel alone; no segment left" {
	command -v strace >/dev/null || skip "strace is not installed"
	traced "$T/life.log" "$BUILD/filesbench" life "$D" 20 65536 4096
	echo "calls on the files: $(calls "$T/life.log")"
	grep "<$D/" "$T/life.log" | head -5
	[ "$(calls "$T/life.log")" -eq 0 ]
	mkdir "$D/k"
	noshim "$BUILD/filesbench" life "$D/k" 20 65536 4096
	for i in 0 7 19; do
		[ "$(real_size "$D/f$i")" -eq 65536 ]
		noshim cmp "$D/f$i" "$D/k/f$i"
		run noshim getfattr --absolute-names -n user.dioshim.eof "$D/f$i"
		[[ "$output" == *"No such attribute"* ]]
		assert_no_segment "$D/f$i"
	done
}

@test "one writer appending with O_APPEND, size and position checked after every write: every answer as the kernel alone, and nothing reserved" {
	command -v strace >/dev/null || skip "strace is not installed"
	local ops=() i
	for i in $(seq 16); do ops+=(a 4096 size end cur); done
	traced "$T/app.log" "$HELPERS/t_fops" -d -a -c -t "$D/a" "${ops[@]}" >"$T/shim"
	noshim "$HELPERS/t_fops" -d -a -c -t "$D/k" "${ops[@]}" >"$T/kernel"
	diff "$T/kernel" "$T/shim"
	[ "$(calls "$T/app.log")" -eq 0 ]
	noshim cmp "$D/a" "$D/k"
}

@test "8 threads appending at a shared counter: the file engages (reservations reach the kernel), every record once, size exact, no tail left" {
	command -v strace >/dev/null || skip "strace is not installed"
	traced "$T/race.log" "$APPENDBENCH" run -m counter -t 8 -s 1 "$D/r" >"$T/out"
	cat "$T/out"
	local n
	n=$(grep -c "fallocate(.*<$D/r>, 0," "$T/race.log" || true)
	echo "reservations: $n"
	[ "$n" -ge 1 ]
	run noshim "$APPENDBENCH" check -m counter -t 8 "$D/r"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$D/r")" -eq "$(sed -n 's/.* size=\([0-9]*\).*/\1/p' "$T/out")" ]
	assert_no_segment "$D/r"
}

@test "one writer scattering 4 KiB pieces over a sparse file (prefill on): as sparse as the kernel alone leaves it" {
	command -v fio >/dev/null || skip "fio is not installed"
	local args=(--name=s --rw=write:8k --bs=4k --direct=1 --ioengine=psync
		--size=16M --fallocate=none --buffer_pattern=0x5a)
	noshim fio "${args[@]}" --filename="$D/k" >/dev/null
	DIOSHIM_PREFILL=on shim fio "${args[@]}" --filename="$D/s" >/dev/null
	echo "du kernel $(noshim du -k "$D/k") shim $(noshim du -k "$D/s")"
	[ "$(noshim du -k "$D/s" | cut -f1)" -eq "$(noshim du -k "$D/k" | cut -f1)" ]
	[ "$(real_size "$D/s")" -eq "$(real_size "$D/k")" ]
	noshim cmp "$D/s" "$D/k"
}
