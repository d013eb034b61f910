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

# Lone writers (a description with no segment, announced as the file's
# guest) and the moment the file engages: a second description, a second
# process, a queued write, a fork.

@test "4 threads, each with a description of its own, appending: the second open engages the file with the first (reservations reach the kernel), every record once, size exact" {
	command -v strace >/dev/null || skip "strace is not installed"
	local n
	traced "$T/t4.log" "$HELPERS/t_appender" -t 4 -n 2000 -c \
		-l "$T/t4.rec" "$D/t4" >"$T/out"
	cat "$T/out"
	n=$(grep -c "fallocate(.*<$D/t4>, 0," "$T/t4.log" || true)
	echo "reservations: $n"
	[ "$n" -ge 1 ]
	run noshim "$HELPERS/t_verify" -S $((8000 * 4096)) "$D/t4" "$T/t4.rec"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$D/t4"
}

@test "two processes, each the file's lone writer when it opened, appending at once: the second makes the segment, the first joins it; every record once, size exact" {
	local i
	for i in 1 2 3; do
		rm -f "$D/p" "$T"/p.*
		noshim touch "$D/p"
		shim "$HELPERS/t_appender" -t 1 -n 20000 -w 0 -l "$T/p.1" "$D/p" \
			>"$T/p.out1" &
		sleep 0.2
		shim "$HELPERS/t_appender" -t 1 -n 4000 -w 1 -l "$T/p.2" "$D/p" \
			>"$T/p.out2"
		wait
		cat "$T/p.out1" "$T/p.out2"
		run noshim "$HELPERS/t_verify" -S $((24000 * 4096)) "$D/p" \
			"$T/p.1" "$T/p.2"
		echo "round $i: $output"
		[ "$status" -eq 0 ]
		assert_no_segment "$D/p"
	done
}

@test "a lone writer's append held in the kernel while a second process opens the file and appends: every record once, size exact (the kernel alone on XFS gives two appends one offset)" {
	local k out
	for k in noshim shim; do
		rm -f "$D/s.$k" "$T"/s.*
		$k "$HELPERS/slowguest" "$D/s.$k" "$T/s.1" "$T/s.ready" \
			"$T/s.go" >"$T/s.out1" &
		wait_file "$T/s.ready" || true
		if grep -q '^skip' "$T/s.out1"; then
			wait
			skip "$(cat "$T/s.out1")"
		fi
		$k "$HELPERS/t_appender" -t 1 -n 16 -w 1 -l "$T/s.2" "$D/s.$k" \
			>"$T/s.out2" &
		sleep 0.5
		touch "$T/s.go"
		wait
		cat "$T/s.out1" "$T/s.out2"
		run noshim "$HELPERS/t_verify" -S $((18 * 4096)) "$D/s.$k" \
			"$T/s.1" "$T/s.2"
		echo "$k: $output"
		out=$status
	done
	[ "$out" -eq 0 ]
	assert_no_segment "$D/s.shim"
}

@test "a lone writer idle while a second process opens and appends: the file stays exact (nothing reserved while the first may write as it is); sizes and appends as the kernel alone" {
	local f=$D/idle
	rm -f "$T"/i.*
	shim "$HELPERS/t_fops" -d -a -c "$f" a 4096 touch "$T/i.a1" \
		wait "$T/i.go" size a 4096 size touch "$T/i.a2" \
		wait "$T/i.end" >"$T/i.aout" &
	wait_file "$T/i.a1"
	shim "$HELPERS/t_fops" -d -a "$f" a 4096 a 4096 touch "$T/i.b1" \
		wait "$T/i.a2" size >"$T/i.bout" &
	wait_file "$T/i.b1"
	echo "kernel's size with both open: $(real_size "$f")"
	[ "$(real_size "$f")" -eq 12288 ]
	touch "$T/i.go"
	wait_file "$T/i.a2"
	touch "$T/i.end"
	wait
	cat "$T/i.aout" "$T/i.bout"
	[ "$(tr '\n' ' ' <"$T/i.aout")" = "a 4096 = 4096 size = 12288 a 4096 = 4096 size = 16384 " ]
	[ "$(tr '\n' ' ' <"$T/i.bout")" = "a 4096 = 4096 a 4096 = 4096 size = 16384 " ]
	[ "$(real_size "$f")" -eq 16384 ]
	assert_no_segment "$f"
}

@test "a lone writer's file written through libaio and liburing at queue depth 16: engaged at the first queued write (reservations reach the kernel); records in place, sizes exact all along" {
	command -v strace >/dev/null || skip "strace is not installed"
	local e n
	for e in aio uring; do
		run traced "$T/q$e.log" "$HELPERS/asyncwrite" "$e" seq "$D/q${e:0:1}" \
			3000 16 stat
		echo "$e: $output"
		[ "$status" -eq 0 ]
		n=$(grep -c "fallocate(.*<$D/q${e:0:1}>, 0," "$T/q$e.log" || true)
		echo "$e reservations: $n"
		[ "$n" -ge 1 ]
	done
	[ "$(real_size "$D/qa")" -eq $((3000 * 4096)) ]
	[ "$(real_size "$D/qu")" -eq $((3000 * 4096)) ]
	assert_no_segment "$D/qa"
	assert_no_segment "$D/qu"
}

@test "a lone writer forks, execs and spawns children that write through its descriptor (p_fork): every answer as the kernel alone" {
	mkdir -p "$D/k" "$D/s"
	run noshim "$HELPERS/p_fork" "$D/k/f"
	[ "$status" -eq 0 ]
	grep -v '^#' <<<"$output" | sed "s|$D/k/|D/|g" >"$T/fk"
	run shim "$HELPERS/p_fork" "$D/s/f"
	[ "$status" -eq 0 ]
	grep -v '^#' <<<"$output" | sed "s|$D/s/|D/|g" >"$T/fs"
	diff "$T/fk" "$T/fs"
	noshim cmp "$D/k/f" "$D/s/f"
	assert_no_segment "$D/s/f"
}

@test "a lone writer killed with kill -9 mid-run: nothing to recover (the file is the kernel's, no record, no segment); the next writer appends after its data" {
	local sz
	shim "$HELPERS/t_appender" -t 1 -n 100000 "$D/kill" >/dev/null &
	sleep 0.3
	pkill -9 -f "t_appender -t 1 -n 100000 $D/kill" || true
	wait || true
	sz=$(real_size "$D/kill")
	echo "size after the kill: $sz"
	[ $((sz % 4096)) -eq 0 ]
	[ "$sz" -gt 0 ]
	run noshim getfattr --absolute-names -n user.dioshim.eof "$D/kill"
	[[ "$output" == *"No such attribute"* ]]
	assert_no_segment "$D/kill"
	run shim "$HELPERS/t_fops" -d -a "$D/kill" a 4096 size
	echo "$output"
	[ "$output" = "$(printf 'a 4096 = 4096\nsize = %d' $((sz + 4096)))" ]
}

@test "a lone writer's thread cancelled in a loop of pwrite or fallocate: the next write neither hangs nor differs from the kernel alone" {
	local m
	for m in w f; do
		run timeout 60 env -u LD_PRELOAD "$HELPERS/lone" cancel "$D/c.k" "$m"
		echo "kernel alone ($m): $output"
		[ "$status" -eq 0 ]
		local k=$output
		run timeout 60 "$DIOSHIM" "$HELPERS/lone" cancel "$D/c.s" "$m"
		echo "under the shim ($m): $output"
		[ "$status" -eq 0 ]
		[ "$output" = "$k" ]
	done
}

@test "a signal handler writing to a lone writer's descriptor while its thread writes there: no hang, the size of the kernel alone" {
	run timeout 60 env -u LD_PRELOAD "$HELPERS/lone" signal "$D/s.k" 2
	echo "kernel alone: status $status, $output"
	[ "$status" -eq 0 ]
	local k=$output
	run timeout 60 "$DIOSHIM" "$HELPERS/lone" signal "$D/s.s" 2
	echo "kernel alone: $k; under the shim: $output"
	[ "$status" -eq 0 ]
	[ "$output" = "$k" ]
}

@test "a lone writer's fallocate(KEEP_SIZE), then a second description and threads: the blocks kept past the end stay, as with the kernel alone" {
	run noshim "$HELPERS/lone" keep "$D/k.k"
	local k=$output
	run shim "$HELPERS/lone" keep "$D/k.s"
	echo "kernel alone: $k; under the shim: $output"
	[ "${output#*allocated=}" = "${k#*allocated=}" ]
	# Every append (1 + 2 x 256 records): XFS alone gives two concurrent
	# O_APPEND|O_DIRECT writers one offset and may end shorter.
	[ "${output%% *}" = "size=$((513 * 4096))" ]
}

@test "the record of a reservation a killed writer left, its segment gone (a reboot): a lone writer's open recovers the file first" {
	local f=$D/rec
	DIOSHIM_ENGAGE=always shim "$HELPERS/t_fops" -d -a -c "$f" a 4096 \
		touch "$T/r.ready" wait "$T/r.never" >/dev/null &
	wait_file "$T/r.ready"
	echo "kernel's size with the reservation: $(real_size "$f")"
	[ "$(real_size "$f")" -gt 4096 ]
	pkill -9 -f "t_fops -d -a -c $f" || true
	wait || true
	rm -f "$(segment_of "$f")"
	run shim "$HELPERS/t_fops" -d -a "$f" a 4096 size
	echo "$output"
	[ "$output" = "$(printf 'a 4096 = 4096\nsize = 8192')" ]
	[ "$(real_size "$f")" -eq 8192 ]
}

@test "a lone writer's lseek(SEEK_END) right after its own long write, another process opening the file meanwhile: the end of that write (its writes slowed by a blkio limit)" {
	local cg=/sys/fs/cgroup/blkio/dioshim-engage.$$ dev d out
	[ -w /sys/fs/cgroup/blkio ] || skip "no cgroup v1 blkio controller to slow a writer with"
	dev=$(lsblk -no MAJ:MIN "$SCRATCH_DEV" 2>/dev/null | tr -d ' ')
	[ -n "$dev" ] || skip "no device numbers for $SCRATCH_DEV"
	mkdir "$cg" || skip "cannot make a blkio cgroup"
	if ! echo "$dev 20971520" >"$cg/blkio.throttle.write_bps_device"; then
		rmdir "$cg"
		skip "cannot limit writes to $SCRATCH_DEV"
	fi
	for d in 0.1 0.3 0.45; do
		rm -f "$D/st" "$T/st.go"
		bash -c 'echo $$ >'"$cg"'/cgroup.procs; exec "$@"' _ \
			"$DIOSHIM" "$HELPERS/t_fops" -d -c "$D/st" touch "$T/st.go" \
			w 0 10485760 end >"$T/st.out" &
		wait_file "$T/st.go"
		sleep "$d"
		shim "$HELPERS/t_fops" -d "$D/st" size >/dev/null
		wait
		out=$(tr '\n' ' ' <"$T/st.out")
		echo "after ${d}s: $out"
		[ "$out" = "w 0 10485760 = 10485760 end = 10485760 " ] || {
			rmdir "$cg"
			return 1
		}
	done
	rmdir "$cg"
}

@test "a lone writer idle until it exits while another process opens, appends and leaves: no segment is left behind (the file's next lone writers pay nothing)" {
	local f=$D/orphan
	rm -f "$T"/o.*
	shim "$HELPERS/t_fops" -d -c "$f" w 0 4096 touch "$T/o.a1" \
		wait "$T/o.go" >/dev/null &
	wait_file "$T/o.a1"
	run shim "$HELPERS/t_fops" -d -a "$f" a 4096 size
	echo "$output"
	[ "$output" = "$(printf 'a 4096 = 4096\nsize = 8192')" ]
	touch "$T/o.go"
	wait
	[ "$(real_size "$f")" -eq 8192 ]
	assert_no_segment "$f"
}

@test "processes writing 512 bytes each past the end with O_DIRECT and reading them back through a buffered descriptor (generic/418): every read whole, as with the kernel alone" {
	run noshim "$HELPERS/readback" "$D/r.kernel" 3 20
	echo "kernel alone: $output"
	[ "$status" -eq 0 ]
	run shim "$HELPERS/readback" "$D/r" 3 20
	echo "shim: $output"
	[ "$status" -eq 0 ]
	assert_no_segment "$D/r"
}
