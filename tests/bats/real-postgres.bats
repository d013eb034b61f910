#!/usr/bin/env bats
# fs: ext4 xfs
# PostgreSQL under the shim, as a user would run it: the postmaster started
# through the launcher (every backend inherits it), its data directory on a
# scratch ext4 or XFS, WAL written with O_DIRECT.  PostgreSQL 15 opens WAL
# with O_DIRECT only with wal_level=minimal, max_wal_senders=0 and an
# open_*sync wal_sync_method (16 and later: debug_io_direct=wal, added
# below for them); with the default wal_level=replica the shim would see
# nothing.  WAL segments are preallocated and zero-filled, so the shim has
# nothing to gain here: these tests are about answers, not speed.
#
#   - pgbench under load: the WAL descriptors are O_DIRECT and the shim
#     serves them (a segment, writes counted), a clean stop, pg_amcheck
#     clean, every committed pgbench transaction in pgbench_history and
#     the balances consistent;
#   - kill -9 of the postmaster and every backend mid-load, a restart
#     under the shim (crash recovery), every acknowledged insert there,
#     pg_amcheck clean — once with the mechanisms engaged from the first
#     write (DIOSHIM_ENGAGE=always, as the other suites) and once with the
#     default engagement;
#   - after each clean stop: no segment left for any file of the data
#     directory, no user.dioshim.eof on any file, every WAL segment exactly
#     16 MiB as the kernel sees it.
#
# PostgreSQL refuses to run as root: the server and its clients run as the
# user postgres, with a segment directory of its own.  PG_KERNEL_ALONE=1
# runs every check against the kernel alone (no launcher; the checks that
# look for the shim's own evidence turn into checks of its absence), to
# show that they measure PostgreSQL, not the shim.

load helper

WAL_SEG=$((16 * 1024 * 1024))

# The PostgreSQL binaries: 15 by preference, else pg_config's.
pg_find_bin() {
	local d
	for d in /usr/lib/postgresql/15/bin "$(pg_config --bindir 2>/dev/null)" \
		/usr/lib/postgresql/*/bin; do
		[ -n "$d" ] || continue
		[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] &&
			[ -x "$d/pgbench" ] && [ -x "$d/psql" ] &&
			[ -x "$d/pg_amcheck" ] && [ -x "$d/pg_controldata" ] &&
			{ echo "$d"; return 0; }
	done
	return 1
}

pg_skip_reason() {
	[ "$(id -u)" = 0 ] || { echo "needs root (scratch filesystem, and to run PostgreSQL as postgres)"; return; }
	command -v setpriv >/dev/null || { echo "setpriv missing (util-linux)"; return; }
	command -v getfattr >/dev/null || { echo "getfattr missing (attr)"; return; }
	id postgres >/dev/null 2>&1 || { echo "no user postgres (comes with the postgresql package)"; return; }
	pg_find_bin >/dev/null || { echo "PostgreSQL server binaries missing (initdb, pg_ctl, postgres, pgbench, psql, pg_amcheck)"; return; }
	[ -x "$DIOSHIM" ] && [ -r "$BUILD/libdioshim.so" ] || echo "no launcher or library in $BUILD"
}

# Run a command as postgres (not a function: `timeout ... &` must get
# the command's own pid).
AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)

setup_file() {
	cd /
	local why
	why=$(pg_skip_reason)
	if [ -n "$why" ]; then
		export FS_SKIP="$why"
		return 0
	fi
	fs_setup_file "${FS:-ext4}" 2G
	[ -z "${FS_SKIP:-}" ] || return 0
	PG_BIN=$(pg_find_bin)
	PG_MAJOR=$("$PG_BIN/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)\..*/\1/p')
	# The mount's parent (made 0700 by mktemp) must be traversable.
	chmod 0711 "$SCRATCH_DIR"
	PG_ROOT=$SCRATCH_MNT/pg
	PG_DATA=$PG_ROOT/data
	PG_SOCK=$PG_ROOT/sock
	PG_LOG=$PG_ROOT/server.log
	PG_SHIMLOG=$PG_ROOT/shim.log
	mkdir -p "$PG_SOCK"
	chown -R postgres: "$PG_ROOT"
	# A segment directory postgres owns: in the suite's when postgres can
	# reach it (tests/run.sh makes that root's, 0700), else in /dev/shm.
	PG_SHM=$(mktemp -d "$DIOSHIM_SHM_DIR/pg.XXXXXX")
	chown postgres: "$PG_SHM"
	if ! "${AS_PG[@]}" test -w "$PG_SHM" -a -x "$PG_SHM"; then
		rm -rf "$PG_SHM"
		PG_SHM=$(mktemp -d /dev/shm/dioshim-pg.XXXXXX)
		chown postgres: "$PG_SHM"
	fi
	export PG_BIN PG_MAJOR PG_ROOT PG_DATA PG_SOCK PG_LOG PG_SHIMLOG PG_SHM
	timeout 120 "${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U postgres \
		-A trust -E UTF8 --locale=C >"$PG_ROOT/initdb.log" 2>&1 || {
		cat "$PG_ROOT/initdb.log" >&2
		return 1
	}
	PG_DATA=$(realpath "$PG_DATA")
	export PG_DATA
	# pgbench's tables (scale 2: 200000 accounts) and the table of
	# acknowledged inserts, made under the shim.
	pg_start "${DIOSHIM_ENGAGE:-always}"
	timeout 120 "${AS_PG[@]}" "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres \
		-i -s 2 -q postgres >"$PG_ROOT/init.log" 2>&1 || {
		cat "$PG_ROOT/init.log" "$PG_LOG" >&2
		pg_cleanup
		return 1
	}
	pg_sql "CREATE TABLE acked (id int PRIMARY KEY)"
	pg_stop
}

teardown_file() {
	[ -z "${PG_DATA:-}" ] || pg_cleanup
	[ -z "${PG_SHM:-}" ] || rm -rf "$PG_SHM"
	fs_teardown_file
}

setup() {
	fs_require
	cd /
	T=$BATS_TEST_TMPDIR
	CLIENTS=()
	PG_LOG_FROM=$(($(wc -l <"$PG_LOG") + 1))
}

teardown() {
	[ -n "${PG_DATA:-}" ] || return 0
	local p
	for p in "${CLIENTS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${CLIENTS[@]}"; do
		timeout 30 tail --pid="$p" -f /dev/null || kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pg_cleanup
}

# Every process of the cluster: the postmaster and its children work in
# the data directory (children that outlive a killed postmaster too).
pg_pids() {
	find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$PG_DATA" \
		-printf '%h\n' 2>/dev/null | sed 's|^/proc/||'
}

# Wait (up to 30 s) for processes to be gone.
wait_gone() {
	local i p left
	for ((i = 0; i < 300; i++)); do
		left=
		for p in "$@"; do
			[ -d "/proc/$p" ] && left=1
		done
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	echo "processes still alive: $*" >&2
	return 1
}

# Stop whatever runs of the cluster, however it is: an immediate stop, then
# kill -9 of anything left.
pg_cleanup() {
	local pids
	pids=$(pg_pids)
	[ -n "$pids" ] || return 0
	timeout 30 "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate \
		-w -t 20 stop >/dev/null 2>&1 3>&- || true
	pids=$(pg_pids)
	# shellcheck disable=SC2086
	[ -z "$pids" ] || { kill -9 $pids 2>/dev/null; wait_gone $pids; } || true
}

# pg_start ENGAGE: the server under the shim (or not, PG_KERNEL_ALONE=1),
# WAL O_DIRECT.  ENGAGE: DIOSHIM_ENGAGE for the server.
pg_start() {
	local run=() opts
	[ "${PG_KERNEL_ALONE:-0}" = 1 ] || run=("$DIOSHIM" --)
	opts="-c listen_addresses= -k $PG_SOCK -c wal_level=minimal"
	opts+=" -c max_wal_senders=0 -c archive_mode=off"
	opts+=" -c wal_sync_method=open_datasync -c fsync=on"
	opts+=" -c synchronous_commit=on -c full_page_writes=on"
	opts+=" -c shared_buffers=32MB -c max_wal_size=96MB -c min_wal_size=48MB"
	[ "${PG_MAJOR:-15}" -lt 16 ] || opts+=" -c debug_io_direct=wal"
	timeout 90 "${AS_PG[@]}" env DIOSHIM_SHM_DIR="$PG_SHM" \
		DIOSHIM_ENGAGE="$1" DIOSHIM_LOG="$PG_SHIMLOG" \
		"${run[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 \
		-o "$opts" start >/dev/null 3>&- || {
		echo "the server did not start; its log:" >&2
		tail -n 30 "$PG_LOG" >&2
		return 1
	}
}

# A clean (fast) stop: it must finish and leave the cluster shut down.
pg_stop() {
	timeout 90 "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast \
		-w -t 60 stop >/dev/null 3>&- || {
		echo "the server did not stop; its log:" >&2
		tail -n 30 "$PG_LOG" >&2
		return 1
	}
	[ -z "$(pg_pids)" ]
	timeout 30 "${AS_PG[@]}" "$PG_BIN/pg_controldata" "$PG_DATA" |
		grep -q '^Database cluster state: *shut down$'
}

pg_sql() {
	timeout 60 "${AS_PG[@]}" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-h "$PG_SOCK" -U postgres -d postgres -c "$1"
}

# What the server logged since this test began.
pg_log_now() { tail -n "+$PG_LOG_FROM" "$PG_LOG"; }

# The shim's own log, shown when a test fails.
show_shim_log() {
	[ -s "$PG_SHIMLOG" ] || return 0
	echo "--- shim log (last 20 lines) ---"
	tail -n 20 "$PG_SHIMLOG"
}

# "PID FILE FLAGS" for every descriptor a process of the cluster holds on
# a WAL segment (flags octal, from fdinfo).
wal_fds() {
	local dirs=() p d fd l k v
	for p in "$@"; do
		dirs+=("/proc/$p/fd")
	done
	[ ${#dirs[@]} -gt 0 ] || return 0
	find "${dirs[@]}" -mindepth 1 -maxdepth 1 \
		-lname "$PG_DATA/pg_wal/[0-9A-F]*" -printf '%h %f %l\n' 2>/dev/null |
		while read -r d fd l; do
			p=${d#/proc/}
			p=${p%/fd}
			# (The descriptor may be gone meanwhile.)
			{
				while read -r k v; do
					[ "$k" != flags: ] || echo "$p $l $v"
				done <"/proc/$p/fdinfo/$fd"
			} 2>/dev/null || true
		done
	return 0
}

# While PID runs: every half second, the WAL descriptors of the cluster
# (into $T/walfds) and what `dioshim status` says of those files (into
# $T/walstatus).
watch_wal() {
	local pid=$1 f
	local p pids maps
	local -A seen=()
	: >"$T/walfds"
	: >"$T/walstatus"
	: >"$T/libmaps"
	while kill -0 "$pid" 2>/dev/null; do
		pids=$(pg_pids)
		for p in $pids; do
			[ -z "${seen[$p]:-}" ] || continue
			# Gone meanwhile, or a zombie: no map to judge by.
			maps=$(cat "/proc/$p/maps" 2>/dev/null) || continue
			[ -n "$maps" ] || continue
			# maps is read a page at a time: a process ending
			# between two reads gives the first part only.  Read
			# again; ended meanwhile, it is not judged.
			if [[ $maps != */libdioshim.so* ]]; then
				maps=$(cat "/proc/$p/maps" 2>/dev/null) || continue
				[ -n "$maps" ] || continue
			fi
			seen[$p]=1
			case $maps in
			*/libdioshim.so*) echo "$p with" ;;
			*) echo "$p without" ;;
			esac
		done >>"$T/libmaps"
		# shellcheck disable=SC2086
		wal_fds $pids >"$T/walfds.now"
		cat "$T/walfds.now" >>"$T/walfds"
		for f in $(awk '{ print $2 }' "$T/walfds.now" | sort -u); do
			DIOSHIM_SHM_DIR=$PG_SHM noshim timeout 10 "$DIOSHIM" \
				status "$f" >>"$T/walstatus" 2>&1 || true
		done
		sleep 0.5
	done
}

# The evidence that WAL was written with O_DIRECT, and, under the shim,
# through it.  MODE: always (writes counted in the segment) or
# contention (a segment at least: a file whose writer stays alone is left
# to the kernel, and a lone writer that does not join leaves it exact).
assert_wal_evidence() {
	local mode=$1 n flags bad=0
	echo "--- WAL descriptors seen (first 10 of $(wc -l <"$T/walfds")) ---"
	sort -u "$T/walfds" | head -n 10
	echo "--- dioshim status of those files (last 10) ---"
	sort -u "$T/walstatus" | tail -n 10
	# WAL is written through descriptors opened with the sync bit,
	# O_DSYNC (010000) for open_datasync: every one of them is O_DIRECT
	# (040000), and at least one was seen.  (Others are transient: a
	# segment opened O_RDWR to be fsynced after a rename, read-only
	# opens.)
	n=0
	while read -r _ _ flags; do
		[ $((8#$flags & 8#10000)) -ne 0 ] || continue
		n=$((n + 1))
		if [ $((8#$flags & 8#40000)) -eq 0 ]; then
			echo "O_DSYNC WAL descriptor without O_DIRECT: flags $flags"
			bad=1
		fi
	done <"$T/walfds"
	[ "$n" -gt 0 ] || { echo "no O_DSYNC WAL descriptor seen"; return 1; }
	[ "$bad" -eq 0 ] || return 1
	# Every process of the server ran with the library (or, kernel
	# alone, none).
	echo "processes of the cluster seen: $(sort -u "$T/libmaps" | awk '{ n[$2]++ } END { for (k in n) printf "%s %s library; ", n[k], k }')"
	[ -s "$T/libmaps" ] || { echo "no process of the cluster seen"; return 1; }
	if [ "${PG_KERNEL_ALONE:-0}" = 1 ]; then
		if grep -q ' with$' "$T/libmaps" || grep -q ': eof ' "$T/walstatus"; then
			echo "the shim is there, kernel alone"
			return 1
		fi
		return 0
	fi
	if grep ' without$' "$T/libmaps" | sort -u | head -n 5 | grep .; then
		echo "processes of the server without the library"
		return 1
	fi
	# The shim had a segment for a WAL file the server wrote...
	grep -q ': eof ' "$T/walstatus" || { echo "no segment for any WAL file"; return 1; }
	# ...and never saw a WAL segment at another size than 16 MiB, nor
	# reserved past it (WAL is never extended: nothing to reserve).
	if grep ': eof ' "$T/walstatus" | grep -v "eof $WAL_SEG phys $WAL_SEG tail $WAL_SEG kernel-size $WAL_SEG "; then
		echo "a WAL file seen at another size than $WAL_SEG, or reserved past it"
		return 1
	fi
	if [ "$mode" = always ]; then
		grep -Eq ' writes [1-9][0-9]* ' "$T/walstatus" ||
			{ echo "no write to WAL counted by the shim"; return 1; }
	fi
}

# pgbench's invariant: every transaction moves the same delta through an
# account, a teller, a branch and the history, atomically.  (Every run
# here is `pgbench -n`: without it pgbench empties the history first.)
assert_pgbench_consistent() {
	local sums
	sums=$(pg_sql "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' ||
		(SELECT sum(tbalance) FROM pgbench_tellers) || ' ' ||
		(SELECT sum(bbalance) FROM pgbench_branches) || ' ' ||
		(SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
	echo "balances: accounts tellers branches history = $sums"
	read -r a t b h <<<"$sums"
	[ "$a" = "$t" ] && [ "$t" = "$b" ] && [ "$b" = "$h" ]
	[ "$(pg_sql "SELECT count(*) FROM pgbench_accounts")" -eq 200000 ]
	[ "$(pg_sql "SELECT count(*) FROM pgbench_tellers")" -eq 20 ]
	[ "$(pg_sql "SELECT count(*) FROM pgbench_branches")" -eq 2 ]
}

# No ERROR, FATAL or PANIC in the server's log since the test began (but
# for lines matching the extended regex $1).  A fast stop that meets an
# autovacuum worker at work logs its end as FATAL, with or without the
# shim: PostgreSQL's word for a worker told to stop, not a failure.
assert_log_clean() {
	local bad
	bad=$(pg_log_now | grep -E '(ERROR|FATAL|PANIC):' |
		grep -v 'FATAL:  terminating autovacuum process due to administrator command' |
		grep -Ev "${1:-^$}" || true)
	[ -z "$bad" ] || { echo "the server logged:"; echo "$bad" | head -n 20; return 1; }
}

pg_amcheck_clean() {
	run timeout 300 "${AS_PG[@]}" "$PG_BIN/pg_amcheck" -h "$PG_SOCK" \
		-U postgres --all --install-missing --heapallindexed --parent-check
	echo "pg_amcheck: exit $status"
	echo "$output" | head -n 20
	[ "$status" -eq 0 ]
	# Nothing but --install-missing's notices.
	! grep -qvE '^(NOTICE:  extension "amcheck" already exists, skipping)?$' <<<"$output" || false
}

# After a clean stop: no segment for any file of the data directory (with
# GC=1 once `dioshim gc` has run), no user.dioshim.* attribute on any file,
# every WAL segment exactly 16 MiB as the kernel sees it.
assert_clean_after_stop() {
	local f n=0 bad=0 seg left
	[ -z "$(pg_pids)" ]
	# The segment of every file, named as segment_of does (find's %D is
	# st_dev, as stat's %d; a group-writable file's is in its group's
	# directory).
	local dev ino mode gid dir
	while read -r dev ino mode gid f; do
		dir=$PG_SHM
		[ $((8#$mode & 8#20)) -eq 0 ] || dir=$dir/dioshim-g$gid
		printf -v seg '%s/dioshim.%x.%x' "$dir" "$dev" "$ino"
		if [ -e "$seg" ]; then
			echo "segment $seg left for $f"
			bad=1
		fi
	done < <(find "$PG_DATA" -type f -printf '%D %i %m %G %p\n')
	# Any other segment left in the directory (of a file since removed).
	find "$PG_SHM" -name 'dioshim.*' -printf 'segment left in the directory: %p\n'
	[ -z "$(find "$PG_SHM" -name 'dioshim.*')" ] || bad=1
	# No EOF record on any file.
	left=$(noshim getfattr -R --absolute-names -d -m '^user\.dioshim' "$PG_DATA" 2>/dev/null)
	if [ -n "$left" ]; then
		echo "extended attributes left: $left"
		bad=1
	fi
	# Every WAL segment 16 MiB for the kernel.
	for f in "$PG_DATA"/pg_wal/[0-9A-F]*; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		if [ "$(real_size "$f")" -ne "$WAL_SEG" ]; then
			echo "$f: kernel size $(real_size "$f"), not $WAL_SEG"
			bad=1
		fi
	done
	echo "$n WAL segments checked"
	[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
}

@test "pgbench -c 8 under the shim, WAL O_DIRECT: the shim serves the WAL; clean stop; pg_amcheck clean; every committed transaction in the history, balances consistent; nothing left after the stop" {
	pg_start always
	local h0 lsn0 lsn1 n segs failed
	h0=$(pg_sql "SELECT count(*) FROM pgbench_history")
	lsn0=$(pg_sql "SELECT pg_current_wal_lsn()")
	timeout 60 "${AS_PG[@]}" "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres \
		-n -c 8 -j 2 -T 8 -P 2 postgres >"$T/pgbench.out" 2>&1 3>&- &
	local bench=$!
	CLIENTS+=("$bench")
	# Three checkpoints and segment switches meanwhile: new WAL segments
	# made, old ones recycled (renamed), while the shim serves them.  (A
	# switch may stall every client for seconds while the next segment is
	# zero-filled, with or without the shim, on a slow device.)
	(
		for _ in 1 2 3; do
			sleep 1.5
			pg_sql "CHECKPOINT" >/dev/null
			pg_sql "SELECT pg_switch_wal()" >/dev/null
		done
	) 3>&- &
	local switcher=$!
	CLIENTS+=("$switcher")
	watch_wal "$bench"
	wait "$bench" || { cat "$T/pgbench.out"; pg_log_now | tail -n 20; false; }
	wait "$switcher"
	cat "$T/pgbench.out"
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/pgbench.out")
	[ "$n" -gt 0 ]
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$T/pgbench.out")
	[ "${failed:-0}" -eq 0 ]
	lsn1=$(pg_sql "SELECT pg_current_wal_lsn()")
	segs=$(pg_sql "SELECT (pg_wal_lsn_diff('$lsn1', '$lsn0') / $WAL_SEG)::int")
	echo "WAL written: $lsn0 .. $lsn1, ${segs} segments"
	[ "$segs" -ge 2 ]
	assert_wal_evidence always || { show_shim_log; false; }
	pg_stop
	assert_clean_after_stop
	# Everything pgbench was told committed is there, consistent.
	pg_start always
	[ "$(pg_sql "SELECT count(*) FROM pgbench_history")" -eq $((h0 + n)) ]
	assert_pgbench_consistent
	pg_amcheck_clean
	pg_stop
	assert_clean_after_stop
	assert_log_clean
}

# kill -9 of the postmaster and every process of the cluster, mid-load,
# while a client inserts numbered rows one transaction at a time and
# records each id once its commit is acknowledged; then a restart under
# the shim, with ENGAGE.
crash_and_recover() {
	local engage=$1 pm pids last row
	pg_start "$engage"
	pg_sql "TRUNCATE acked"
	seq 1 1000000 | sed 's/.*/INSERT INTO acked VALUES (&) RETURNING id;/' >"$T/ack.sql"
	timeout 120 "${AS_PG[@]}" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-h "$PG_SOCK" -U postgres -d postgres -c 'SET synchronous_commit = on' \
		-f - <"$T/ack.sql" >"$T/ack.out" 2>"$T/ack.err" 3>&- &
	CLIENTS+=("$!")
	local acker=$!
	timeout 120 "${AS_PG[@]}" "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres \
		-n -c 8 -j 2 -T 60 postgres >"$T/pgbench.out" 2>&1 3>&- &
	CLIENTS+=("$!")
	local bench=$!
	watch_wal_for 5
	# Freeze the postmaster (no new children), then kill -9 it and every
	# process of the cluster at once.
	pm=$(head -n 1 "$PG_DATA/postmaster.pid")
	kill -STOP "$pm"
	pids=$(pg_pids)
	echo "kill -9 of $(wc -w <<<"$pids") processes of the cluster, postmaster $pm"
	# The children first: one that outlived the postmaster could notice
	# and end by itself.
	# shellcheck disable=SC2046
	kill -9 $(grep -vx "$pm" <<<"$pids")
	kill -9 "$pm"
	# shellcheck disable=SC2086
	wait_gone $pids
	# The clients see the connection go and end.
	timeout 60 tail --pid="$acker" -f /dev/null
	timeout 60 tail --pid="$bench" -f /dev/null
	wait "$acker" || true
	wait "$bench" || true
	echo "client: $(tail -n 2 "$T/ack.err" | tr '\n' ' ')"
	last=$(tail -n 1 "$T/ack.out")
	echo "last acknowledged id: $last"
	[ "${last:-0}" -ge 50 ]
	assert_wal_evidence "$engage" || { show_shim_log; false; }
	# WAL segments were never extended: the kernel's sizes are exact even
	# right after the kill.
	local f
	for f in "$PG_DATA"/pg_wal/[0-9A-F]*; do
		[ "$(real_size "$f")" -eq "$WAL_SEG" ] || { echo "$f: $(real_size "$f") after kill -9"; false; }
	done
	# Nothing went wrong before the kill (a backend that saw the
	# postmaster die first may say so).
	assert_log_clean 'terminating connection due to unexpected postmaster exit'
	# Crash recovery, under the shim.
	pg_start "$engage"
	pg_log_now | grep -E 'was interrupted|redo (starts|done)|ready to accept' | tail -n 4
	pg_log_now | grep -q 'database system was interrupted'
	pg_log_now | grep -q 'ready to accept connections'
	# Every acknowledged id is there; at most the one in flight besides;
	# no gap.
	row=$(pg_sql "SELECT count(*) || ' ' || coalesce(max(id), 0) || ' ' ||
		count(*) FILTER (WHERE id <= $last) FROM acked")
	echo "acked after recovery: count max count<=last = $row"
	read -r n max upto <<<"$row"
	[ "$upto" -eq "$last" ]
	[ "$n" -eq "$max" ]
	[ "$max" -le $((last + 1)) ]
	assert_pgbench_consistent
	pg_amcheck_clean
	pg_stop
	if [ "${PG_KERNEL_ALONE:-0}" != 1 ]; then
		# Files the killed processes had open and the new server did
		# not open again keep their segments until `dioshim gc`
		# (dioshim(7), CRASHES): count them, then collect them.
		local left
		left=$(find "$PG_SHM" -name 'dioshim.*' -printf '%f ' | sed 's/ $//')
		echo "# segments left by the killed processes until dioshim gc: ${left:-none}" >&3
		timeout 60 "${AS_PG[@]}" env DIOSHIM_SHM_DIR="$PG_SHM" "$DIOSHIM" gc
	fi
	assert_clean_after_stop
	assert_log_clean 'terminating connection due to unexpected postmaster exit'
}

# Watch the WAL for SECS seconds of load.
watch_wal_for() {
	sleep "$1" 3>&- &
	watch_wal "$!"
}

@test "kill -9 of the postmaster and every backend mid-pgbench (DIOSHIM_ENGAGE=always): crash recovery under the shim succeeds; every acknowledged insert kept; pg_amcheck clean; nothing left after gc and a clean stop" {
	crash_and_recover always
}

@test "the same kill -9 and recovery with the shim's default engagement (contention)" {
	crash_and_recover contention
}
