# shellcheck shell=bash
# A real guest for the acceptance tests: a Debian kernel, an initramfs made
# at test time (busybox static, the virtio modules, fio and its libraries)
# whose /init runs fio against the data disk /dev/vda and powers off, and
# QEMU (TCG: KVM guests hang on the machines these tests run on) booting it
# with a qcow2 data disk.
#
#   vm_skip_reason               prints why no guest can run here and
#                                returns 1, or prints nothing
#   vm_kernel                    the kernel image (/boot/vmlinuz-VERSION)
#   vm_initramfs OUT             makes the initramfs OUT (cpio newc, gzip)
#   vm_boot IMG... -- AIO LOG [LAUNCHER...]
#                                boots it, IMG... the guest's vda, vdb...,
#                                cache=none, aio=AIO; the serial console in
#                                LOG; LAUNCHER (e.g. "dioshim --") runs
#                                qemu; VM_TIMEOUT seconds at most
#   vm_result LOG                the guest's "VMRESULT ..." line; returns 1
#                                when there is none or it is not verify=ok
#   vm_field LINE KEY            KEY's value in a VMRESULT line
#
# What the guest does is set on the kernel command line (unknown NAME=VALUE
# parameters reach /init as environment):
#   VM_MODE=write   on vda: random 4 KiB writes over [0, VM_MIB MiB), then
#                   sequential ones over [VM_MIB, 2 VM_MIB) MiB, libaio,
#                   queue depth 16, direct, each phase read back and checked
#                   (crc32c in every block, verify_fatal); prints
#                   "VMRESULT rand_iops=N seq_iops=M verify=ok"
#   VM_MODE=verify  on every vdX: only the check of what such a run wrote
#                   (fio --verify_only, which replays the same offsets and
#                   seeds); prints "VMRESULT disks=N verify=ok"
# Any failure prints verify=fail and why=...; fio's own messages come
# before it, each line prefixed "VMFIO".

: "${VM_TIMEOUT:=180}"
: "${VM_MIB:=32}"
: "${VM_RUNTIME:=120}"

# The virtio modules the guest needs, in dependency order; any of them may
# be built into the kernel instead.
VM_MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"

# The newest /boot/vmlinuz-VERSION whose modules are installed.
vm_kernel() {
	local k v best=""
	for k in /boot/vmlinuz-*; do
		[ -e "$k" ] || continue
		v=${k#/boot/vmlinuz-}
		[ -d "/lib/modules/$v/kernel" ] || continue
		best=$(printf '%s\n%s\n' "$best" "$k" | sed '/^$/d' | sort -V | tail -n 1)
	done
	[ -n "$best" ] || return 1
	echo "$best"
}

vm_skip_reason() {
	if [ "$(id -u)" != 0 ]; then
		echo "needs root to make the guest's initramfs (device nodes)"
		return 1
	fi
	command -v qemu-system-x86_64 >/dev/null ||
		{ echo "qemu-system-x86_64 missing (qemu-system-x86)"; return 1; }
	command -v qemu-img >/dev/null || { echo "qemu-img missing (qemu-utils)"; return 1; }
	if ! ls /boot/vmlinuz-* >/dev/null 2>&1; then
		echo "no kernel in /boot (linux-image-amd64)"
		return 1
	fi
	vm_kernel >/dev/null ||
		{ echo "no /boot/vmlinuz-* with its modules in /lib/modules (linux-image-amd64)"; return 1; }
	# busybox-static's; busybox's own is linked dynamically.
	if [ ! -x /bin/busybox ] || ! /bin/busybox --list 2>/dev/null | grep -qx poweroff ||
		ldd /bin/busybox >/dev/null 2>&1; then
		echo "no static /bin/busybox (busybox-static)"
		return 1
	fi
	command -v fio >/dev/null || { echo "fio missing"; return 1; }
	local t
	for t in cpio gzip xz ldd; do
		command -v "$t" >/dev/null || { echo "$t missing"; return 1; }
	done
	return 0
}

# Copy a file into the tree ROOT at the same path, and what a symlink
# there points to.
_vm_copy() {
	local root=$1 f=$2
	mkdir -p "$root$(dirname "$f")"
	cp -L "$f" "$root$f"
}

# The guest's /init.  Modules are in /lib/modules/NAME.ko, the ones to load
# listed in /modules, in order.
_vm_init() {
	cat <<'EOF'
#!/bin/sh
PATH=/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mkdir -p /tmp
: "${VM_MODE:=write}" "${VM_MIB:=32}" "${VM_RUNTIME:=120}"

result() {
	echo
	echo "VMRESULT $*"
	sync
	poweroff -f
	sleep 60
}

while read -r m; do
	insmod "/lib/modules/$m.ko" || result verify=fail "why=insmod-$m"
done </modules
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -b /dev/vda ] || result verify=fail why=no-vda

# run DEV [verify_only]: one fio run, the random phase over
# [0, VM_MIB MiB) of DEV, then the sequential one over the next VM_MIB
# MiB; prints "RAND_IOPS SEQ_IOPS" when each phase wrote and read back
# all of its range without an error, else why=...  (The two jobs, in
# this order, each time: fio seeds a job's offsets and data by its place
# in the run, and --verify_only replays them.)
run() {
	dev=$1 only=${2:-0}
	cat >/tmp/job.fio <<JOB
[global]
filename=$dev
bs=4k
iodepth=16
ioengine=libaio
direct=1
size=${VM_MIB}M
runtime=$VM_RUNTIME
thread
verify=crc32c
do_verify=1
verify_fatal=1
verify_only=$only
[rand]
rw=randwrite
offset=0
[seq]
stonewall
rw=write
offset=${VM_MIB}M
JOB
	fio --output-format=terse --terse-version=3 /tmp/job.fio \
		>/tmp/fio.out 2>/tmp/fio.err
	rc=$?
	sed 's/^/VMFIO /' /tmp/fio.err >&2
	awk -F';' -v rc="$rc" -v kb=$((VM_MIB * 1024)) '
		NF >= 50 && ($3 == "rand" || $3 == "seq") {
			n[$3]++; err[$3] = $5; rkb[$3] = $6; wkb[$3] = $47; iops[$3] = $49
		}
		END {
			if (rc != 0) { print "why=fio-rc" rc; exit 1 }
			split("rand seq", names, " ")
			for (i = 1; i <= 2; i++) {
				j = names[i]
				if (n[j] != 1) { print "why=" j "-no-output"; exit 1 }
				if (err[j] != 0) { print "why=" j "-error" err[j]; exit 1 }
				# A runtime cut: what was written was not read back.
				if (wkb[j] != kb) { print "why=" j "-wrote-" wkb[j] "KiB-of-" kb; exit 1 }
				if (rkb[j] != kb) { print "why=" j "-verified-" rkb[j] "KiB-of-" kb; exit 1 }
			}
			print iops["rand"], iops["seq"]
		}' /tmp/fio.out
}

case $VM_MODE in
write)
	out=$(run /dev/vda) || result verify=fail "$out"
	result "rand_iops=${out% *} seq_iops=${out#* } verify=ok"
	;;
verify)
	n=0
	for d in /dev/vd[a-z]; do
		n=$((n + 1))
		out=$(run "$d" 1) || result verify=fail "$out" disk="$d"
	done
	result "disks=$n verify=ok"
	;;
esac
result verify=fail "why=mode-$VM_MODE"
EOF
}

vm_initramfs() {
	local out=$1 kernel ver root f m src lib
	kernel=$(vm_kernel) || return 1
	ver=${kernel#/boot/vmlinuz-}
	root=$(mktemp -d "${TMPDIR:-/tmp}/dioshim-initramfs.XXXXXX") || return 1
	(
		set -e
		mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}
		cp /bin/busybox "$root/bin/busybox"
		for f in $(/bin/busybox --list); do
			[ "$f" = busybox ] || ln -s busybox "$root/bin/$f"
		done
		mknod "$root/dev/console" c 5 1
		mknod "$root/dev/null" c 1 3
		# fio, its libraries and the dynamic loader at the paths ldd
		# names, fio itself in /bin (the loader looks for a library
		# in the directory a symlink of the host's is under, which
		# the guest has as a directory).
		cp -L "$(command -v fio)" "$root/bin/fio"
		for lib in $(ldd "$(command -v fio)" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'); do
			_vm_copy "$root" "$lib"
		done
		: >"$root/modules"
		for m in $VM_MODULES; do
			src=$(find "/lib/modules/$ver/kernel" -name "$m.ko" -o -name "$m.ko.xz" |
				head -n 1)
			# Not there: built into the kernel.
			[ -n "$src" ] || continue
			case $src in
			*.xz) xz -dc "$src" >"$root/lib/modules/$m.ko" ;;
			*) cp "$src" "$root/lib/modules/$m.ko" ;;
			esac
			echo "$m" >>"$root/modules"
		done
		_vm_init >"$root/init"
		chmod 0755 "$root/init"
		cd "$root"
		find . -print0 | cpio --null -o -H newc -R 0:0 --quiet | gzip -1 >"$out"
	)
	local rc=$?
	rm -rf "$root"
	return $rc
}

# vm_boot IMG... -- AIO LOG [LAUNCHER...]
vm_boot() {
	local imgs=() img aio log kernel drives=() params
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		imgs+=("$1")
		shift
	done
	shift
	aio=$1 log=$2
	shift 2
	kernel=$(vm_kernel) || return 1
	for img in "${imgs[@]}"; do
		drives+=(-drive "file=$img,format=qcow2,if=virtio,cache=none,aio=$aio")
	done
	params="console=ttyS0 quiet panic=-1 VM_MODE=${VM_MODE:-write} VM_MIB=$VM_MIB VM_RUNTIME=$VM_RUNTIME"
	timeout -k 10 "$VM_TIMEOUT" "$@" qemu-system-x86_64 -accel tcg -m 512 \
		-nographic -nic none -vga none -no-reboot -kernel "$kernel" \
		-initrd "${VM_INITRD:?}" \
		-append "$params" "${drives[@]}" </dev/null >"$log" 2>&1
}

vm_result() {
	local line
	# The console's escape sequences may come first on its line.
	line=$(tr -d '\r' <"$1" | grep -ao 'VMRESULT .*' | tail -n 1)
	[ -n "$line" ] || return 1
	echo "$line"
	[[ " $line " == *" verify=ok "* ]]
}

vm_field() {
	local kv
	for kv in $1; do
		[ "${kv%%=*}" != "$2" ] || { echo "${kv#*=}"; return 0; }
	done
	return 1
}
