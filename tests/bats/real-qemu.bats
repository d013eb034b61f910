#!/usr/bin/env bats
# fs: ext4 xfs
# QEMU's image tools under the shim, as a VM host runs them (Debian 12's
# qemu-utils 7.2): qemu-img convert into new qcow2 and raw images with
# direct I/O and each of its AIO engines (native, io_uring, threads),
# qemu-img bench into a sparse raw image, and a convert killed with -9 and
# run again.  QEMU reaps the aio ring and the io_uring CQ itself, with no
# call the shim sees: after it exits the image must have the kernel
# alone's size, no reserved tail, no xattr and no segment.  Images are
# checked with qemu-img compare and check, outside the shim.

load helper

setup_file() {
	fs_setup_file "${FS:-ext4}" 2G
	command -v qemu-img >/dev/null && command -v qemu-io >/dev/null ||
		return 0
	# 160 MiB of data, then 96 MiB of hole: a source with both.
	SRC=$BATS_FILE_TMPDIR/src.raw
	head -c $((160 << 20)) /dev/urandom >"$SRC"
	truncate -s 256M "$SRC"
	export SRC
}
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v qemu-img >/dev/null && command -v qemu-io >/dev/null ||
		skip "qemu-img and qemu-io are not installed (qemu-utils)"
	F=$SCRATCH_MNT/img.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
}
teardown() {
	[ -z "${BG:-}" ] || { kill -9 "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; } || true
}

# The image left for a program outside the shim: no xattr, no segment.
assert_left_clean() {
	run noshim getfattr -n user.dioshim.eof "$1"
	[ "$status" -ne 0 ]
	assert_no_segment "$1"
}

# convert_to RUNNER AIO FMT TARGET: SRC into a new image, direct,
# out of order, 16 coroutines (a VM host's import).
convert_to() {
	local runner=$1 aio=$2 fmt=$3 target=$4
	rm -f "$target"
	noshim qemu-img create -q -f "$fmt" "$target" 256M
	$runner qemu-img convert -n -T none -W -m 16 -f raw \
		--target-image-opts "$SRC" \
		"driver=$fmt,file.driver=file,file.filename=$target,file.aio=$aio,file.cache.direct=on"
}

@test "qemu-img convert into new qcow2 and raw images, direct, with aio=native, io_uring and threads: images equal to the source, check clean, the kernel alone's size, no tail, xattr or segment after exit" {
	local aio fmt
	for aio in native io_uring threads; do
		for fmt in qcow2 raw; do
			echo "# $aio $fmt"
			convert_to noshim "$aio" "$fmt" "$F.k"
			run convert_to shim "$aio" "$fmt" "$F"
			echo "$output"
			[ "$status" -eq 0 ]
			noshim qemu-img compare -q -f raw -F "$fmt" "$SRC" "$F"
			if [ "$fmt" = qcow2 ]; then
				noshim qemu-img check -q "$F"
			fi
			echo "sizes: kernel $(real_size "$F.k") dioshim $(real_size "$F")"
			[ "$(real_size "$F")" -eq "$(real_size "$F.k")" ]
			assert_left_clean "$F"
			rm -f "$F" "$F.k"
		done
	done
}

@test "qemu-img bench -w into a sparse raw image (the writes the shim runs in parallel), direct, each AIO engine: the pattern everywhere it wrote, the size the image was made with, no segment" {
	local aio
	for aio in native io_uring threads; do
		echo "# $aio"
		rm -f "$F"
		noshim qemu-img create -q -f raw "$F" 256M
		run shim qemu-img bench -w -t none -i "$aio" -d 16 -s 64K \
			-c 2000 --pattern=165 -f raw "$F"
		echo "$output"
		[ "$status" -eq 0 ]
		[ "$(real_size "$F")" -eq $((256 << 20)) ]
		# 2000 x 64 KiB from 0: the pattern (0xa5), then the hole.
		noshim qemu-io -f raw -c "read -q -P 0xa5 0 125M" \
			-c "read -q -P 0 125M 131M" "$F"
		assert_left_clean "$F"
	done
}

@test "qemu-io's own aio_write past the end of a qcow2 image's data, native AIO, then a flush and quit: what qemu-io reads back outside the shim, check clean, the kernel alone's size" {
	local side
	for side in k s; do
		rm -f "$F.$side"
		noshim qemu-img create -q -f qcow2 "$F.$side" 1G
	done
	# Clusters allocated in parallel at the image's end: qcow2's growth.
	local cmds=(-c "aio_write -P 0x11 0 8M" -c "aio_write -P 0x22 8M 8M"
		    -c "aio_write -P 0x33 512M 4M" -c "aio_write -P 0x44 16M 2M"
		    -c "aio_flush" -c "flush")
	noshim qemu-io -t none -i native --image-opts \
		"driver=qcow2,file.driver=file,file.filename=$F.k" "${cmds[@]}"
	run shim qemu-io -t none -i native --image-opts \
		"driver=qcow2,file.driver=file,file.filename=$F.s" "${cmds[@]}"
	echo "$output"
	[ "$status" -eq 0 ]
	noshim qemu-img check -q "$F.s"
	noshim qemu-io -r -f qcow2 -c "read -q -P 0x11 0 8M" \
		-c "read -q -P 0x22 8M 8M" -c "read -q -P 0x44 16M 2M" \
		-c "read -q -P 0x33 512M 4M" -c "read -q -P 0 18M 494M" "$F.s"
	noshim qemu-img compare -q -f qcow2 -F qcow2 "$F.k" "$F.s"
	[ "$(real_size "$F.s")" -eq "$(real_size "$F.k")" ]
	assert_left_clean "$F.s"
}

@test "qemu-img convert killed with -9 mid-way, then run again under the shim: the image equal to the source, check clean, the kernel alone's size, no tail, xattr or segment" {
	convert_to noshim native qcow2 "$F.k"
	rm -f "$F"
	noshim qemu-img create -q -f qcow2 "$F" 256M
	# Slowed to a crawl (1 MiB/s, 64 KiB requests) so that the kill
	# lands while clusters are still being added.
	"$DIOSHIM" qemu-img convert -n -T none -W -m 16 -r 4M -f raw \
		--target-image-opts "$SRC" \
		"driver=qcow2,file.driver=file,file.filename=$F,file.aio=native,file.cache.direct=on" &
	BG=$!
	sleep 1
	kill -9 "$BG"
	wait "$BG" || true
	BG=
	echo "after the kill: $(real_size "$F") bytes"
	run convert_to shim native qcow2 "$F.again"
	[ "$status" -eq 0 ]
	# Again into the killed image itself (-n: it exists).
	run shim qemu-img convert -n -T none -W -m 16 -f raw \
		--target-image-opts "$SRC" \
		"driver=qcow2,file.driver=file,file.filename=$F,file.aio=native,file.cache.direct=on"
	echo "$output"
	[ "$status" -eq 0 ]
	noshim qemu-img compare -q -f raw -F qcow2 "$SRC" "$F"
	noshim qemu-img check -q "$F"
	# The killed run's clusters stay allocated in the image: not
	# smaller than a whole convert's, and ending on a cluster.
	[ "$(real_size "$F")" -ge "$(real_size "$F.k")" ]
	[ $(($(real_size "$F") % 65536)) -eq 0 ]
	[ "$(real_size "$F.again")" -eq "$(real_size "$F.k")" ]
	assert_left_clean "$F"
	assert_left_clean "$F.again"
}
