#!/usr/bin/env bats
# fs: ext4
# DIOSHIM_LOG, read as an operator's tools read it: every line is
#   TIME dioshim[PID] EVENT MAJOR:MINOR:INO PATH MESSAGE
# (dioshim(7), LOG): the time in UTC, the event one word, the file the
# kernel's device and inode numbers and where it is, "-" for none.  Each
# event is made to happen for real (a bad setting, a corrupt segment, a
# writer killed, a full filesystem) and its line parsed and checked
# against what stat says of the file.  The file's name has a blank and a
# backslash in it, which the PATH field escapes.

load helper

setup_file() {
	# Small: the give-back test fills it.
	fs_setup_file ext4 64M
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	T=$BATS_TEST_TMPDIR
	F="$SCRATCH_MNT/a log\\file $BATS_TEST_NUMBER"
	export DIOSHIM_LOG=$T/log DIOSHIM_ENGAGE=always
	SINCE=$(stamp)
}
teardown() {
	touch "$T/go" 2>/dev/null || true
	wait
	find "$SCRATCH_MNT" -maxdepth 1 -type f -delete
	# A planted segment would serve the next file of its inode number.
	rm -f "${DIOSHIM_SHM_DIR:?}"/dioshim.*
}

stamp() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }

# log_parse FILE: every line of FILE in the format, its time between the
# test's start and now and never earlier than the line before it of the
# same process; prints one line per log line:
#   EVENT FILE PATH (unescaped) <TAB> PID <TAB> MESSAGE
# Fails on the first line that does not parse.
log_parse() {
	local re line now path
	local -A last
	re='^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z)'
	re+=' dioshim\[([1-9][0-9]*)\]'
	re+=' (fallback|exact|recover|reclaim|enospc-giveback|outside|config|error)'
	re+=' (-|[0-9]+:[0-9]+:[1-9][0-9]*) (-|/[^[:space:]]*) ([^[:space:]].*)$'
	now=$(stamp)
	while IFS= read -r line; do
		if ! [[ $line =~ $re ]]; then
			echo "not in the format: $line" >&2
			return 1
		fi
		local ts=${BASH_REMATCH[1]} pid=${BASH_REMATCH[2]}
		if [[ $ts < $SINCE || $ts > $now ||
		      $ts < ${last[$pid]:-} ]]; then
			echo "time out of order ($SINCE .. $now): $line" >&2
			return 1
		fi
		last[$pid]=$ts
		# A path only with a file.
		if [ "${BASH_REMATCH[4]}" = - ] && [ "${BASH_REMATCH[5]}" != - ]; then
			echo "a path without a file: $line" >&2
			return 1
		fi
		path=$(printf '%s' "${BASH_REMATCH[5]}" |
			perl -pe 's/\\([0-7]{3})/chr(oct($1))/ge')
		printf '%s %s %s\t%s\t%s\n' "${BASH_REMATCH[3]}" \
			"${BASH_REMATCH[4]}" "$path" "$pid" "${BASH_REMATCH[6]}"
	done <"$1"
}

# The FILE and PATH fields a line about file $1 has.
file_fields() { noshim stat -c '%Hd:%Ld:%i %n' "$1"; }

# lines EVENT FIELDS: the parsed lines ($T/parsed) of that event and file.
lines() { grep -F -- "$1 $2"$'\t' "$T/parsed" || true; }

@test "a bad setting: one config line about no file, from the process that read it" {
	DIOSHIM_PREFILL=sometimes shim sh -c 'echo $$ >"$1"' sh "$T/pid"
	log_parse "$T/log" >"$T/parsed"
	cat "$T/parsed"
	[ "$(wc -l <"$T/parsed")" -eq 1 ]
	[ "$(cut -f 1 "$T/parsed")" = "config - -" ]
	[ "$(cut -f 2 "$T/parsed")" = "$(cat "$T/pid")" ]
	cut -f 3 "$T/parsed" | grep -q '^DIOSHIM_PREFILL=sometimes: '
	# Read by the library alone: the launcher says nothing of it.
	DIOSHIM_PREFILL=sometimes shim true
	[ "$(wc -l <"$T/log")" -eq 2 ]
}

@test "a writer killed with its tail reserved, its segment gone (a reboot): the next user's recover line names the file, its record and the size cut" {
	( shim "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	[ "$(real_size "$F")" -gt 32768 ]
	# The segment dies with the machine; the record stays in the file.
	rm -f "$(segment_of "$F")"
	run shim "$HELPERS/segprobe" "$F" b
	echo "$output"
	[ "$status" -eq 0 ]
	log_parse "$T/log" >"$T/parsed"
	cat "$T/parsed"
	lines recover "$(file_fields "$F")" >"$T/rec"
	[ "$(wc -l <"$T/rec")" -eq 1 ]
	grep -q -- "recovered: record eof 0 phys [0-9]*, size [0-9]* -> 32768" "$T/rec"
	# The hint still counted the segment removed: counted anew.
	[ -n "$(lines reclaim "- -")" ]
}

@test "a corrupt segment: the fallback line names the file the writes then go to the kernel for" {
	( shim "$HELPERS/segprobe" "$F" a ) 2>/dev/null || true
	SEG=$(segment_of "$F")
	[ -e "$SEG" ]
	head -c "$(stat -c %s "$SEG")" /dev/urandom >"$SEG.new"
	chmod 600 "$SEG.new"
	mv "$SEG.new" "$SEG"
	run shim "$HELPERS/segprobe" "$F" b
	[ "$status" -eq 0 ]
	log_parse "$T/log" >"$T/parsed"
	cat "$T/parsed"
	lines fallback "$(file_fields "$F")" | grep -q "corrupt or foreign segment: passing through"
}

@test "out of space: the enospc-giveback line names the file whose reserved tail was given back, with the bytes" {
	local held=$SCRATCH_MNT/held
	DIOSHIM_RESERVE=4M shim "$HELPERS/t_appender" -t 1 -n 2 -c -e \
		-p "1:$T/ready:$T/go" "$held" >/dev/null &
	wait_file "$T/ready"
	[ "$(real_size "$held")" -gt $((1 << 20)) ]
	run shim "$HELPERS/t_appender" -t 1 -n 1000000 -c -e -l "$T/records" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	touch "$T/go"
	wait
	log_parse "$T/log" >"$T/parsed"
	cat "$T/parsed"
	lines enospc-giveback "$(file_fields "$held")" |
		grep -q "out of space: [1-9][0-9]* bytes of reserved tail given back"
	[ -n "$(lines enospc-giveback "- -" | grep "reserved tails of 1 file(s) given back")" ]
}

@test "a lone writer that stays idle while a second one makes the segment: the exact line names the file, from the second writer" {
	DIOSHIM_ENGAGE=contention shim "$HELPERS/t_appender" -t 1 -n 4 \
		-p "1:$T/ready:$T/go" "$F" >/dev/null &
	wait_file "$T/ready"
	DIOSHIM_ENGAGE=contention shim sh -c 'echo $$ >"$1"; exec "$2" -t 2 -n 100 "$3"' \
		sh "$T/pid" "$HELPERS/t_appender" "$F"
	touch "$T/go"
	wait
	log_parse "$T/log" >"$T/parsed"
	cat "$T/parsed"
	lines exact "$(file_fields "$F")" | grep "lone writer did not join" >"$T/exact"
	[ "$(wc -l <"$T/exact")" -eq 1 ]
	[ "$(cut -f 2 "$T/exact")" = "$(cat "$T/pid")" ]
}

@test "60 processes logging at once to one file: 60 whole lines, each in the format" {
	local i
	for i in $(seq 60); do
		DIOSHIM_STRIPES=3 shim true &
	done
	wait
	log_parse "$T/log" >"$T/parsed"
	[ "$(wc -l <"$T/parsed")" -eq 60 ]
	[ "$(cut -f 2 "$T/parsed" | sort -u | wc -l)" -eq 60 ]
	[ "$(cut -f 1 "$T/parsed" | sort -u)" = "config - -" ]
	DIOSHIM_LOG=stderr DIOSHIM_STRIPES=3 shim true 2>"$T/stderr"
	DIOSHIM_LOG=$T/stderr log_parse "$T/stderr" | grep -q "DIOSHIM_STRIPES=3"
}

@test "DIOSHIM_LOG a FIFO nobody reads, stderr a pipe gone or a file at RLIMIT_FSIZE: the program runs, the lines are lost; a relative DIOSHIM_LOG stays where the program began after it changes directory" {
	mkfifo "$T/fifo"
	run timeout 20 env DIOSHIM_LOG="$T/fifo" DIOSHIM_STRIPES=3 \
		"$DIOSHIM" -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
	mkdir -p "$T/a/b"
	cd "$T/a"
	# Standard error a pipe nobody reads any more (SIGPIPE), or a file
	# at RLIMIT_FSIZE (SIGXFSZ): the line is lost, the program lives.
	run bash -c '( sleep 0.3; DIOSHIM_LOG=stderr DIOSHIM_STRIPES=3 \
		exec "$0" -- sh -c "echo ran >&3" ) 2>&1 3>"$1" | true
		echo "${PIPESTATUS[0]}"' "$DIOSHIM" "$T/ran"
	[ "$output" = 0 ]
	[ "$(cat "$T/ran")" = ran ]
	head -c 2048 /dev/zero >"$T/err"
	run bash -c 'ulimit -f 2 && DIOSHIM_LOG=stderr DIOSHIM_STRIPES=3 \
		exec "$0" -- true 2>>"$1"' "$DIOSHIM" "$T/err"
	[ "$status" -eq 0 ]
	[ "$(stat -c %s "$T/err")" -eq 2048 ]
	# Under the launcher: one file for every process of the command.
	DIOSHIM_LOG=rel.log DIOSHIM_STRIPES=3 shim sh -c 'cd b && exec env DIOSHIM_STRIPES=5 sh -c "cd .. && cd b && true"'
	[ ! -e "$T/a/b/rel.log" ]
	log_parse "$T/a/rel.log" >"$T/parsed"
	grep -q "DIOSHIM_STRIPES=3" "$T/parsed"
	grep -q "DIOSHIM_STRIPES=5" "$T/parsed"
	# With LD_PRELOAD alone: each process from where it started.
	rm "$T/a/rel.log"
	DIOSHIM_LOG=rel.log DIOSHIM_STRIPES=3 LD_PRELOAD="$BUILD/libdioshim.so" \
		sh -c 'cd b && exec env DIOSHIM_STRIPES=5 true'
	[ "$(log_parse "$T/a/rel.log" | grep -c "DIOSHIM_STRIPES=3")" -eq 1 ]
	[ "$(log_parse "$T/a/rel.log" | grep -c "DIOSHIM_STRIPES=5")" -eq 0 ]
	log_parse "$T/a/b/rel.log" | grep -q "DIOSHIM_STRIPES=5"
}

@test "RLIMIT_FSIZE below a segment's size and below the log's: the program runs as with the kernel alone (no SIGXFSZ), the file exact, nothing left in the segment directory" {
	local side
	# 100 KiB allowed (ulimit -f 100); the log holds more already.
	head -c 200000 /dev/zero >"$T/big.log"
	for side in "env -u LD_PRELOAD" "$DIOSHIM"; do
		rm -f "$F"
		# shellcheck disable=SC2086 # the side is a command and its words
		run env DIOSHIM_LOG="$T/big.log" DIOSHIM_STRIPES=3 bash -c \
			'ulimit -f 100 && exec "$@"' sh $side \
			"$HELPERS/t_appender" -t 4 -n 5 -c "$F"
		echo "$side: $output"
		[ "$status" -eq 0 ]
		[ "$(real_size "$F")" -eq $((20 * 4096)) ]
	done
	# Nothing fit in the log: it is as it was.
	[ "$(stat -c %s "$T/big.log")" -eq 200000 ]
	assert_no_segment "$F"
	[ -z "$(find "$DIOSHIM_SHM_DIR" -name 'dioshim.*')" ]
}
