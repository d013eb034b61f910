# shellcheck shell=bash
# Scratch filesystems for tests and benchmarks: a fully allocated image in a
# loop device with direct I/O, formatted, mounted under a private directory,
# and always torn down.  Only what this file made is ever unmounted or
# detached: every loop device and mount it creates is listed in a registry,
# and teardown touches nothing else.
#
#   scratch_skip_reason TYPE      prints why TYPE cannot be made here, or
#                                 nothing (and returns 0) when it can
#   scratch_make TYPE [SIZE]      ext4|xfs|tmpfs; sets SCRATCH_MNT,
#                                 SCRATCH_DEV, SCRATCH_DIR
#   scratch_destroy               tears down what scratch_make made
#   scratch_destroy_all           tears down everything in the registry
#                                 (for EXIT traps)

: "${SCRATCH_REGISTRY:=${TMPDIR:-/tmp}/dioshim-scratch.registry}"
: "${SCRATCH_BASE:=/var/tmp}"

scratch_skip_reason() {
	local type=$1
	if [ "$(id -u)" != 0 ]; then
		echo "needs root to make a $type filesystem (loop device, mount)"
		return 1
	fi
	case $type in
	tmpfs) return 0 ;;
	ext4) command -v mkfs.ext4 >/dev/null || { echo "mkfs.ext4 missing (e2fsprogs)"; return 1; } ;;
	xfs) command -v mkfs.xfs >/dev/null || { echo "mkfs.xfs missing (xfsprogs)"; return 1; } ;;
	*) echo "unknown filesystem $type"; return 1 ;;
	esac
	command -v losetup >/dev/null || { echo "losetup missing"; return 1; }
	[ -e /dev/loop-control ] || { echo "no /dev/loop-control: no loop devices here"; return 1; }
	grep -qw "$type" /proc/filesystems || modprobe "$type" 2>/dev/null ||
		grep -qw "$type" /proc/filesystems || { echo "kernel has no $type"; return 1; }
	return 0
}

# Bytes free under a directory (0 if it cannot tell).
scratch_avail() { df --output=avail -B1 "$1" 2>/dev/null | tail -n 1 || echo 0; }

scratch_make() {
	local type=$1 size=${2:-1G} img base=$SCRATCH_BASE need
	# The image must fit with room to spare; on a shared machine whose
	# disk is full, memory (/dev/shm, which supports direct I/O) will do.
	need=$(($(numfmt --from=iec "$size") * 2))
	if [ "$type" != tmpfs ] && [ "$(scratch_avail "$base")" -lt "$need" ] &&
		[ "$(scratch_avail /dev/shm)" -ge "$need" ]; then
		base=/dev/shm
	fi
	SCRATCH_DIR=$(mktemp -d "$base/dioshim-scratch.XXXXXX") || return 1
	SCRATCH_MNT=$SCRATCH_DIR/mnt
	SCRATCH_DEV=
	mkdir -p "$SCRATCH_MNT"
	echo "dir $SCRATCH_DIR" >>"$SCRATCH_REGISTRY"
	if [ "$type" = tmpfs ]; then
		mount -t tmpfs -o size="$size" dioshim-scratch "$SCRATCH_MNT" || return 1
		echo "mnt $SCRATCH_MNT" >>"$SCRATCH_REGISTRY"
		export SCRATCH_DIR SCRATCH_MNT SCRATCH_DEV
		return 0
	fi
	img=$SCRATCH_DIR/image
	fallocate -l "$size" "$img" || return 1
	SCRATCH_DEV=$(losetup -f --show --direct-io=on "$img") || return 1
	echo "dev $SCRATCH_DEV $img" >>"$SCRATCH_REGISTRY"
	case $type in
	ext4) mkfs.ext4 -q -F "$SCRATCH_DEV" >/dev/null 2>&1 ;;
	xfs) mkfs.xfs -q -f "$SCRATCH_DEV" >/dev/null 2>&1 ;;
	esac || return 1
	mount "$SCRATCH_DEV" "$SCRATCH_MNT" || return 1
	echo "mnt $SCRATCH_MNT" >>"$SCRATCH_REGISTRY"
	export SCRATCH_DIR SCRATCH_MNT SCRATCH_DEV
}

# Undo one registry line's worth, in reverse order of making.
_scratch_undo() {
	local kind=$1 what=$2 img=${3:-} i
	case $kind in
	mnt)
		if mountpoint -q "$what"; then
			for i in 1 2 3 4 5 6 7 8 9 10; do
				umount "$what" 2>/dev/null && break
				sleep 0.5
			done
			mountpoint -q "$what" && umount -l "$what"
		fi
		;;
	dev)
		# Only detach the device if it is still backed by our image.
		if losetup -n -O BACK-FILE "$what" 2>/dev/null | grep -qF "$img"; then
			losetup -d "$what"
		fi
		;;
	dir) rm -rf "$what" ;;
	esac
	return 0
}

scratch_destroy() {
	local dir=${1:-$SCRATCH_DIR} line
	[ -n "$dir" ] && [ -f "$SCRATCH_REGISTRY" ] || return 0
	grep -F "$dir" "$SCRATCH_REGISTRY" | tac | while read -r line; do
		# shellcheck disable=SC2086
		_scratch_undo $line
	done
	grep -vF "$dir" "$SCRATCH_REGISTRY" >"$SCRATCH_REGISTRY.new" || true
	mv "$SCRATCH_REGISTRY.new" "$SCRATCH_REGISTRY"
}

scratch_destroy_all() {
	local line
	[ -f "$SCRATCH_REGISTRY" ] || return 0
	tac "$SCRATCH_REGISTRY" | while read -r line; do
		# shellcheck disable=SC2086
		_scratch_undo $line
	done
	rm -f "$SCRATCH_REGISTRY"
}
