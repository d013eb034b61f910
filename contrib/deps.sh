#!/bin/sh
# Install what building, testing and benchmarking dioshim need, when it is
# missing (Debian/Ubuntu).  Does nothing when everything is there.
set -e
need=""
have() { command -v "$1" >/dev/null 2>&1; }
hdr() { [ -e "/usr/include/$1" ]; }
have cc || need="$need gcc"
have make || need="$need make"
have fio || need="$need fio"
have bats || need="$need bats"
have sysbench || need="$need sysbench"
have mkfs.xfs || need="$need xfsprogs"
have mkfs.ext4 || need="$need e2fsprogs"
have xfs_io || need="$need xfsprogs"
have strace || need="$need strace"
have losetup || need="$need util-linux"
have unshare || need="$need util-linux"
have pgrep || need="$need procps"
have useradd || need="$need passwd"
have setfacl || need="$need acl"
have getfattr || need="$need attr"
hdr liburing.h || need="$need liburing-dev"
hdr libaio.h || need="$need libaio-dev"
# The real programs the acceptance suites and bench run (tests/bats/real-*).
have qemu-img || need="$need qemu-utils"
[ -x /usr/sbin/mariadbd ] || need="$need mariadb-server"
have mariadb || need="$need mariadb-client"
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 ||
	need="$need postgresql"
have db_bench || need="$need rocksdb-tools"
have gnuplot || need="$need gnuplot-nox" # bench/real.png
have setcap || need="$need libcap2-bin" # grow.bats: a file with a capability
have groff || need="$need groff-base" # tests/checks/man.sh
have mandoc || need="$need mandoc" # tests/checks/man.sh
# The Debian package (debian/, tests/bats/package.bats): built, linted.
have dpkg-buildpackage || need="$need dpkg-dev"
# dpkg-buildpackage asks for build-essential whatever debian/control says.
dpkg -s build-essential >/dev/null 2>&1 || need="$need build-essential"
have dh || need="$need debhelper"
have lintian || need="$need lintian"
# A real guest (tests/bats/vm.bats, tests/lib/vm.sh): QEMU, a kernel with
# its modules, a static busybox (busybox-static's; busybox's is dynamic)
# for its initramfs, which fio goes into too.
have qemu-system-x86_64 || need="$need qemu-system-x86"
ls /boot/vmlinuz-* >/dev/null 2>&1 || need="$need linux-image-amd64"
dpkg -s busybox-static >/dev/null 2>&1 || need="$need busybox-static"
have cpio || need="$need cpio"
have xz || need="$need xz-utils"
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "dioshim: missing:$need — run 'make deps' as root, or install them" >&2
	exit 1
fi
echo "dioshim: installing:$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq $need >/dev/null
