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

@test "a writer started before the segment directory exists: one look at it per call while it is missing; a segment made once it is there is seen (sizes and appends as the kernel alone)" {
	command -v strace >/dev/null || skip "strace is not installed"
	local late=$T/shm-late f=$D/late out
	# While it is missing: reads and writes of a file make one system call
	# more each than the kernel alone, not a search for a segment each.
	head -c 2M /dev/zero >"$D/src"
	DIOSHIM_SHM_DIR=$late timeout 120 strace -f -c -o "$T/sc" "$DIOSHIM" \
		dd if="$D/src" of="$D/dst" bs=4k 2>/dev/null
	grep total "$T/sc"
	[ "$(awk '$NF == "total" { print $(NF-2) }' "$T/sc")" -lt 3000 ]
	# A appends, the directory is made, B appends through a reservation;
	# A's size and next append see B's.
	DIOSHIM_SHM_DIR=$late timeout 120 "$DIOSHIM" "$HELPERS/t_fops" -d -a -c \
		"$f" a 4096 touch "$T/a1" wait "$T/go" size a 4096 size \
		touch "$T/a2" wait "$T/end" >"$T/a.out" &
	wait_file "$T/a1"
	mkdir -m 1777 "$late"
	DIOSHIM_SHM_DIR=$late DIOSHIM_ENGAGE=always timeout 120 "$DIOSHIM" \
		"$HELPERS/t_fops" -d -a "$f" a 4096 touch "$T/b1" wait "$T/a2" \
		size >"$T/b.out" &
	wait_file "$T/b1"
	echo "kernel's size with B's reservation: $(real_size "$f")"
	[ "$(real_size "$f")" -gt 8192 ]
	touch "$T/go"
	wait_file "$T/a2"
	touch "$T/end"
	wait
	cat "$T/a.out" "$T/b.out"
	out=$(tr '\n' ' ' <"$T/a.out")
	[ "$out" = "a 4096 = 4096 size = 8192 a 4096 = 4096 size = 12288 " ]
	[ "$(cat "$T/b.out")" = "$(printf 'a 4096 = 4096\nsize = 12288')" ]
	[ "$(real_size "$f")" -eq 12288 ]
}

