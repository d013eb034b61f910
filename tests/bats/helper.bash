# shellcheck shell=bash
# Shared by every bats suite: paths, the launcher, scratch filesystems.
#
# A suite that needs a real filesystem calls `fs_setup_file TYPE [SIZE]`
# from setup_file and `fs_teardown_file` from teardown_file; without root
# or loop devices its tests skip and say why.  Files are checked with tools
# run outside the shim (`noshim`).

TOP=${TOP:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
BUILD=${BUILD:-$TOP/build}
DIOSHIM=$BUILD/dioshim
APPENDBENCH=$BUILD/appendbench
HELPERS=$BUILD/tests/helpers
export TOP BUILD DIOSHIM APPENDBENCH HELPERS
# shellcheck source=../lib/scratchfs.sh
source "$TOP/tests/lib/scratchfs.sh"
: "${DIOSHIM_SHM_DIR:=/dev/shm}"
export DIOSHIM_SHM_DIR
# Most suites try the mechanisms (reservation, record, trim, prefill) on
# files with one writer, which by default the shim leaves to the kernel
# until a second write is in flight: they engage every file from its first
# write.  engage.bats tries the default.
: "${DIOSHIM_ENGAGE:=always}"
export DIOSHIM_ENGAGE

# Run under the shim / strictly outside it.  Nothing may hang the run:
# every shimmed command gets a time limit.
shim() { timeout 300 "$DIOSHIM" "$@"; }
noshim() { env -u LD_PRELOAD "$@"; }

# 512-byte blocks of data a file has allocated, written or not (its fiemap
# extents, holes left out).  stat's %b also counts the extent tree's own
# blocks, which depend on how fragmented the free space was, not on what
# the program asked for.
data_blocks() {
	noshim xfs_io -r -c fiemap "$1" | awk -F'[]:.[]+' \
		'NR > 1 && $NF !~ /hole/ { n += $4 - $3 + 1 } END { print n + 0 }'
}

# Wait (up to a minute) for a file a background helper creates.
wait_file() {
	local i
	for ((i = 0; i < 6000; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.01
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# In teardown: let a background writer ($BG) waiting for one of the named
# files go on, then reap it.
reap_bg() {
	[ $# -eq 0 ] || touch "$@" 2>/dev/null || true
	[ -z "${BG:-}" ] || timeout 60 tail --pid="$BG" -f /dev/null ||
		kill "$BG" 2>/dev/null || true
}

fs_setup_file() {
	local type=$1 size=${2:-1G} why
	if ! why=$(scratch_skip_reason "$type"); then
		export FS_SKIP="$why"
		return 0
	fi
	scratch_make "$type" "$size" || {
		export FS_SKIP="could not make a $type scratch filesystem"
		scratch_destroy
		return 0
	}
	export FS_TYPE=$type FS_SKIP=
	# tmpfs is served only when asked for.
	[ "$type" = tmpfs ] && export DIOSHIM_FS=tmpfs
	return 0
}

fs_teardown_file() {
	[ -n "${SCRATCH_DIR:-}" ] && scratch_destroy "$SCRATCH_DIR"
	return 0
}

# In setup (per test): skip when the suite has no filesystem.
fs_require() {
	[ -z "${FS_SKIP:-}" ] || skip "$FS_SKIP"
	[ -n "${SCRATCH_MNT:-}" ] || skip "no scratch filesystem"
}

# Unmount the scratch filesystem after a power cut (xfs_io shutdown) and
# mount it again, until it is a new mount, alive.  A killed
# writer may still be leaving the dead filesystem for a moment (umount:
# busy); and a mount namespace another suite made meanwhile (unshare
# --mount-proc, containers.bats) holds a copy of every mount, which keeps
# the shut-down filesystem alive after our umount: mounting the device
# again would give it back, dead.  So: again, until that namespace ends.
scratch_remount() {
	local i
	for i in $(seq 300); do
		umount "$SCRATCH_MNT" 2>/dev/null ||
			{ sleep 0.1; continue; }
		mount "$SCRATCH_DEV" "$SCRATCH_MNT" || return 1
		# A shut-down filesystem refuses even a directory read.
		ls -a "$SCRATCH_MNT" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "scratch_remount: $SCRATCH_MNT still dead or busy" >&2
	return 1
}

# The size of a file as a process outside the shim sees it.
real_size() { noshim stat -c %s "$1"; }

# The segment of a file: in the segment directory, or in its group's
# directory there for a group-writable file.
segment_of() {
	local dir=${2:-$DIOSHIM_SHM_DIR}
	if [ $((0$(noshim stat -c %a "$1") & 020)) -ne 0 ]; then
		dir=$dir/dioshim-g$(noshim stat -c %g "$1")
	fi
	printf '%s/dioshim.%x.%x' "$dir" "$(noshim stat -c %d "$1")" \
		"$(noshim stat -c %i "$1")"
}

# What the shim leaves of a file, seen from outside it: whether it keeps
# an EOF record, whether a segment is left for it.
left_behind() {
	local rec=0 seg=0
	noshim getfattr -n user.dioshim.eof "$1" >/dev/null 2>&1 && rec=1
	[ -e "$(segment_of "$1")" ] && seg=1
	echo "record=$rec segment=$seg"
}

# No segment may be left for a file once every writer has gone.
assert_no_segment() {
	local seg
	seg=$(segment_of "$1" "${2:-}")
	if [ -e "$seg" ]; then
		echo "segment $seg still exists" >&2
		return 1
	fi
}

# The same for many files, in one stat outside the shim (a loop of
# assert_no_segment spawns four processes per file).
assert_no_segments() {
	local mode gid dev ino dir seg bad=0 ids
	ids=$(noshim stat -c '%a %g %d %i' "$@") || return 1
	while read -r mode gid dev ino; do
		dir=$DIOSHIM_SHM_DIR
		[ $((0$mode & 020)) -eq 0 ] || dir=$dir/dioshim-g$gid
		seg=$(printf '%s/dioshim.%x.%x' "$dir" "$dev" "$ino")
		if [ -e "$seg" ]; then
			echo "segment $seg still exists" >&2
			bad=1
		fi
	done <<<"$ids"
	return "$bad"
}

# slowed_run SIDE LIMIT VALUE CMD...: run CMD (side "kernel": outside the
# shim, else under it) in a blkio cgroup whose blkio.throttle.LIMIT for
# the scratch device (SLOW_DEV=MAJ:MIN: that one) is VALUE, so that its
# writes are still in flight when it goes on; sets $status and $output as
# `run` does.  Skips without cgroup v1's blkio controller.
slowed_run() {
	local side=$1 limit=$2 value=$3 cg=/sys/fs/cgroup/blkio/dioshim-slow.$$ dev
	shift 3
	[ -w /sys/fs/cgroup/blkio ] || skip "no cgroup v1 blkio controller to slow a writer with"
	dev=${SLOW_DEV:-$(lsblk -no MAJ:MIN "$SCRATCH_DEV" 2>/dev/null | tr -d ' ')}
	[ -n "$dev" ] || skip "no device numbers for $SCRATCH_DEV"
	mkdir -p "$cg" || skip "cannot make a blkio cgroup"
	if ! echo "$dev $value" >"$cg/blkio.throttle.$limit"; then
		rmdir "$cg"
		skip "cannot limit writes to device $dev"
	fi
	if [ "$side" = kernel ]; then
		run timeout 120 bash -c 'echo $$ >'"$cg"'/cgroup.procs; exec env -u LD_PRELOAD "$@"' _ "$@"
	else
		run timeout 120 bash -c 'echo $$ >'"$cg"'/cgroup.procs; exec "$@"' _ "$DIOSHIM" "$@"
	fi
	rmdir "$cg" || true
	echo "$side: status $status, $output"
}

# recwrite writers for crash tests (recovery.bats, grow.bats): the
# caller keeps their pids in PIDS and its files in $T.
# Start recwrite in the background (under the shim, or "noshim") with
# OPS, then wait until it is paused with every step done.  Background
# processes are started by exec'ing launchers (so that $! is the process
# to kill) and without bats' output descriptor.  What they print is kept
# off the scratch filesystem, which a power cut may take with it.
start_writer() {
	local how=$1 file=$2 launch=$DIOSHIM out
	shift 2
	out=$T/$(basename "$file")
	rm -f "$out.ready"
	[ "$how" = noshim ] && launch="env -u LD_PRELOAD"
	$launch "$HELPERS/recwrite" "$file" "$@" ready "$out.ready" pause \
		>"$out.out" 2>&1 3>&- &
	PIDS+=($!)
	wait_file "$out.ready"
}

kill_writers() {
	local p
	for p in "${PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	PIDS=()
}

# The size the writer's last sync acknowledged.
synced() { sed -n 's/^synced //p' "$T/$(basename "$1").out" | tail -1; }
