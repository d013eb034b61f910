#!/usr/bin/env bats
# fs: ext4 xfs
# fsync and fdatasync with a reserved tail: the size a program made
# durable survives a power cut even when it grew without data, with
# fdatasync alone too; on a full filesystem every call answers as the
# kernel alone does.

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 512M; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v xfs_io >/dev/null || skip "xfs_io (xfsprogs) missing"
	F=$SCRATCH_MNT/sync.$BATS_TEST_NUMBER
}

# Run syncgrow until it says "synced", then cut the power and recover.
grow_sync_cut() {
	local sync=$1 out=$BATS_TEST_TMPDIR/out pid
	"$DIOSHIM" "$HELPERS/syncgrow" "$F" "$sync" >"$out" &
	pid=$!
	for _ in $(seq 200); do
		grep -q synced "$out" && break
		sleep 0.1
	done
	grep -q "synced 75536" "$out"
	xfs_io -x -c shutdown "$SCRATCH_MNT"
	kill -9 "$pid"; wait "$pid" || true
	rm -f "$DIOSHIM_SHM_DIR"/dioshim.*
	scratch_remount
	run "$DIOSHIM" recover "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(real_size "$F")" -eq 75536 ]
}

@test "a size grown without data and made durable by fdatasync survives a power cut" {
	grow_sync_cut fdatasync
}

@test "fdatasync makes the EOF record durable on its own (ext4's fdatasync would not)" {
	# The journal commits the growth first; the sync's record change is
	# then the only change left, which ext4's fdatasync would not commit.
	SYNCGROW_DELAY=6 grow_sync_cut fdatasync
}

@test "a size grown without data and made durable by fsync survives a power cut" {
	grow_sync_cut fsync
}

@test "on a full filesystem, fsync and fdatasync give the kernel's answers" {
	local mine ref
	ref=$(noshim "$HELPERS/syncgrow" "$F.ref" fdatasync fill)
	rm -f "$F.ref" "$F.ref.fill"
	mine=$("$DIOSHIM" "$HELPERS/syncgrow" "$F" fdatasync fill)
	echo "kernel: $ref"
	echo "dioshim: $mine"
	# Writes may differ: blocks the shim had reserved before the
	# filesystem filled up are the file's own, so an append into them
	# succeeds where the kernel alone has no block left.  The syncs must
	# not: both succeed.
	[ "$(echo "$ref" | grep sync: )" = "$(echo "$mine" | grep sync: )" ]
	echo "$mine" | grep -q "^fdatasync: 0"
	# And the size the program was told is the size it left.
	[ "$(real_size "$F")" -eq "$(echo "$mine" | sed -n 's/^synced //p')" ]
	rm -f "$F.fill"
	assert_no_segment "$F"
}
