#!/usr/bin/env bats
# fs: ext4 xfs
# Sizes while a shimmed writer holds a reservation: every tool under the
# shim sees the logical EOF (never the reserved size), tools outside it see
# the reservation, and once the writer is gone everybody agrees.

load helper


setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	F=$SCRATCH_MNT/sizes.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	BG=
}
teardown() {
	# Let a writer still waiting for its signal finish, then reap it.
	reap_bg "$T/go" "$T/stop"
}


# "eof phys" from `dioshim status`, or nothing once the segment is gone.
seg_words() {
	"$DIOSHIM" status "$1" | awk '$2 == "eof" { print $3, $5 }'
}

# Start 4 shimmed threads appending 4 KiB records until $T/stop exists.
start_appender() {
	shim "$HELPERS/t_appender" -t 4 -n 40000 -c -r "256:$T/ready" \
		-s "$T/stop" -l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
}

stop_appender() {
	touch "$T/stop"
	wait "$BG"
	local rc=$?
	BG=
	cat "$T/out"
	return $rc
}

# One size as a tool under the shim reports it.
tool_size() {
	case $1 in
	stat) shim stat -c %s "$F" ;;
	ls) shim ls -ln "$F" | awk '{ print $5 }' ;;
	wc) shim wc -c "$F" | awk '{ print $1 }' ;;
	wc-stdin) shim wc -c <"$F" ;;
	seek-end) shim "$HELPERS/t_fops" -r "$F" end | awk '{ print $3 }' ;;
	fstat) shim "$HELPERS/t_fops" -r "$F" size | awk '{ print $3 }' ;;
	esac
}

@test "while 4 threads append, stat, ls, wc and lseek(SEEK_END) under the shim see the logical size: whole records, monotonic, never the reservation" {
	local i tool words e1 p1 e2 p2 s evidence=0 prev=0 n=0
	start_appender
	for ((i = 0; i < 4; i++)); do
		for tool in stat ls wc wc-stdin seek-end fstat; do
			words=$(seg_words "$F")
			[ -n "$words" ] || break 2
			read -r e1 p1 <<<"$words"
			s=$(tool_size "$tool")
			words=$(seg_words "$F")
			[ -n "$words" ] || break 2
			read -r e2 p2 <<<"$words"
			echo "eof $e1..$e2 phys $p1..$p2: $tool $s"
			[[ "$s" =~ ^[0-9]+$ ]]
			[ $((s % 4096)) -eq 0 ]
			[ "$s" -ge "$e1" ]
			[ "$s" -le "$e2" ]
			[ "$s" -ge "$prev" ]
			prev=$s n=$((n + 1))
			# The reservation stood over the whole call: the size
			# seen was below the kernel's.
			[ "$p1" -le "$e2" ] || evidence=$((evidence + 1))
		done
	done
	stop_appender
	echo "$n samples, $evidence with a reservation standing throughout"
	[ "$evidence" -ge 4 ]
}

@test "while 4 threads append, tools outside the shim see the reserved size, never less than the logical one" {
	local i words e1 p1 e2 p2 out bigger=0
	start_appender
	for ((i = 0; i < 10; i++)); do
		words=$(seg_words "$F")
		[ -n "$words" ] || break
		read -r e1 p1 <<<"$words"
		out=$(real_size "$F")
		words=$(seg_words "$F")
		[ -n "$words" ] || break
		read -r e2 p2 <<<"$words"
		echo "eof $e1..$e2 phys $p1..$p2: outside $out"
		[ "$out" -ge "$e1" ]
		[ "$out" -ge "$p1" ]
		[ "$out" -gt "$e2" ] && bigger=$((bigger + 1))
	done
	stop_appender
	# Not vacuous: outside the shim the reservation was visible.
	[ "$bigger" -ge 3 ]
}

@test "after the writer exits, tools in and out of the shim agree on the exact size" {
	local n want
	start_appender
	stop_appender
	output=$(cat "$T/out")
	n=$(sed -n 's/.*records=\([0-9]*\).*/\1/p' <<<"$output")
	want=$((n * 4096))
	[[ "$output" == *" size=$want "* ]]
	[ "$(real_size "$F")" -eq "$want" ]
	[ "$(noshim ls -ln "$F" | awk '{ print $5 }')" -eq "$want" ]
	[ "$(noshim wc -c <"$F")" -eq "$want" ]
	[ "$(shim stat -c %s "$F")" -eq "$want" ]
	[ "$(shim ls -ln "$F" | awk '{ print $5 }')" -eq "$want" ]
	[ "$(shim wc -c "$F" | awk '{ print $1 }')" -eq "$want" ]
	[ "$(shim "$HELPERS/t_fops" -r "$F" end)" = "end = $want" ]
	run noshim "$HELPERS/t_verify" -S "$want" "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

# The script a writer runs while it holds a reservation: 8 KiB written with
# O_DIRECT, so the kernel's size is the reservation and eof is 8192.
SEEKS="size end data 0 hole 0 data 4096 data 8192 hole 8192 data 8193 hole 12288 data 1M hole 1M data 64M hole 64M"
READS="r 8192 4096 r 12288 4096 r 4096 8192 r 0 1M set 4096 rd 8192 rd 4096 cur"

@test "SEEK_DATA/SEEK_HOLE at and past EOF give ENXIO under the shim while a reservation exists, as with the kernel alone" {
	# shellcheck disable=SC2086
	shim "$HELPERS/t_fops" -d -c "$F" w 0 8192 kernel $SEEKS \
		touch "$T/ready" wait "$T/go" >"$T/writer" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	run "$DIOSHIM" status "$F"
	echo "$output"
	[[ "$output" == *" eof 8192 phys "* ]]
	[[ "$output" != *" phys 8192 "* ]]
	# Another shimmed process, reading.
	# shellcheck disable=SC2086
	shim "$HELPERS/t_fops" -r "$F" $SEEKS >"$T/reader"
	# Outside the shim the tail is there (the check can fail).
	run noshim "$HELPERS/t_fops" -r "$F" hole 8192 end
	echo "$output"
	[ "${lines[0]}" = "hole 8192 = 8192" ]
	[ "${lines[1]}" != "end = 8192" ]
	touch "$T/go"
	wait "$BG"
	BG=
	grep -v '^kernel' "$T/writer" >"$T/shim-writer"
	cat "$T/writer" "$T/reader"
	grep -q '^data 8192 = -1 ENXIO$' "$T/reader"
	grep -q '^hole 8192 = -1 ENXIO$' "$T/reader"
	grep -q '^data 1048576 = -1 ENXIO$' "$T/reader"
	# The kernel alone, same calls, no reservation.
	rm -f "$F"
	# shellcheck disable=SC2086
	DIOSHIM_DISABLE=1 shim "$HELPERS/t_fops" -d -c "$F" w 0 8192 $SEEKS >"$T/kernel-writer"
	# shellcheck disable=SC2086
	noshim "$HELPERS/t_fops" -r "$F" $SEEKS >"$T/kernel-reader"
	diff -u "$T/kernel-writer" "$T/shim-writer"
	diff -u "$T/kernel-reader" "$T/reader"
	assert_no_segment "$F"
}

@test "reads at EOF return 0 and a read straddling EOF is short under the shim while a reservation exists, as with the kernel alone" {
	# shellcheck disable=SC2086
	shim "$HELPERS/t_fops" -d -c "$F" w 0 8192 $READS \
		touch "$T/ready" wait "$T/go" >"$T/writer" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	run "$DIOSHIM" status "$F"
	echo "$output"
	[[ "$output" == *" eof 8192 phys "* ]]
	[[ "$output" != *" phys 8192 "* ]]
	# Other shimmed readers: O_DIRECT and buffered.
	# shellcheck disable=SC2086
	shim "$HELPERS/t_fops" -d -r "$F" $READS >"$T/reader-direct"
	# shellcheck disable=SC2086
	shim "$HELPERS/t_fops" -r "$F" $READS >"$T/reader-buffered"
	# Outside the shim, the reserved tail reads as zeros.
	run noshim "$HELPERS/t_fops" -r "$F" r 8192 4096
	[[ "$output" == "r 8192 4096 = 4096 zeros=4096 "* ]]
	touch "$T/go"
	wait "$BG"
	BG=
	cat "$T/writer"
	grep -q '^r 8192 4096 = 0 ' "$T/writer"
	grep -q '^r 4096 8192 = 4096 zeros=0 ' "$T/writer"
	grep -q '^r 0 1048576 = 8192 zeros=0 ' "$T/writer"
	rm -f "$F"
	# shellcheck disable=SC2086
	DIOSHIM_DISABLE=1 shim "$HELPERS/t_fops" -d -c "$F" w 0 8192 $READS >"$T/kernel"
	diff -u "$T/kernel" "$T/writer"
	diff -u <(grep -v '^w ' "$T/kernel") "$T/reader-direct"
	diff -u <(grep -v '^w ' "$T/kernel") "$T/reader-buffered"
}

@test "read()-based tools under the shim (cat, dd, tail, cp) read exactly the logical bytes while a writer holds a reservation" {
	shim "$HELPERS/t_appender" -t 4 -n 100 -c -p "200:$T/ready:$T/go" \
		-l "$T/log" "$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	run "$DIOSHIM" status "$F"
	echo "$output"
	[[ "$output" == *" eof 819200 phys "* ]]
	[ "$(real_size "$F")" -gt 819200 ]
	local want
	want=$(noshim head -c 819200 "$F" | sha256sum)
	[ "$(shim cat "$F" | sha256sum)" = "$want" ]
	[ "$(shim dd if="$F" bs=1M status=none | sha256sum)" = "$want" ]
	[ "$(shim dd if="$F" bs=4096 iflag=direct status=none | sha256sum)" = "$want" ]
	[ "$(shim tail -c 4096 "$F" | sha256sum)" = "$(noshim head -c 819200 "$F" | tail -c 4096 | sha256sum)" ]
	shim cp "$F" "$T/copy"
	[ "$(noshim sha256sum <"$T/copy")" = "$want" ]
	touch "$T/go"
	wait "$BG"
	BG=
	run noshim "$HELPERS/t_verify" -S 1638400 "$F" "$T/log"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "stdio readers (sha256sum), which the shim cannot see, read exactly the logical bytes once the writer has gone" {
	# While the reservation stands a stdio reader sees the kernel's size
	# (dioshim(7): stdio is out of the shim's sight); the last close must
	# leave nothing of the reservation for it to read.
	shim "$HELPERS/t_appender" -t 4 -n 100 -c -p "200:$T/ready:$T/go" \
		"$F" >"$T/out" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	[ "$(real_size "$F")" -gt 819200 ]
	local want got during
	want=$(noshim head -c 819200 "$F" | sha256sum | awk '{ print $1 }')
	during=$(shim sha256sum "$F" | awk '{ print $1 }')
	touch "$T/go"
	wait "$BG"
	BG=
	want=$(noshim head -c "$(real_size "$F")" "$F" | sha256sum | awk '{ print $1 }')
	got=$(shim sha256sum "$F" | awk '{ print $1 }')
	echo "during: $during; after: logical $want, sha256sum under the shim $got"
	[ "$(real_size "$F")" -eq $((4 * 100 * 4096)) ]
	[ "$got" = "$want" ]
}

# A writer that holds 8 KiB and a reservation while READER... reads the
# file; the size once the writer has gone must be the 8 KiB written.
read_while_reserved() {
	shim "$HELPERS/t_fops" -d -c "$F" w 0 8192 touch "$T/ready" \
		wait "$T/go" >"$T/writer" 2>&1 3>&- &
	BG=$!
	wait_file "$T/ready"
	[ "$(real_size "$F")" -gt 8192 ]
	"$@" >/dev/null
	touch "$T/go"
	wait "$BG"
	BG=
	echo "size after the writer exited: $(real_size "$F"), written 8192"
	[ "$(real_size "$F")" -eq 8192 ]
	assert_no_segment "$F"
}

@test "a buffered read (cat) by another shimmed process while a reservation stands: after the writer exits the size is exactly what was written" {
	read_while_reserved shim cat "$F"
}

@test "a read (cat) by a process outside the shim while a reservation stands: after the writer exits the size is exactly what was written" {
	read_while_reserved noshim cat "$F"
}

@test "an O_DIRECT read by another shimmed process while a reservation stands: after the writer exits the size is exactly what was written" {
	read_while_reserved shim dd if="$F" of=/dev/null bs=1M iflag=direct status=none
}

# Issue 11, case 6: a read that straddles the logical EOF (a reservation
# past it) writes no more of the caller's buffer than the kernel alone:
# a buffered read nothing past what it returns; a direct one no more than
# the kernel alone zeroes (the rest of the request, with 6.x iomap).
@test "reads straddling EOF leave the caller's buffer past the returned bytes as the kernel alone leaves it" {
	local k s
	k=$(noshim "$HELPERS/readpast" "$F.k")
	s=$("$DIOSHIM" "$HELPERS/readpast" "$F")
	echo "kernel alone: $k"
	echo "under the shim: $s"
	# What each read returned: the kernel's.
	[ "$(awk '{print $1, $2}' <<<"$s")" = "$(awk '{print $1, $2}' <<<"$k")" ]
	# Bytes changed past it: never more than the kernel alone.
	paste -d' ' <(awk '{print $3}' <<<"$k") <(awk '{print $3}' <<<"$s") |
		awk '$2 > $1 { bad = 1 } END { exit bad }'
	[ "$(awk '$1 == "buffered" {print $3}' <<<"$s")" -eq 0 ]
	assert_no_segment "$F"
}
