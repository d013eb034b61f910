#!/usr/bin/env bats
# fs: ext4
# The Debian package (debian/): dpkg-buildpackage builds it from a clean
# copy of the tree, never in the checkout; lintian finds no error; dpkg -i
# installs it, and the installed launcher runs fio with O_DIRECT on a
# scratch ext4 with the installed library; man finds both pages; dpkg -r
# and dpkg -P take every file of it away and leave no segment.  Once, on
# ext4: the package is the same on every filesystem.  Root, dpkg-dev,
# debhelper and lintian; a dioshim already installed on the machine is
# left alone (the suite skips).

load helper

setup_file() {
	export PKG_SKIP='' PKG_OURS=''
	fs_setup_file ext4 256M
	if ! PKG_SKIP=$(package_skip_reason); then
		export PKG_SKIP
		return 0
	fi
	# A segment directory of its own: what is left in it is this suite's.
	DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-package.XXXXXX)
	export DIOSHIM_SHM_DIR
	P=$BATS_FILE_TMPDIR
	VERSION=$(sed -n -E 's/^#define DIOSHIM_VERSION "([^"]+)"$/\1/p' \
		"$TOP/include/dioshim.h")
	MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
	DEB=$P/dioshim_${VERSION}_amd64.deb
	CHANGES=$P/dioshim_${VERSION}_amd64.changes
	export P VERSION MULTIARCH DEB CHANGES
	checkout_state >"$P/checkout.before"
	build_package >"$P/build.log" 2>&1
	echo "$?" >"$P/build.status"
	checkout_state >"$P/checkout.after"
	# Installed once for the tests below, by the suite alone (PKG_OURS:
	# teardown_file takes it away whatever happened).
	if [ -e "$DEB" ] && dpkg -i "$DEB" >"$P/install.log" 2>&1; then
		PKG_OURS=1
		dpkg -L dioshim >"$P/files"
	fi
	export PKG_OURS
}

teardown_file() {
	if [ -n "${PKG_OURS:-}" ] && dpkg -s dioshim >/dev/null 2>&1; then
		dpkg -P dioshim >/dev/null 2>&1 || true
	fi
	[ -z "${PKG_SKIP:-}" ] && rm -rf "${DIOSHIM_SHM_DIR:?}"
	fs_teardown_file
}

setup() {
	[ -z "${PKG_SKIP:-}" ] || skip "$PKG_SKIP"
	T=$BATS_TEST_TMPDIR
}

# Why the package cannot be built and installed here, or nothing.
package_skip_reason() {
	local t
	[ "$(id -u)" = 0 ] || { echo "needs root to install a package (dpkg -i)"; return 1; }
	for t in dpkg-buildpackage:dpkg-dev dh:debhelper lintian:lintian \
		dpkg-architecture:dpkg-dev; do
		command -v "${t%%:*}" >/dev/null ||
			{ echo "${t%%:*} missing (${t#*:})"; return 1; }
	done
	[ "$(dpkg --print-architecture)" = amd64 ] ||
		{ echo "the package is built for amd64 only (debian/control)"; return 1; }
	if dpkg -s dioshim >/dev/null 2>&1; then
		echo "dioshim is installed on this machine already: not replacing it"
		return 1
	fi
	(cd "$TOP" && dpkg-checkbuilddeps 2>&1) >/dev/null ||
		{ (cd "$TOP" && dpkg-checkbuilddeps 2>&1 | head -n 1); return 1; }
	return 0
}

# What the checkout holds besides what git ignores, and the packages
# beside it (where dpkg-buildpackage writes them): the build must change
# neither.
checkout_state() {
	if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$TOP" status --porcelain --untracked-files=all
	fi
	local f
	for f in "$TOP"/../dioshim*.{deb,ddeb,changes,buildinfo}; do
		[ ! -e "$f" ] || echo "$f"
	done
}

# The tree as it is now (committed or not; what git ignores, build/ among
# it, left out) copied to $P/dioshim-VERSION, and built there: the .deb
# and .changes land in $P.  make test exports BUILD; the package must not
# see it (debian/rules unexports it too).
build_package() {
	local src=$P/dioshim-$VERSION
	mkdir -p "$src"
	if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$TOP" && git ls-files -z -co --exclude-standard |
			while IFS= read -r -d '' f; do
				[ -e "$f" ] && printf '%s\0' "$f"
			done | tar -c --null -T - -f -) | tar -x -C "$src"
	else
		tar -c -C "$TOP" --exclude=./build --exclude=./.git -f - . |
			tar -x -C "$src"
	fi || return 1
	(cd "$src" && env -u BUILD -u DEBUG_BUILD timeout 600 \
		dpkg-buildpackage -us -uc -b -j2)
}

@test "dpkg-buildpackage -us -uc -b from a clean copy builds dioshim_VERSION_amd64.deb; debian/changelog, DIOSHIM_VERSION and the .deb agree; the checkout is untouched" {
	tail -n 30 "$P/build.log"
	[ "$(cat "$P/build.status")" -eq 0 ]
	[ -e "$DEB" ]
	[ "$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)" = "$VERSION" ]
	[ "$(dpkg-deb -f "$DEB" Version)" = "$VERSION" ]
	[ "$(dpkg-deb -f "$DEB" Package)" = dioshim ]
	diff "$P/checkout.before" "$P/checkout.after"
}

@test "lintian on the .deb and the .changes: no error" {
	[ -e "$CHANGES" ] || skip "no package was built"
	# Exit 0: no run-time error (1), no error tag (2, --fail-on error).
	run timeout 300 lintian --fail-on error "$DEB" "$CHANGES"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"E: dioshim"* ]]
}

@test "the package holds the launcher in /usr/bin, the library in /usr/lib/MULTIARCH/dioshim, dioshim(1), dioshim(7), README.md and RESULTS.md, and no header" {
	[ -e "$DEB" ] || skip "no package was built"
	run dpkg-deb -c "$DEB"
	echo "$output"
	local want
	for want in ./usr/bin/dioshim \
		"./usr/lib/$MULTIARCH/dioshim/libdioshim.so" \
		./usr/share/man/man1/dioshim.1.gz \
		./usr/share/man/man7/dioshim.7.gz \
		./usr/share/doc/dioshim/README.md.gz \
		./usr/share/doc/dioshim/RESULTS.md.gz \
		./usr/share/doc/dioshim/copyright; do
		grep -q " $want\$" <<<"$output" || { echo "missing $want"; false; }
	done
	[[ "$output" != *" ./usr/include"* ]]
}

@test "dpkg -i installs it; /usr/bin/dioshim --version prints the package's version" {
	[ -n "$PKG_OURS" ] || { cat "$P/install.log"; false; }
	dpkg -s dioshim | grep -qx "Status: install ok installed"
	run /usr/bin/dioshim --version
	[ "$status" -eq 0 ]
	[ "$output" = "dioshim $VERSION" ]
}

@test "a process under /usr/bin/dioshim has the installed /usr/lib/MULTIARCH/dioshim/libdioshim.so mapped, and no other" {
	[ -n "$PKG_OURS" ] || skip "not installed"
	run timeout 60 /usr/bin/dioshim -- cat /proc/self/maps
	[ "$status" -eq 0 ]
	run awk '/libdioshim/ { print $NF }' <<<"$output"
	echo "$output"
	[ "$(sort -u <<<"$output")" = "/usr/lib/$MULTIARCH/dioshim/libdioshim.so" ]
}

@test "fio, 4 jobs writing regions of a new file on ext4 with --direct=1 --verify=crc32c under /usr/bin/dioshim: fio has the installed library, verify passes, exact size, no segment left" {
	[ -n "$PKG_OURS" ] || skip "not installed"
	fs_require
	command -v fio >/dev/null || skip "fio is not installed"
	local f=$SCRATCH_MNT/package.fio
	# fio writes its state files and the prerun's output (the maps of
	# the job process, $PPID of its shell) into its working directory.
	cd "$T"
	# shellcheck disable=SC2016 # $PPID is the prerun shell's
	run timeout 300 /usr/bin/dioshim -- fio --name=pkg --filename="$f" \
		--direct=1 --ioengine=psync --rw=write --fallocate=none --bs=4k \
		--size=3100k --numjobs=4 --offset_increment=3100k \
		--verify=crc32c --verify_state_save=0 --group_reporting \
		--exec_prerun='grep -o "/[^ ]*libdioshim[^ ]*" /proc/$PPID/maps'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"err= 0"* ]]
	[[ "$output" != *"verify: bad"* ]]
	[ "$(real_size "$f")" -eq $((4 * 3100 * 1024)) ]
	assert_no_segment "$f"
	cat pkg.prerun.txt
	[ "$(sort -u pkg.prerun.txt)" = "/usr/lib/$MULTIARCH/dioshim/libdioshim.so" ]
	rm -f "$f"
}

@test "man finds dioshim(1) and dioshim(7) where the package put them; their LD_PRELOAD examples name the installed library" {
	[ -n "$PKG_OURS" ] || skip "not installed"
	local lib=/usr/lib/$MULTIARCH/dioshim/libdioshim.so
	zcat /usr/share/man/man1/dioshim.1.gz | grep -qx "Environment=LD_PRELOAD=$lib"
	zcat /usr/share/man/man7/dioshim.7.gz | sed -n '/^\.SH SYNOPSIS/,/^\.SH DESC/p' | grep -q "$lib"
	[ -z "$(zcat /usr/share/man/man1/dioshim.1.gz | grep "^Environment=LD_PRELOAD=/usr/local")" ]
	if ! command -v man >/dev/null; then
		[ -e /usr/share/man/man1/dioshim.1.gz ]
		[ -e /usr/share/man/man7/dioshim.7.gz ]
		skip "man is not installed: the files are there"
	fi
	# -a: a make install under /usr/local may come first in the path.
	run man -aw 1 dioshim
	echo "$output"
	grep -qx /usr/share/man/man1/dioshim.1.gz <<<"$output"
	run man -aw 7 dioshim
	echo "$output"
	grep -qx /usr/share/man/man7/dioshim.7.gz <<<"$output"
}

@test "dpkg -r, then dpkg -P: every file of the package gone, its directories too, no segment or other file of dioshim's left but the per-user hints" {
	[ -n "$PKG_OURS" ] || skip "not installed"
	local path left= held
	# A process under the shim when the package goes: named, so that it
	# is restarted (its later children would write without the shim).
	/usr/bin/dioshim -- sleep 60 &
	held=$!
	await_mapped() {
		local i
		for i in $(seq 100); do
			grep -q libdioshim "/proc/$held/maps" 2>/dev/null && return 0
			sleep 0.1
		done
		return 1
	}
	await_mapped
	run dpkg -r dioshim
	kill "$held"
	wait "$held" || true
	echo "$output"
	[ "$status" -eq 0 ]
	grep -Eq "processes still run under the shim:( [0-9]+)* $held( |\$)" <<<"$output"
	run dpkg -P dioshim
	echo "$output"
	[ "$status" -eq 0 ]
	run dpkg -s dioshim
	[ "$status" -ne 0 ]
	# Shared directories (/usr/bin, /usr/share/man/man1, ...) stay; the
	# package's own files and directories go.
	while IFS= read -r path; do
		case $path in
		*dioshim*) [ ! -e "$path" ] || left="$left $path" ;;
		*) [ -d "$path" ] || [ ! -e "$path" ] || left="$left $path" ;;
		esac
	done <"$P/files"
	[ -z "$left" ] || { echo "left:$left"; false; }
	# The segment directory keeps the hints (each user's and group's
	# count of segments, dioshim(1) FILES), never a segment.
	run find "$DIOSHIM_SHM_DIR" -mindepth 1 ! -type d ! -name 'dioshim-hint*'
	echo "$output"
	[ -z "$output" ]
}
