#!/usr/bin/env bats
# fs: ext4 xfs
# MariaDB 10.11 (Debian 12's mariadbd) under the shim, InnoDB with
# innodb_flush_method=O_DIRECT, in two I/O modes: its default native AIO
# (io_uring, through liburing) and innodb_use_native_aio=0 (InnoDB's own
# threads, pwrite).  For each mode:
#   - the shim really serves InnoDB's files (O_DIRECT descriptors in
#     mariadbd, segments with mariadbd attached), not a vacuous pass;
#   - sysbench oltp_write_only, CHECK TABLE ... EXTENDED on every InnoDB
#     table, a clean shutdown within a time limit, an error log with no
#     error, assertion or OS error;
#   - after that shutdown nothing of the shim is left (no segment, no
#     user.dioshim.eof) and every tablespace is exactly the size InnoDB
#     recorded in its header (FSP_SIZE pages of 16 KiB);
#   - kill -9 under load, a restart under the shim (crash recovery): the
#     tables check, every acknowledged insert is there, and the clean
#     shutdown after it leaves the files as above.
# Files are looked at from outside the shim.  Needs root, mariadbd,
# mariadb, mariadb-admin, mariadb-install-db and sysbench with its mysql
# driver; about two minutes per filesystem (three with MDB_LIBAIO=1).
#
# MDB_LIBAIO=1 adds the same tests with innodb_linux_aio=aio (libaio; the
# option came with MDEV-36234; 10.11.19 has it), skipped otherwise.
# MDB_ENGAGE (default: contention, what a deployment gets) is the
# DIOSHIM_ENGAGE mariadbd runs with; `always` engages every file from its
# first write.  The launcher is LAUNCH below: a copy of this file with
# LAUNCH=(env) runs the same checks on the kernel alone (there the checks
# that the shim served the files must fail, and every other one pass).

load helper

LAUNCH=("$DIOSHIM" --)

: "${MDB_ENGAGE:=contention}"
MARIADBD=$(command -v mariadbd || echo /usr/sbin/mariadbd)
# 96 MiB: mariadb-install-db's default, so no test resizes the redo log.
LOG_FILE_SIZE=$((96 << 20))
PAGE=16384
OLTP=(--tables=2 --table-size=10000 --threads=4)

mdb_skip_reason() {
	local p
	[ "$(id -u)" = 0 ] || { echo "needs root (mariadbd --user=root, scratch filesystem)"; return; }
	[ -x "$MARIADBD" ] || { echo "mariadbd is not installed (mariadb-server)"; return; }
	for p in mariadb mariadb-admin mariadb-install-db sysbench getfattr; do
		command -v "$p" >/dev/null || { echo "$p is not installed"; return; }
	done
	sysbench --help 2>/dev/null | grep -q '^ *mysql - ' ||
		echo "sysbench has no mysql driver"
}

setup_file() {
	MDB_SKIP=$(mdb_skip_reason)
	export MDB_SKIP
	[ -z "$MDB_SKIP" ] || return 0
	fs_setup_file "${FS:-ext4}" 3G
	[ -z "$FS_SKIP" ] || return 0
	# Sockets live in a short private path (a socket's name is at most
	# 107 bytes); the segments of this suite in a directory of its own,
	# one subdirectory per datadir, so that no test sees another's.
	MDB_RUN=$(mktemp -d /tmp/dioshim-mdb.XXXXXX)
	MDB_SHM=$(mktemp -d "$DIOSHIM_SHM_DIR/mariadb.XXXXXX")
	PRISTINE=$SCRATCH_MNT/pristine/data
	export MDB_RUN MDB_SHM PRISTINE
	# Acknowledged inserts: one row at a time, autocommit, each id
	# printed (and flushed) once the server has answered its commit.
	cat >"$BATS_FILE_TMPDIR/ack.lua" <<'LUA'
function thread_init()
	con = sysbench.sql.driver():connect()
	n = 0
end
function event()
	n = n + 1
	con:query("INSERT INTO sbtest.ack (id) VALUES (" .. n .. ")")
	io.stdout:write("ack " .. n .. "\n")
	io.stdout:flush()
end
LUA
}

teardown_file() {
	[ -z "${MDB_RUN:-}" ] || rm -rf "$MDB_RUN"
	[ -z "${MDB_SHM:-}" ] || rm -rf "$MDB_SHM"
	fs_teardown_file
}

setup() {
	[ -z "${MDB_SKIP:-}" ] || skip "$MDB_SKIP"
	fs_require
	T=$BATS_TEST_TMPDIR
	NSTART=0
}

# Every process a test started (mariadbd, clients) is killed and reaped,
# whatever became of the test.
teardown() {
	local p
	[ -f "$BATS_TEST_TMPDIR/pids" ] || return 0
	for p in $(tac "$BATS_TEST_TMPDIR/pids"); do
		kill -0 "$p" 2>/dev/null || continue
		# timeout passes SIGTERM on to its client.
		case $(cat "/proc/$p/comm" 2>/dev/null) in
		mariadbd) kill -9 "$p" 2>/dev/null ;;
		timeout) kill -TERM "$p" 2>/dev/null ;;
		esac
	done
	for p in $(tac "$BATS_TEST_TMPDIR/pids"); do
		timeout 30 tail --pid="$p" -f /dev/null 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	return 0
}

bg_started() { echo "$1" >>"$BATS_TEST_TMPDIR/pids"; }

# mdb_use MODE NAME: this test's server: I/O mode, datadir, socket, and
# segment directory.
mdb_use() {
	MODE=$1
	NAME=$1.$2
	HOME_DIR=$SCRATCH_MNT/$NAME
	DD=$HOME_DIR/data
	SOCK=$MDB_RUN/$NAME.sock
	export DIOSHIM_SHM_DIR=$MDB_SHM/$NAME
	mkdir -p "$HOME_DIR" "$DIOSHIM_SHM_DIR"
	case $MODE in
	uring) MODE_ARGS=(--innodb-use-native-aio=1) ;;
	noaio) MODE_ARGS=(--innodb-use-native-aio=0) ;;
	libaio) MODE_ARGS=(--innodb-use-native-aio=1 --innodb-linux-aio=aio) ;;
	install) MODE_ARGS=() ;;
	esac
}

# A datadir of its own, copied (outside the shim) from the one the first
# test made with mariadb-install-db.
fresh_datadir() {
	[ -f "$PRISTINE/ibdata1" ] || {
		echo "no pristine datadir: the mariadb-install-db test failed"
		return 1
	}
	rm -rf "$DD"
	noshim cp -a "$PRISTINE" "$DD"
}

mdb() { timeout 120 mariadb --no-defaults -S "$SOCK" -u root -N -B "$@"; }
mdb_admin() { timeout 120 mariadb-admin --no-defaults -S "$SOCK" -u root "$@"; }
sb_cmd() {
	SB=(timeout 120 sysbench --db-driver=mysql --mysql-socket="$SOCK"
		--mysql-user=root --mysql-db=sbtest)
}
sb() { sb_cmd; "${SB[@]}" "$@"; }

# Start mariadbd under the shim on $DD; wait (60 s at most) until it
# answers.  Its error log: $HOME_DIR/err.N.log, one per start.
# innodb_max_dirty_pages_pct=0: the page cleaner writes pages all through
# the load (with the defaults an 8 s run writes only the redo log, and
# with DIOSHIM_ENGAGE=contention no data file would get a segment).
mdb_start() {
	local i
	NSTART=$((NSTART + 1))
	ERRLOG=$HOME_DIR/err.$NSTART.log
	rm -f "$SOCK"
	DIOSHIM_ENGAGE=$MDB_ENGAGE "${LAUNCH[@]}" "$MARIADBD" --no-defaults \
		--user=root --datadir="$DD" --socket="$SOCK" \
		--pid-file="$HOME_DIR/mariadbd.pid" --skip-networking \
		--skip-grant-tables --log-error="$ERRLOG" \
		--innodb-flush-method=O_DIRECT \
		--innodb-flush-log-at-trx-commit=1 \
		--innodb-log-file-size="$LOG_FILE_SIZE" \
		--innodb-buffer-pool-size=64M \
		--innodb-max-dirty-pages-pct=0 \
		"${MODE_ARGS[@]}" </dev/null >>"$HOME_DIR/stdout" 2>&1 3>&- &
	MDB_PID=$!
	bg_started "$MDB_PID"
	for ((i = 0; i < 600; i++)); do
		if ! kill -0 "$MDB_PID" 2>/dev/null; then
			echo "mariadbd exited while starting:"
			tail -n 30 "$ERRLOG" "$HOME_DIR/stdout"
			return 1
		fi
		[ -S "$SOCK" ] && mdb_admin ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "mariadbd did not answer within 60 s:"
	tail -n 30 "$ERRLOG"
	return 1
}

# Clean shutdown: mariadb-admin shutdown, mariadbd gone within 60 s,
# exit status 0.
mdb_stop() {
	local t0=$SECONDS rc
	mdb_admin shutdown || { echo "mariadb-admin shutdown failed"; return 1; }
	timeout 60 tail --pid="$MDB_PID" -f /dev/null || {
		echo "mariadbd still running 60 s after mariadb-admin shutdown"
		return 1
	}
	wait "$MDB_PID"
	rc=$?
	echo "# shutdown in $((SECONDS - t0)) s, exit status $rc"
	[ "$rc" -eq 0 ] || { echo "mariadbd exited with $rc"; tail -n 30 "$ERRLOG"; return 1; }
}

# No error, assertion, OS error or crash report in any log of this test.
mdb_log_clean() {
	local bad
	bad=$(grep -H -E '\[ERROR\]|[Aa]ssertion|OS error|Operating system error|got signal|orrupt' \
		"$HOME_DIR"/err.*.log "$HOME_DIR/stdout" || true)
	[ -z "$bad" ] || { echo "error log:"; echo "$bad"; return 1; }
}

# The flags (octal) of every descriptor mariadbd holds for FILE.
fd_flags() {
	local fd
	for fd in /proc/"$MDB_PID"/fd/*; do
		[ "$(readlink "$fd")" = "$1" ] || continue
		awk '/^flags:/ { print $2 }' "/proc/$MDB_PID/fdinfo/${fd##*/}"
	done
}

# mariadbd holds FILE open read-write, and only with O_DIRECT (040000).
assert_o_direct() {
	local fl n=0
	for fl in $(fd_flags "$1"); do
		(((8#$fl & 3) == 2)) || continue
		n=$((n + 1))
		((8#$fl & 8#40000)) || {
			echo "mariadbd holds $1 without O_DIRECT (flags $fl)"
			return 1
		}
	done
	[ "$n" -gt 0 ] || { echo "mariadbd holds no read-write descriptor of $1"; return 1; }
}

# The shim serves InnoDB's data files in the running mariadbd: the
# library is in its memory, and at least one of ibdata1 and the sbtest
# tablespaces has a segment with mariadbd attached (dioshim status: a
# segment, "procs N" with N >= 1).
assert_served() {
	local f out n=0
	grep -q 'libdioshim\.so' "/proc/$MDB_PID/maps" || {
		echo "libdioshim.so is not mapped in mariadbd"
		return 1
	}
	for f in "$DD/ibdata1" "$DD"/sbtest/*.ibd; do
		# A file without a segment is "not served", exit 1.
		out=$(noshim "$DIOSHIM" status "$f" 2>&1) || true
		echo "# $out" >&3
		[[ "$out" =~ \ procs\ ([1-9][0-9]*)\  ]] && n=$((n + 1))
	done
	[ "$n" -gt 0 ] || {
		echo "no InnoDB data file has a segment with mariadbd in it"
		ls -la "$DIOSHIM_SHM_DIR" "$DIOSHIM_SHM_DIR"/* 2>&1
		return 1
	}
}

# CHECK TABLE ... EXTENDED on every InnoDB table of the server: each one
# "status OK", no error or warning row; the sbtest tables among them.
check_tables() {
	local tables out ntab nok
	tables=$(mdb -e "SELECT CONCAT(table_schema, '.', table_name)
		FROM information_schema.tables WHERE engine = 'InnoDB'
		ORDER BY 1") || { echo "cannot list the tables"; return 1; }
	echo "# InnoDB tables: $(paste -sd' ' <<<"$tables")" >&3
	grep -qx sbtest.sbtest1 <<<"$tables" && grep -qx sbtest.sbtest2 <<<"$tables" ||
		{ echo "sbtest tables missing: $tables"; return 1; }
	out=$(mdb -e "CHECK TABLE $(paste -sd, <<<"$tables") EXTENDED") ||
		{ echo "CHECK TABLE failed: $out"; return 1; }
	ntab=$(wc -l <<<"$tables")
	nok=$(awk -F'\t' '$3 == "status" && $4 == "OK"' <<<"$out" | wc -l)
	if [ "$nok" -ne "$ntab" ] ||
		awk -F'\t' '$3 == "error" || $3 == "warning" || ($3 == "status" && $4 != "OK") { bad = 1 } END { exit !bad }' <<<"$out"; then
		echo "CHECK TABLE: $nok of $ntab OK:"
		echo "$out"
		return 1
	fi
}

# oltp_write_only deletes and re-inserts rows in each transaction: every
# table keeps its 10000 rows through commits, rollbacks and recovery.
check_counts() {
	local t n
	for t in sbtest1 sbtest2; do
		n=$(mdb -e "SELECT COUNT(*) FROM sbtest.$t") || return 1
		[ "$n" = 10000 ] || { echo "sbtest.$t has $n rows, not 10000"; return 1; }
	done
}

# The datadir after a clean shutdown, seen by the kernel alone: no
# segment left, no EOF record, every tablespace (ibdata1, undo, .ibd)
# exactly the FSP_SIZE pages its header records, the redo log its size.
# With "crashed": InnoDB killed right after it grew a file, before the
# header's new size reached its redo log, leaves the file up to one
# extension longer than its header says, with the kernel alone too (its
# restart counts the pages from the file and rewrites the header only at
# the next extension): up to 4 MiB more is taken.
check_after_shutdown() {
	local left f size fsp bad=0 slack=0
	[ "${1:-}" = crashed ] && slack=$((4 << 20))
	left=$(find "$DIOSHIM_SHM_DIR" ! -type d ! -name 'dioshim-hint*')
	[ -z "$left" ] || { echo "segments left: $left"; ls -la "$DIOSHIM_SHM_DIR"/*; bad=1; }
	left=$(cd "$DD" && noshim getfattr -R -h -d -m '^user\.dioshim' . 2>&1)
	[ -z "$left" ] || { echo "EOF records left: $left"; bad=1; }
	size=$(noshim stat -c %s "$DD/ib_logfile0")
	[ "$size" -eq "$LOG_FILE_SIZE" ] ||
		{ echo "ib_logfile0: $size bytes, not $LOG_FILE_SIZE"; bad=1; }
	while read -r f; do
		size=$(noshim stat -c %s "$f")
		fsp=$(noshim od -An -tu4 --endian=big -j46 -N4 "$f" | tr -d ' ')
		if [ $((size % PAGE)) -ne 0 ] || [ "$size" -lt $((fsp * PAGE)) ] ||
			[ "$size" -gt $((fsp * PAGE + slack)) ]; then
			echo "$f: $size bytes, header FSP_SIZE $fsp pages ($((fsp * PAGE)) bytes)"
			bad=1
		fi
	done < <(find "$DD" -type f \( -name ibdata1 -o -name 'undo[0-9]*' -o -name '*.ibd' \))
	return "$bad"
}

need_libaio() {
	[ "${MDB_LIBAIO:-0}" = 1 ] || skip "libaio mode: set MDB_LIBAIO=1"
	"$MARIADBD" --no-defaults --verbose --help 2>/dev/null |
		grep -q -- '--innodb-linux-aio=' ||
		skip "this mariadbd has no innodb_linux_aio (libaio is its only native AIO)"
}

mode_log_says() {
	case $MODE in
	uring)
		grep -q 'InnoDB: Using io_uring' "$ERRLOG" || {
			echo "InnoDB did not say it uses io_uring:"
			grep -i -E 'aio|uring' "$ERRLOG"
			return 1
		}
		;;
	libaio)
		grep -q 'InnoDB: Using Linux native AIO' "$ERRLOG" || {
			echo "InnoDB did not say it uses libaio:"
			grep -i -E 'aio|uring' "$ERRLOG"
			return 1
		}
		;;
	noaio)
		! grep -q -E 'InnoDB: Using (io_uring|Linux native AIO)' "$ERRLOG" || {
			echo "innodb_use_native_aio=0, yet: $(grep -E 'InnoDB: Using' "$ERRLOG")"
			return 1
		}
		;;
	esac
}

# A started server, the shim serving it, the sbtest tables made.
start_with_tables() {
	fresh_datadir
	mdb_start
	mode_log_says
	assert_o_direct "$DD/ibdata1"
	assert_o_direct "$DD/ib_logfile0"
	mdb -e "CREATE DATABASE sbtest; CREATE TABLE sbtest.ack (id INT PRIMARY KEY) ENGINE=InnoDB"
	run sb oltp_write_only "${OLTP[@]}" prepare
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	assert_o_direct "$DD/sbtest/sbtest1.ibd"
	assert_o_direct "$DD/sbtest/sbtest2.ibd"
}

load_test() {
	mdb_use "$1" load
	start_with_tables
	run sb oltp_write_only "${OLTP[@]}" --time=8 run
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	echo "# $MODE: $(grep -E 'transactions:' <<<"$output" | tr -s ' ')" >&3
	[[ "$output" =~ transactions:\ +[1-9] ]]
	assert_served
	check_tables
	check_counts
	mdb_stop
	mdb_log_clean
	touch "$HOME_DIR/clean"
}

after_load_test() {
	mdb_use "$1" load
	[ -e "$HOME_DIR/clean" ] || {
		echo "the load test of $1 did not end in a clean shutdown"
		return 1
	}
	check_after_shutdown
}

crash_test() {
	local load ack last n max
	mdb_use "$1" crash
	start_with_tables
	# In the background as plain commands, not functions: $! is then the
	# timeout that teardown can stop.
	sb_cmd
	"${SB[@]}" oltp_write_only "${OLTP[@]}" --time=90 run >"$T/load.out" 2>&1 3>&- &
	load=$!
	bg_started "$load"
	"${SB[@]}" --threads=1 --time=90 --events=0 "$BATS_FILE_TMPDIR/ack.lua" run \
		>"$T/ack.out" 2>&1 3>&- &
	ack=$!
	bg_started "$ack"
	sleep 5
	assert_served
	kill -9 "$MDB_PID"
	wait "$MDB_PID" 2>/dev/null || true
	# The clients lose the server and stop.
	timeout 30 tail --pid="$load" -f /dev/null
	timeout 30 tail --pid="$ack" -f /dev/null
	last=$(sed -n 's/^ack \([0-9]*\)$/\1/p' "$T/ack.out" | tail -n 1)
	echo "# $MODE: killed after ${last:-0} acknowledged inserts" >&3
	[ "${last:-0}" -ge 20 ] || { echo "too few acknowledged inserts:"; cat "$T/ack.out"; return 1; }
	grep -q 'Lost connection' "$T/load.out" || {
		echo "the load did not run into the kill:"
		tail -n 20 "$T/load.out"
		return 1
	}
	# Crash recovery, under the shim.
	mdb_start
	grep -q 'InnoDB: Starting crash recovery' "$ERRLOG" || {
		echo "no crash recovery in the log:"
		cat "$ERRLOG"
		return 1
	}
	assert_o_direct "$DD/ibdata1"
	check_tables
	check_counts
	read -r n max < <(mdb -e "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM sbtest.ack WHERE id <= $last")
	[ "$n" -eq "$last" ] || { echo "$n of the $last acknowledged rows after recovery"; return 1; }
	# Nothing past the one insert that may have been in flight.
	max=$(mdb -e "SELECT COALESCE(MAX(id), 0) FROM sbtest.ack")
	[ "$max" -le $((last + 1)) ] || { echo "row $max, never inserted"; return 1; }
	mdb_stop
	mdb_log_clean
	check_after_shutdown crashed
}

@test "mariadb-install-db under the shim: no segment, no user.dioshim.eof left, every tablespace FSP_SIZE x 16 KiB" {
	mdb_use install pristine
	DD=$PRISTINE
	rm -rf "$DD"
	run timeout 180 env DIOSHIM_ENGAGE="$MDB_ENGAGE" "${LAUNCH[@]}" \
		mariadb-install-db --no-defaults --user=root --datadir="$DD" \
		--auth-root-authentication-method=normal --skip-test-db \
		--innodb-flush-method=O_DIRECT \
		--innodb-log-file-size="$LOG_FILE_SIZE"
	[ "$status" -eq 0 ] || { echo "$output"; rm -rf "$DD"; return 1; }
	if grep -E '\[ERROR\]|[Aa]ssertion|OS error' <<<"$output"; then
		rm -rf "$DD"
		return 1
	fi
	check_after_shutdown || { rm -rf "$DD"; return 1; }
}

@test "io_uring (default native AIO): InnoDB files O_DIRECT and served by the shim; sysbench oltp_write_only 8 s; CHECK TABLE all OK; clean shutdown; error log clean" {
	load_test uring
}

@test "io_uring: after the clean shutdown no segment, no user.dioshim.eof, every tablespace FSP_SIZE x 16 KiB, redo log its size" {
	after_load_test uring
}

@test "io_uring: kill -9 under load, restart under the shim: crash recovery, CHECK TABLE all OK, every acknowledged insert kept, clean files after shutdown" {
	crash_test uring
}

@test "innodb_use_native_aio=0: InnoDB files O_DIRECT and served by the shim; sysbench oltp_write_only 8 s; CHECK TABLE all OK; clean shutdown; error log clean" {
	load_test noaio
}

@test "innodb_use_native_aio=0: after the clean shutdown no segment, no user.dioshim.eof, every tablespace FSP_SIZE x 16 KiB, redo log its size" {
	after_load_test noaio
}

@test "innodb_use_native_aio=0: kill -9 under load, restart under the shim: crash recovery, CHECK TABLE all OK, every acknowledged insert kept, clean files after shutdown" {
	crash_test noaio
}

@test "innodb_linux_aio=aio (libaio, MDB_LIBAIO=1): InnoDB files O_DIRECT and served by the shim; sysbench oltp_write_only 8 s; CHECK TABLE all OK; clean shutdown; error log clean" {
	need_libaio
	load_test libaio
}

@test "innodb_linux_aio=aio (MDB_LIBAIO=1): after the clean shutdown no segment, no user.dioshim.eof, every tablespace FSP_SIZE x 16 KiB, redo log its size" {
	need_libaio
	after_load_test libaio
}

@test "innodb_linux_aio=aio (MDB_LIBAIO=1): kill -9 under load, restart under the shim: crash recovery, CHECK TABLE all OK, every acknowledged insert kept, clean files after shutdown" {
	need_libaio
	crash_test libaio
}
