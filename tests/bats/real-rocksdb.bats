#!/usr/bin/env bats
# fs: ext4 xfs
# RocksDB 7.8 (Debian 12's rocksdb-tools: db_bench, ldb, sst_dump) under
# the shim, with O_DIRECT flush and compaction writes and direct reads: a
# small write buffer (4 MiB) makes many new SST files, each written from
# its start by one background thread in 1 MiB pwrites, cut to its length
# with ftruncate, fsynced and closed; the WAL, MANIFEST and LOG are
# buffered.  Like every suite, this one engages each file from its first
# write (DIOSHIM_ENGAGE=always, helper.bash), so every SST gets a
# reservation and an EOF record; one test runs the users' default.
#
# Every database is checked outside the shim after db_bench has exited:
# each SST's kernel size is the size the MANIFEST records for it, sst_dump
# verifies its checksums and footer, ldb checkconsistency passes, key
# counts match the kernel alone's run of the same seeded workload, and no
# EOF record or segment is left (after a kill -9: once dioshim gc has
# run).  The first test proves the shim served the SST writes: it fails
# when db_bench runs on the kernel alone.

load helper

# The workload every test runs; --seed makes fillrandom and readrandom
# pick the same keys under the shim and on the kernel alone.
DB_OPTS=(--value_size=400 --write_buffer_size=4194304
	--target_file_size_base=16777216 --max_background_jobs=4
	--use_direct_io_for_flush_and_compaction=true --use_direct_reads=true
	--compression_type=none --verify_checksum=1 --seed=1 --histogram=0)

setup_file() {
	local t
	for t in db_bench ldb sst_dump getfattr; do
		if ! command -v "$t" >/dev/null; then
			export FS_SKIP="$t is not installed (Debian: rocksdb-tools, attr)"
			return 0
		fi
	done
	fs_setup_file "${FS:-ext4}" 2G
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	D=$SCRATCH_MNT/db.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	export DIOSHIM_LOG=$T/dioshim.log
	BG=
}
teardown() {
	# A db_bench left running (a failed assertion mid-test) is killed
	# by its id: the timeout wrapping it and the launcher's exec'd child.
	if [ -n "${BG:-}" ]; then
		pkill -9 -P "$BG" 2>/dev/null || true
		kill -9 "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
	if [ -n "${SCRATCH_MNT:-}" ] && pgrep -f -- "--db=$SCRATCH_MNT/" >&2; then
		echo "a db_bench is still running" >&2
		return 1
	fi
	if [ -s "${DIOSHIM_LOG:-/nonexistent}" ]; then
		echo "--- dioshim log" >&2
		tail -20 "$DIOSHIM_LOG" >&2
	fi
	return 0
}

# db_bench under the shim, and strictly outside it.
db_shim() { timeout 120 "$DIOSHIM" -- db_bench "${DB_OPTS[@]}" "$@"; }
db_kernel() { timeout 120 env -u LD_PRELOAD db_bench "${DB_OPTS[@]}" "$@"; }

# "X of Y found" from db_bench's readrandom line.
found() { sed -n 's/.*readrandom .*( *\([0-9]* of [0-9]*\) found).*/\1/p' <<<"$1"; }

# Keys in a database, counted outside the shim (hex: db_bench's keys are
# binary and may hold newlines).
key_count() { noshim ldb --db="$1" scan --hex --no_value | wc -l; }

# Segments of any file of the scratch filesystem, in the segment
# directory or a group's directory under it.
segments() {
	local dev
	dev=$(printf '%x' "$(noshim stat -c %d "$SCRATCH_MNT")")
	find "$DIOSHIM_SHM_DIR" -name "dioshim.$dev.*" 2>/dev/null
}

assert_no_segments() {
	local left
	left=$(segments)
	if [ -n "$left" ]; then
		echo "segments left: $left" >&2
		noshim "$DIOSHIM" gc >&2 || true
		return 1
	fi
}

# No file of DIR carries the shim's EOF record.
assert_no_record() {
	local rec
	rec=$(noshim getfattr -R -d -m '^user\.dioshim' --absolute-names "$1" 2>&1)
	if [ -n "$rec" ]; then
		echo "EOF records left: $rec" >&2
		return 1
	fi
}

# Every SST in DIR is live, and its size as the kernel reports it (outside
# the shim) is the size the current MANIFEST records for it: no reserved
# tail, nothing cut short.
assert_sst_sizes() {
	local dir=$1 n=0 num size path
	# --hex: db_bench's keys are binary.
	noshim ldb manifest_dump --hex --path="$dir/$(cat "$dir/CURRENT")" 2>&1 |
		LC_ALL=C sed -nE 's/^ *([0-9]+):([0-9]+)\[.*/\1 \2/p' |
		sort -u >"$T/live"
	while read -r num size; do
		path=$(printf '%s/%06d.sst' "$dir" "$num")
		if [ "$(real_size "$path")" != "$size" ]; then
			echo "$path: kernel size $(real_size "$path"), MANIFEST $size" >&2
			return 1
		fi
		n=$((n + 1))
	done <"$T/live"
	echo "# $n live SSTs, sizes as the MANIFEST records" >&2
	[ "$n" -gt 0 ]
	[ "$(find "$dir" -name '*.sst' | wc -l)" -eq "$n" ]
}

# sst_dump (exit status 0 even on corruption): every SST's checksums and
# footer verify, and a full scan of each finds no corruption.
assert_sst_verify() {
	local dir=$1 n out
	n=$(find "$dir" -name '*.sst' | wc -l)
	out=$(noshim sst_dump --file="$dir" --command=verify 2>&1)
	if [ "$(grep -ac 'The file is ok' <<<"$out")" -ne "$n" ] ||
		grep -aiE 'corrupt|not able|error' <<<"$out" >&2; then
		echo "$out" | grep -av '^options' >&2
		return 1
	fi
	out=$(noshim sst_dump --file="$dir" --command=check --verify_checksum 2>&1)
	if grep -aiE 'corrupt|not able|error' <<<"$out" >&2; then
		return 1
	fi
}

# Everything checked outside the shim once db_bench has exited.
check_db() {
	assert_no_record "$1"
	assert_sst_sizes "$1"
	assert_sst_verify "$1"
	run noshim ldb --db="$1" checkconsistency
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = OK ]
	assert_no_segments
}

@test "db_bench fillseq under the shim: every SST written by flush is reserved (EOF record, extending fallocate) and cut at close; none outside the shim" {
	command -v strace >/dev/null || skip "strace is not installed"
	local tr=(strace -f -y -qq -e 'trace=fallocate,fsetxattr,fremovexattr')
	local sst='[0-9]+<[^>]*/[0-9]+\.sst>'
	DIOSHIM_ENGAGE=always timeout 120 "${tr[@]}" -o "$T/shim.trace" \
		"$DIOSHIM" -- db_bench "${DB_OPTS[@]}" --db="$D" --num=40000 \
		--benchmarks=fillseq >"$T/out" 2>&1
	timeout 120 "${tr[@]}" -o "$T/kernel.trace" env -u LD_PRELOAD \
		db_bench "${DB_OPTS[@]}" --db="$D.k" --num=40000 \
		--benchmarks=fillseq >"$T/out.k" 2>&1
	local n
	n=$(find "$D" -name '*.sst' | wc -l)
	echo "# $n SSTs" >&3
	[ "$n" -ge 1 ]
	# Each SST got an EOF record, a reservation (fallocate mode 0, which
	# grows the kernel's size) and had its record removed at close.
	local f name calls
	for f in "$D"/*.sst; do
		name=${f##*/}
		calls=$(grep -aE "^[0-9]+ +[a-z]+\([0-9]+<[^>]*/$name>" "$T/shim.trace" |
			sed -E 's/^[0-9]+ +//; s/<unfinished \.\.\.>//')
		echo "$name:"$'\n'"$calls" >&2
		grep -qE "^fsetxattr\([0-9]+<[^>]*>, \"user.dioshim.eof\"" <<<"$calls"
		grep -qE "^fallocate\([0-9]+<[^>]*>, 0, " <<<"$calls"
		grep -qE "^fremovexattr\([0-9]+<[^>]*>, \"user.dioshim.eof\"\)" <<<"$calls"
	done
	# The kernel alone: RocksDB itself neither reserves its SSTs nor
	# records anything on them.
	if grep -aE "fsetxattr\($sst|fallocate\($sst, 0, " "$T/kernel.trace"; then
		return 1
	fi
	check_db "$D"
	check_db "$D.k"
	[ "$(key_count "$D")" -eq 40000 ]
}

@test "db_bench fillseq 200000 x 400 B under the shim: exactly 200000 keys, SST sizes as the MANIFEST says, checksums verify; readrandom under the shim finds every key" {
	run db_shim --db="$D" --num=200000 --benchmarks=fillseq
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"fillseq "*"200000 operations"* ]]
	check_db "$D"
	[ "$(key_count "$D")" -eq 200000 ]
	# The keys are 0..199999: the last one is 199999.
	[ "$(noshim ldb --db="$D" scan --hex --no_value | tail -n 1)" = \
		0x0000000000030D3F3030303030303030 ]
	run db_shim --db="$D" --num=200000 --use_existing_db=1 \
		--benchmarks=readrandom --reads=1000
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(found "$output")" = "1000 of 1000" ]
	check_db "$D"
}

@test "db_bench fillrandom (2 threads), compact, readrandom under the shim: the same keys and reads found as the kernel alone, SSTs intact, nothing left behind" {
	run db_kernel --db="$D.k" --num=100000 --threads=2 \
		--benchmarks=fillrandom,compact,readrandom --reads=1000
	echo "$output"
	[ "$status" -eq 0 ]
	local want_found
	want_found=$(found "$output")
	[ -n "$want_found" ]
	run db_shim --db="$D" --num=100000 --threads=2 \
		--benchmarks=fillrandom,compact,readrandom --reads=1000
	echo "$output"
	[ "$status" -eq 0 ]
	echo "# kernel alone: $want_found found; dioshim: $(found "$output") found" >&3
	[ "$(found "$output")" = "$want_found" ]
	check_db "$D"
	check_db "$D.k"
	local k s
	k=$(key_count "$D.k")
	s=$(key_count "$D")
	echo "# keys: kernel alone $k, dioshim $s" >&3
	[ "$s" -eq "$k" ]
	[ "$s" -gt 50000 ]
}

@test "db_bench overwrite, then readrandom on the existing database, under the shim with the default engagement (DIOSHIM_ENGAGE=contention): same keys and reads as the kernel alone" {
	run db_kernel --db="$D.k" --num=60000 --benchmarks=fillrandom,overwrite
	[ "$status" -eq 0 ]
	run db_kernel --db="$D.k" --num=60000 --use_existing_db=1 \
		--benchmarks=readrandom --reads=1000
	echo "$output"
	[ "$status" -eq 0 ]
	local want_found
	want_found=$(found "$output")
	export DIOSHIM_ENGAGE=contention
	run db_shim --db="$D" --num=60000 --benchmarks=fillrandom,overwrite
	echo "$output"
	[ "$status" -eq 0 ]
	run db_shim --db="$D" --num=60000 --use_existing_db=1 \
		--benchmarks=readrandom --reads=1000
	echo "$output"
	[ "$status" -eq 0 ]
	[ -n "$want_found" ]
	[ "$(found "$output")" = "$want_found" ]
	check_db "$D"
	[ "$(key_count "$D")" -eq "$(key_count "$D.k")" ]
}

# SSTs of DIR holding a reservation now: "NAME:SIZE" for each file with
# an EOF record ("v1 EOF PHYS") whose PHYS is the kernel's size.
reserved_ssts() {
	noshim getfattr -n user.dioshim.eof --absolute-names "$1"/*.sst 2>/dev/null |
		awk '/^# file: / { f = substr($0, 9) }
		     /^user.dioshim.eof=/ { split($0, q, "\""); split(q[2], v, " ")
					    print f, v[3] }' |
		while read -r f phys; do
			[ "$(real_size "$f" 2>/dev/null)" != "$phys" ] ||
				printf '%s:%s ' "${f##*/}" "$phys"
		done
}

@test "kill -9 of db_bench fillrandom (WAL on) while an SST it writes holds a reservation; reopened under the shim: the database opens and reads, checkconsistency passes; then dioshim gc exits 0 and leaves no segment" {
	timeout -s KILL 120 "$DIOSHIM" -- db_bench "${DB_OPTS[@]}" --db="$D" \
		--num=3000000 --threads=2 --benchmarks=fillrandom --sync=0 \
		>"$T/bg.out" 2>&1 &
	BG=$!
	# Wait (20 s at most) for a few flushes, then for an SST being
	# written with its reservation in place: an EOF record on it whose
	# reserved size is the kernel's size of the file.
	local rec='' pid end=$((SECONDS + 20)) t0=$SECONDS
	while [ "$SECONDS" -lt "$end" ] &&
		[ "$(find "$D" -name '*.sst' 2>/dev/null | wc -l)" -lt 3 ]; do
		sleep 0.05
	done
	end=$((SECONDS + 20))
	pid=$(pgrep -P "$BG" -x db_bench) || {
		echo "db_bench is not running" >&2
		tail -5 "$T/bg.out" >&2
		return 1
	}
	while [ "$SECONDS" -lt "$end" ]; do
		rec=$(reserved_ssts "$D")
		[ -n "$rec" ] && break
		sleep 0.02
	done
	kill -9 "$pid"
	wait "$BG" || true
	BG=
	echo "# killed after $((SECONDS - t0)) s with $(find "$D" -name '*.sst' | wc -l) SSTs; reserved: ${rec:-none}" >&3
	ls -li "$D" >&2
	run db_shim --db="$D" --num=3000000 --use_existing_db=1 \
		--benchmarks=readseq
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"readseq "*" operations"* ]]
	ls -li "$D" >&2
	# Segments of files nobody opens again (RocksDB deletes the SSTs
	# the killed process was writing) are left, as documented, for
	# dioshim gc, which must then remove every one.
	local left
	left=$(segments)
	echo "# segments left after the reopen: ${left:-none}" >&3
	run noshim "$DIOSHIM" gc
	echo "$output"
	[ "$status" -eq 0 ]
	check_db "$D"
	[ "$(key_count "$D")" -gt 0 ]
}
