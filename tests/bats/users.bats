#!/usr/bin/env bats
# fs: ext4 xfs
# Who may change a segment is who may write its file.  Two users of one
# group append to one group-writable file, both under the shim with the
# default settings: both join its segment (which takes the file's group),
# and every acknowledged record is kept, as with the kernel alone.  A group
# member who may not write the file cannot open its segment for writing,
# and words poked into a live segment (a divisor of 0, a barrier nobody
# holds) cost no signal and no hang.

load helper

U1=dioshimt1
U2=dioshimt2
G=dioshimtg

setup_file() {
	fs_setup_file "${FS:-ext4}" 1G
	[ -z "${FS_SKIP:-}" ] || return 0
	if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null ||
		! command -v useradd >/dev/null; then
		export FS_SKIP="needs root, setpriv and useradd"
		return 0
	fi
	# Users and group of our own, removed in teardown_file.
	export MADE_USERS=
	getent group "$G" >/dev/null || { groupadd "$G" && MADE_USERS+=" g:$G"; }
	for u in "$U1" "$U2"; do
		getent passwd "$u" >/dev/null ||
			{ useradd -M -N -g "$G" -s /usr/sbin/nologin "$u" &&
				MADE_USERS+=" u:$u"; }
	done
	# Both users reach the mount, a directory for logs and the segments.
	chmod 755 "$SCRATCH_DIR"
	chmod 1777 "$SCRATCH_MNT"
	export USHM
	USHM=$(mktemp -d /dev/shm/dioshim-users.XXXXXX)
	chmod 1777 "$USHM"
}

teardown_file() {
	[ -n "${USHM:-}" ] && rm -rf "$USHM"
	for m in ${MADE_USERS:-}; do
		case $m in
		u:*) userdel "${m#u:}" 2>/dev/null || true ;;
		esac
	done
	for m in ${MADE_USERS:-}; do
		case $m in
		g:*) groupdel "${m#g:}" 2>/dev/null || true ;;
		esac
	done
	fs_teardown_file
}

setup() {
	fs_require
	F=$SCRATCH_MNT/users.$BATS_TEST_NUMBER
	T=$(mktemp -d "$USHM/t.XXXXXX")
	chmod 1777 "$T"
}

teardown() {
	touch "$T/go" # a paused writer goes on
	reap_bg
	wait
	[ -z "${USHM_OWN:-}" ] || rm -rf "$USHM_OWN"
	rm -f "$F" "$F".*
}

# as USER CMD...: run CMD as USER (group G), segments in $USHM.
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$G" --init-groups \
		env DIOSHIM_SHM_DIR="$USHM" DIOSHIM_LOG="$T/log.$u" "$@"
}

seg_of() { segment_of "$1" "$USHM"; }

# Two users append N records with 2 threads each to FILE, RUN being
# "noshim" or "shim"; prints t_verify's verdict.
two_users_append() {
	local run=$1 file=$2 n=$3 p1 p2
	install -m 664 -o "$U1" -g "$G" /dev/null "$file"
	as "$U1" timeout 300 $([ "$run" = shim ] && echo "$DIOSHIM") \
		"$HELPERS/t_appender" -t 2 -n "$n" -w 0 -l "$T/l1.$run" "$file" &
	p1=$!
	as "$U2" timeout 300 $([ "$run" = shim ] && echo "$DIOSHIM") \
		"$HELPERS/t_appender" -t 2 -n "$n" -w 2 -l "$T/l2.$run" "$file" &
	p2=$!
	wait "$p1" || { echo "writer $U1 failed: $?"; return 1; }
	wait "$p2" || { echo "writer $U2 failed: $?"; return 1; }
	noshim "$HELPERS/t_verify" -S $((4 * n * 4096)) "$file" \
		"$T/l1.$run" "$T/l2.$run"
}

@test "two users of a group append to one 664 file under the shim: every record, exact size, no zero block" {
	run two_users_append noshim "$F.kernel" 200
	echo "kernel alone: $output"
	# XFS itself loses concurrent O_APPEND direct appends (the kernel
	# alone is the control on ext4 only).
	[ "$FS_TYPE" = xfs ] || [ "$status" -eq 0 ]
	run two_users_append shim "$F" 200
	echo "under the shim: $output"
	[ "$status" -eq 0 ]
	assert_no_segment "$F" "$USHM"
	! noshim getfattr -n user.dioshim.eof "$F" 2>/dev/null
	# Both joined: nobody passed through for want of permission.
	! grep -qs "not ours\|passing through" "$T"/log.*
}

# A user outside the file's group (nobody) and U1 append N records each
# with 2 threads to FILE under the shim; prints t_verify's counts.
outsider_append() {
	local file=$1 n=$2 p1 p2
	as "$U1" timeout 300 "$DIOSHIM" "$HELPERS/t_appender" -t 2 -n "$n" \
		-w 0 -l "$T/o1" "$file" &
	p1=$!
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		env DIOSHIM_SHM_DIR="$USHM" DIOSHIM_LOG="$T/log.nobody" \
		timeout 300 "$DIOSHIM" "$HELPERS/t_appender" -t 2 -n "$n" -w 2 \
		-l "$T/o2" "$file" &
	p2=$!
	wait "$p1" || { echo "writer $U1 failed: $?"; return 1; }
	wait "$p2" || { echo "writer nobody failed: $?"; return 1; }
	noshim "$HELPERS/t_verify" -S $((4 * n * 4096)) "$file" "$T/o1" "$T/o2"
}

@test "a world-writable file, and one with an ACL, written by a user outside the group: served for no one, no record lost, no zero block" {
	getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
		skip "no user nobody or group nogroup"
	local kinds=world
	command -v setfacl >/dev/null && kinds+=" acl"
	for kind in $kinds; do
		install -m 664 -o "$U1" -g "$G" /dev/null "$F.$kind"
		if [ "$kind" = world ]; then
			chmod 666 "$F.$kind"
		else
			setfacl -m u:nobody:rw "$F.$kind"
		fi
		run outsider_append "$F.$kind" 200
		echo "$kind: $output" | tail -4
		# No segment was made: the writes were the kernel's, which on
		# XFS may give two appenders one offset; never a zero block.
		if [ "$FS_TYPE" = xfs ]; then
			[[ "$output" == *"zeros=0 "* ]]
		else
			[ "$status" -eq 0 ]
		fi
		assert_no_segment "$F.$kind" "$USHM"
		! noshim getfattr -n user.dioshim.eof "$F.$kind" 2>/dev/null
	done
}

# U1 appends N records with T threads to FILE under the shim and pauses
# after 40 (TAG names its files); BG is its pid.  resume_writer lets it
# finish and checks every record and the size.
paused_writer() {
	local file=$1 tag=$2 n=$3 t=$4
	as "$U1" "$DIOSHIM" "$HELPERS/t_appender" -t "$t" -n "$n" \
		-p "40:$T/ready.$tag:$T/go.$tag" -l "$T/l.$tag" "$file" &
	BG=$!
	wait_file "$T/ready.$tag"
}
resume_writer() {
	local file=$1 tag=$2 records=$3
	touch "$T/go.$tag"
	run timeout 120 tail --pid="$BG" -f /dev/null
	[ "$status" -eq 0 ]
	wait "$BG"
	BG=
	cat "$T/log.$U1" 2>/dev/null || true
	! grep -qs "not ours\|passing through" "$T/log.$U1"
	noshim "$HELPERS/t_verify" -S $((records * 4096)) "$file" "$T/l.$tag"
}

@test "the segment of a group-writable file takes its group; of a private one, stays private to its writer" {
	install -m 664 -o "$U1" -g "$G" /dev/null "$F"
	paused_writer "$F" shared 400 1
	run stat -c '%a %G' "$(seg_of "$F")"
	echo "$output"
	[ "$output" = "660 $G" ]
	# The other member sees the logical size (statx, as coreutils asks
	# for it), while the kernel's is ahead of it.
	run as "$U2" "$DIOSHIM" stat -c %s "$F"
	echo "$output"
	[ "$output" -eq $((40 * 4096)) ]
	[ "$(real_size "$F")" -gt $((40 * 4096)) ]
	resume_writer "$F" shared 400

	install -m 644 -o "$U1" -g "$G" /dev/null "$F.p"
	paused_writer "$F.p" private 400 1
	SEG=$(seg_of "$F.p")
	run stat -c '%a %U' "$SEG"
	echo "$output"
	[ "$output" = "600 $U1" ]
	# A member of the group, who may not write the file, cannot open
	# the segment for writing.
	run as "$U2" sh -c "exec 3<>'$SEG'"
	[ "$status" -ne 0 ]
	resume_writer "$F.p" private 400
}

@test "a segment planted with group write for a file the group may not write is refused; the writer stays exact" {
	install -m 644 -o "$U1" -g "$G" /dev/null "$F"
	SEG=$(seg_of "$F")
	# U2 plants a look-alike: the right name, its group, mode 660.
	as "$U2" sh -c "head -c 65536 /dev/zero >'$SEG' && chmod 660 '$SEG'"
	run as "$U1" timeout 120 "$DIOSHIM" "$HELPERS/t_appender" -t 1 -n 200 \
		-l "$T/l1" "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	noshim "$HELPERS/t_verify" -S $((200 * 4096)) "$F" "$T/l1"
	grep -q "not ours" "$T/log.$U1"
}

@test "words poked into a live segment (blksize 0, a barrier nobody holds) cost no signal and no hang" {
	install -m 664 -o "$U1" -g "$G" /dev/null "$F"
	paused_writer "$F" poked 300 2
	SEG=$(seg_of "$F")
	# struct dioshim_seg: blksize at byte 52, barrier at byte 192.
	printf '\0\0\0\0' | dd of="$SEG" bs=1 seek=52 conv=notrunc status=none
	printf '\1\0\0\0' | dd of="$SEG" bs=1 seek=192 conv=notrunc status=none
	resume_writer "$F" poked 600
}

@test "dioshim status with no FILE: root lists every user's served files; a user lists its own, not another user's private one" {
	local a=$F.a b=$F.b
	# A segment directory of this test's own: the earlier tests plant
	# segments there (a listing reports each corrupt one, and exits 1).
	USHM_OWN=$(mktemp -d /dev/shm/dioshim-users.XXXXXX)
	chmod 1777 "$USHM_OWN"
	local USHM=$USHM_OWN
	# Each user writes a private file (0644: its segment is 0600, its
	# writer's), paused with its tail reserved.
	as "$U1" env DIOSHIM_ENGAGE=always "$DIOSHIM" "$HELPERS/t_appender" \
		-t 1 -n 100 -c -p "16:$T/ready.a:$T/go" "$a" >/dev/null 2>&1 &
	BG=$!
	as "$U2" env DIOSHIM_ENGAGE=always "$DIOSHIM" "$HELPERS/t_appender" \
		-t 1 -n 100 -c -p "16:$T/ready.b:$T/go" "$b" >/dev/null 2>&1 &
	wait_file "$T/ready.a"
	wait_file "$T/ready.b"
	[ "$(noshim stat -c %U "$(seg_of "$a")")" = "$U1" ]
	run env DIOSHIM_SHM_DIR="$USHM" "$DIOSHIM" status
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	grep -q "^$a: .* procs 1 .* mode reserving " <<<"$output"
	grep -q "^$b: .* procs 1 .* mode reserving " <<<"$output"
	run as "$U1" "$DIOSHIM" status
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	grep -q "^$a: .* procs 1 " <<<"$output"
	touch "$T/go"
	wait
	run env DIOSHIM_SHM_DIR="$USHM" "$DIOSHIM" status
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}
