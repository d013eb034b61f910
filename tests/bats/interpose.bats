#!/usr/bin/env bats
# fs: ext4 xfs
# Interposition (INTERPOSE.md, DESIGN.md 6): every wrapped name, every error
# path and every piece of process life gives the application exactly what
# the kernel alone gives.  The technique: a probe runs a scripted sequence
# of calls once outside the shim (the reference, in $W/NAME.ref) and once
# under it ($W/NAME.shim), printing each call's return value, errno and
# results; the two outputs must be identical, and so must the files left.
# Lines a probe starts with '#' say what the kernel holds (raw syscalls:
# the size under a reservation, whether a segment exists): they are not
# diffed, but checked, so that every comparison runs with a reservation in
# place (the kernel's size ahead of the logical EOF).

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 512M; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	W=$SCRATCH_MNT/t$BATS_TEST_NUMBER
	mkdir -p "$W"
	TMPD=
}
teardown() {
	if [ -n "$TMPD" ]; then rm -rf "$TMPD"; fi
	return 0
}

PDO=$HELPERS/p_do

# pdo_both NAME [ENV=VALUE...] < SCRIPT: run the p_do script with ARG1 =
# $W/NAME.ref outside the shim, then with ARG1 = $W/NAME.shim under it
# (with the environment given: env arguments).  Sets REF and SHM (the
# directories); outputs in $REF.out and $SHM.out.  Each run is killed
# after PDO_TIMEOUT seconds (120).
pdo_both() {
	local name=$1
	shift
	REF=$W/$name.ref SHM=$W/$name.shim
	mkdir -p "$REF" "$SHM"
	cat >"$W/$name.script"
	noshim timeout "${PDO_TIMEOUT:-120}" "$PDO" "$REF" <"$W/$name.script" \
		>"$REF.out" 2>&1 ||
		{ cat "$REF.out"; echo "reference run failed" >&2; return 1; }
	env "$@" timeout "${PDO_TIMEOUT:-120}" "$DIOSHIM" "$PDO" "$SHM" \
		<"$W/$name.script" \
		>"$SHM.out" 2>&1 ||
		{ cat "$SHM.out"; echo "run under the shim failed" >&2; return 1; }
}

# prog_both NAME PROG [ARGS...]: PROG ARGS FILE outside the shim with FILE
# = $W/NAME.ref/f, then under it with $W/NAME.shim/f.  Statuses in
# REF_RC and SHM_RC.
prog_both() {
	local name=$1
	shift
	REF=$W/$name.ref SHM=$W/$name.shim
	mkdir -p "$REF" "$SHM"
	REF_RC=0 SHM_RC=0
	noshim timeout 120 "$@" "$REF/f" </dev/null >"$REF.out" 2>&1 || REF_RC=$?
	timeout 120 "$DIOSHIM" "$@" "$SHM/f" </dev/null >"$SHM.out" 2>&1 ||
		SHM_RC=$?
}

# The two outputs, '#' lines left out, are identical.
same_output() {
	diff -u <(grep -v '^#' "$REF.out") <(grep -v '^#' "$SHM.out")
}

# Every file the reference left is there, byte for byte, under the shim;
# and no segment is left for any of them.
same_files() {
	local f n=0
	for f in "$REF"/*; do
		[ -f "$f" ] || continue
		noshim cmp "$f" "$SHM/${f##*/}" || return 1
		assert_no_segment "$SHM/${f##*/}" || return 1
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || { echo "no file to compare" >&2; return 1; }
}

# The comparison ran with a reservation: at some '#ksize' point, the
# kernel's size under the shim was ahead of the kernel's size without it.
reserved() {
	paste <(grep '^#ksize' "$REF.out") <(grep '^#ksize' "$SHM.out") |
		awk '$4 > $2 { found = 1 } END { exit !found }' || {
		echo "no reservation was ever in place" >&2
		return 1
	}
}

# The '#seg 0|1' answers of a p_do output, in order, as one word.
segs() { grep '^#seg' "$1" | awk '{ printf "%s", $2 } END { print "" }'; }

# The generation the hint counts segment creations with (0: no hint).
hint_gen() {
	local h
	h=$DIOSHIM_SHM_DIR/dioshim-hint8.$(id -u)
	if [ -f "$h" ]; then
		od -An -t u8 -j 72 -N 8 "$h" | tr -d ' '
	else
		echo 0
	fi
}

seg_files() { find "$DIOSHIM_SHM_DIR" -maxdepth 1 -name 'dioshim.*' | sort; }

# ---- 1. every wrapper name ------------------------------------------------

@test "every wrapped name is reached: plain, _FILE_OFFSET_BITS=64 and _FORTIFY_SOURCE builds agree with the kernel" {
	local b src=$TOP/tests/helpers/p_wrappers.c
	local cf="-std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE"
	b=$BATS_FILE_TMPDIR
	# Three more builds of the probe, side by side.
	local p1 p2 p3
	# shellcheck disable=SC2086
	cc $cf -D_FILE_OFFSET_BITS=64 -o "$b/p_wrappers_lfs" "$src" & p1=$!
	# shellcheck disable=SC2086
	cc $cf -O1 -D_FORTIFY_SOURCE=2 -o "$b/p_wrappers_fort" "$src" & p2=$!
	# shellcheck disable=SC2086
	cc $cf -O1 -D_FORTIFY_SOURCE=2 -D_FILE_OFFSET_BITS=64 \
		-o "$b/p_wrappers_fort_lfs" "$src" & p3=$!
	wait "$p1"
	wait "$p2"
	wait "$p3"
	# The builds really call the names they are here to reach.
	local plain lfs fort fortlfs s
	plain=$(nm -D --undefined-only "$HELPERS/p_wrappers")
	lfs=$(nm -D --undefined-only "$b/p_wrappers_lfs")
	fort=$(nm -D --undefined-only "$b/p_wrappers_fort")
	fortlfs=$(nm -D --undefined-only "$b/p_wrappers_fort_lfs")
	for s in open open64 openat openat64 creat creat64 pread pread64 \
		preadv preadv64 preadv2 preadv64v2 pwrite pwrite64 pwritev \
		pwritev64 pwritev2 pwritev64v2 read readv write writev lseek \
		lseek64 fstat fstat64 stat stat64 lstat lstat64 fstatat \
		fstatat64 statx ftruncate ftruncate64 truncate truncate64 \
		fallocate fallocate64 posix_fallocate posix_fallocate64 fsync \
		fdatasync sync_file_range close __xstat@GLIBC_2.2.5 \
		__xstat64@GLIBC_2.2.5 __lxstat@GLIBC_2.2.5 \
		__lxstat64@GLIBC_2.2.5 __fxstat@GLIBC_2.2.5 \
		__fxstat64@GLIBC_2.2.5 __fxstatat@GLIBC_2.4 \
		__fxstatat64@GLIBC_2.4; do
		grep -qw -- "$s" <<<"$plain" || { echo "plain build lacks $s"; false; }
	done
	for s in open64 openat64 creat64 pread64 preadv64 preadv64v2 \
		pwrite64 pwritev64 pwritev64v2 lseek64 fstat64 stat64 lstat64 \
		fstatat64 ftruncate64 truncate64 fallocate64 posix_fallocate64; do
		grep -qw -- "$s" <<<"$lfs" || { echo "LFS build lacks $s"; false; }
	done
	for s in open fstat pread pwrite lseek ftruncate fallocate; do
		! grep -qw -- "$s" <<<"$lfs" || { echo "LFS build calls $s"; false; }
	done
	for s in __open_2 __open64_2 __openat_2 __openat64_2 __read_chk \
		__pread_chk __pread64_chk; do
		grep -qw -- "$s" <<<"$fort" || { echo "fortified build lacks $s"; false; }
	done
	for s in __open64_2 __openat64_2 __pread64_chk __read_chk; do
		grep -qw -- "$s" <<<"$fortlfs" || { echo "fortified LFS build lacks $s"; false; }
	done

	local p
	for p in "$HELPERS/p_wrappers" "$b/p_wrappers_lfs" "$b/p_wrappers_fort" \
		"$b/p_wrappers_fort_lfs"; do
		echo "# $p" >&2
		prog_both "$(basename "$p")" "$p"
		[ "$REF_RC" -eq 0 ] && [ "$SHM_RC" -eq 0 ]
		same_output
		reserved
		same_files
	done
}

@test "the old __xstat family: every version glibc accepts reports the logical size" {
	pdo_both xver <<'EOF'
fresh ver
fxstat 1 @a
xstat 1 %1/ver
lxstat 1 %1/ver
fxstatat 1 AT_FDCWD %1/ver 0
fxstatat 1 @a '' AT_EMPTY_PATH
fxstat 2 @a
xstat 3 %1/ver
fxstatat 3 @a '' AT_EMPTY_PATH
fxstat 0 @a
xstat 0 %1/ver
lxstat 0 %1/ver
fxstatat 0 AT_FDCWD %1/ver 0
fxstatat 0 @a '' AT_EMPTY_PATH
EOF
	reserved
	same_output
}

# ---- 2. errors ---------------------------------------------------------------

@test "bad descriptors, access modes and arguments get the kernel's errno; successful calls leave errno alone" {
	pdo_both errno <<'EOF'
fresh badfd
open c %1/badfd WRONLY|DIRECT
close @c
write @c 4k
pwrite @c 4k 16k
pwritev2 @c 4k 16k 0
pwritev2 @c 4k -1 APPEND
read @c 4k
pread @c 4k 16k
pread @c 4k 0
preadv2 @c 4k -1 0
lseek @c 0 END
lseek @c 16k DATA
lseek @c 0 SET
fstat @c
fstatat @c '' AT_EMPTY_PATH
statx @c '' AT_EMPTY_PATH BASIC
fxstat 1 @c
ftruncate @c 0
fallocate @c 0 16k 4k
posix_fallocate @c 16k 4k
fsync @c
fdatasync @c
sync_file_range @c 0 0 SFR_WRITE
close @c
getfl @c
setfl @c APPEND
dup d @c
dup2 @c 50
dup3 @c 50 0
dupfd d @c 10
write -1 4k
pread -1 4k 0
lseek -1 0 END
fstat -1
ftruncate -1 0
posix_fallocate -1 0 4k
close -1
dup2 @a -1
write 1048600 4k
pread 1048600 4k 0
fstat 1048600
lseek 1048600 0 END
ftruncate 1048600 0
fallocate 1048600 0 0 4k
dup2 @a 1048600
write 100000 4k
pread 100000 4k 0
fstat 100000
close 100000
fstat @a
fresh accmode
write @r 4k
pwrite @r 4k 16k
pwritev2 @r 4k 16k APPEND
writev @r 4k
read @w 4k
pread @w 4k 0
pread @w 4k 16k
pread @a 4k 0
readv @w 4k
preadv2 @w 4k 16k 0
ftruncate @r 0
ftruncate @r 20k
fallocate @r 0 16k 4k
posix_fallocate @r 16k 4k
fallocate @r 0 0 4k
fstat @a
fresh negoff
pwrite @w 4k -4k
pwrite @a 4k -1
pread @rw 4k -4k
pwritev @w 4k -4k
preadv @rw 4k -1
pwritev2 @w 4k -2 0
preadv2 @rw 4k -2 0
pwritev2 @a 4k -4k APPEND
fstat @a
fresh iov
pwritev @w - 16k
pwritev @w cnt:-1 16k
pwritev @w cnt:1025 16k
pwritev @w null:1 16k
pwritev @w null:0 16k
writev @a -
writev @a cnt:-1
writev @a cnt:1025
writev @a null:2
pwritev2 @a cnt:1025 -1 0
preadv @rw - 0
preadv @rw cnt:-1 0
preadv @rw cnt:1025 0
preadv @rw null:1 0
readv @rw null:1
readv @rw cnt:1025
pwritev @w 0,0 16k
fstat @a
fresh rwf
pwritev2 @w 4k 16k 0x80000000
pwritev2 @a 4k -1 0x200
pwritev2 @a 4k -1 0x10000
preadv2 @rw 4k 0 0x200
preadv2 @rw 4k 0 0x80000000
fstat @a
fresh misread
read @rw 4k m
pread @rw 4k 1
pread @rw 100 0
pread @rw 4k 12k m
pread @rw 100 12k
pread @rw 8k 12k m
preadv @rw m:4k 0
fstat @a
fresh misappend
write @a 4k m
write @a 100
writev @a m:4k
writev @a 4k,100
pwritev2 @a 100 -1 0
pwritev2 @w 100 -1 APPEND
fstat @a
write @a 4k
fstat @a
lseek @rw 0 END
fresh lseek
lseek @rw 0 7
lseek @rw 0 -1
lseek @rw -1 SET
lseek @rw -20k END
lseek @rw -16k END
lseek @rw -4k END
lseek @rw 0 END
lseek @rw 4k END
lseek @rw 0x7fffffffffff0000 END
lseek @rw 0x7ffffffffffff000 END
lseek @rw 12k DATA
lseek @rw 16k DATA
lseek @rw 20k DATA
lseek @rw 1m DATA
lseek @rw 12k HOLE
lseek @rw 16k HOLE
lseek @rw 20k HOLE
lseek @rw 1m HOLE
lseek @rw -1 DATA
lseek @rw -1 HOLE
lseek @rw 0 DATA
lseek @rw 0 HOLE
lseek @rw 4k HOLE
pos @rw
lseek @rw 100 SET
lseek @rw 32k DATA
pos @rw
lseek @rw 32k HOLE
pos @rw
lseek @r -4k END
lseek @a 0 END
fresh args
ftruncate @w -1
ftruncate @w -4k
ftruncate @w 0x7fffffffffffffff
ftruncate @w 16k
fallocate @w 0 16k 0
fallocate @w 0 16k -4k
fallocate @w 0 -4k 4k
fallocate @w 0x100 16k 4k
fallocate @w 0x100 40k 4k
fallocate @w PUNCH_HOLE 16k 4k
fallocate @w PUNCH_HOLE 8k 4k
fallocate @w COLLAPSE_RANGE 16k 4k
fallocate @w 0 0x7ffffffffffff000 0x2000
fallocate @w 0 0x7ffffffffffff000 0x7ffffffffffff000
posix_fallocate @w 16k 0
posix_fallocate @w 16k -4k
posix_fallocate @w -4k 4k
posix_fallocate @w 0x7ffffffffffff000 0x2000
posix_fallocate @w 0x7ffffffffffff000 0x7ffffffffffff000
fstat @a
truncate %1/nonexistent 0
truncate %1 0
truncate %1/args -1
truncate %1/args 0x7fffffffffffffff
truncate %1/args 16k
fstat @a
fresh zero
write @a 0
pwrite @w 0 1m
pwrite @w 0 16k m
pwrite @w 0 16385
read @rw 0
pread @rw 0 100k n
writev @a 0
pwritev2 @w 0 1m 0
fstat @a
lseek @rw 0 END
read @rw 4k n
read @rw 4k m
read @rw 4k f
pread @rw 4k 16k n
pread @rw 4k 20k n
pread @rw 4k 1m n
pread @rw 4k 16k f
pread @rw 4k 16k m
pread @rw 100 16k
pread @rw 4k 12k n
pread @rw 4k 12k f
pread @rw 4k 0 r
write @a 4k f
write @a 4k n
fstat @a
write @a 4k
fstat @a
fresh ok
fsync @a
fdatasync @w
sync_file_range @w 0 0 SFR_WRITE
fstat @w
stat %1/ok
lstat %1/ok
statx AT_FDCWD %1/ok 0 BASIC
lseek @w 0 SET
lseek @w 0 END
lseek @w 4k DATA
pwrite @w 4k 16k
pwrite @w 4k 8k
write @a 4k
read @r 4k
pread @r 4k 0
readv @r 4k,4k
preadv2 @rw 4k 4k 0
preadv2 @rw 4k -1 0
ftruncate @w 40k
ftruncate @w 8k
fallocate @w 0 8k 8k
fallocate @w KEEP_SIZE 0 1m
posix_fallocate @w 0 24k
getfl @a
setfl @a APPEND|DIRECT
dup d @a
close @d
close @w
close @r
close @rw
close @a
stat %1/ok
EOF
	reserved
	same_output
	same_files
	# The sentinel survived the successful calls ("errno=-").
	grep -q '^fsync @a: ret=0 errno=-$' "$SHM.out"
	grep -q '^posix_fallocate @c 16k 4k: ret=EBADF errno=-$' "$SHM.out"
}

@test "a write the kernel refuses does not move the O_APPEND offset (EFAULT, misaligned O_DIRECT, RWF_APPEND|RWF_NOAPPEND)" {
	pdo_both refused <<'EOF'
fresh efault
pwrite @w 4k 16k f
write @a 4k
fstat @a
fresh short
pwrite @w 100 16k
write @a 4k
fstat @a
fresh bothflags
pwritev2 @w 4k 300k APPEND|NOAPPEND
write @a 4k
fstat @a
EOF
	reserved
	same_output
	same_files
}

@test "pwritev2 with an RWF flag this kernel knows and the shim does not (0x100, RWF_NOSIGNAL) is counted" {
	# The kernel accepts the flag: it must be, or its answer must match.
	pdo_both rwf <<'EOF'
fresh nosignal
pwritev2 @w 4k 16k 0x100
fstat @a
write @a 4k
fstat @a
pwritev2 @a 4k -1 0x100
fstat @a
pwritev2 @a 4k 0 APPEND|0x100
fstat @a
lseek @rw 0 END
EOF
	reserved
	same_output
	same_files
}

@test "RWF_NOWAIT writes that would extend the file get the kernel's EAGAIN" {
	pdo_both nowait <<'EOF'
fresh nw
pwritev2 @a 4k -1 NOWAIT
pwritev2 @w 4k 20k NOWAIT
fstat @a
pwritev2 @a 4k -1 APPEND|NOWAIT
fstat @a
EOF
	reserved
	same_output
	same_files
}

@test "truncate() of a FIFO while a segment is live: EINVAL, as without the shim (no open that blocks)" {
	PDO_TIMEOUT=5 pdo_both fifo <<'EOF'
fresh f
mkfifo %1/fifo
truncate %1/fifo 0
truncate %1/fifo 4k
EOF
	reserved
	same_output
}

@test "statx, fstatat and __fxstatat with a NULL path and AT_EMPTY_PATH (Linux >= 6.11) see the logical size" {
	pdo_both nullpath <<'EOF'
fresh nl
statx @a NULL AT_EMPTY_PATH BASIC
fstatat @a NULL AT_EMPTY_PATH
fxstatat 1 @a NULL AT_EMPTY_PATH
statx @a NULL 0 BASIC
EOF
	reserved
	same_output
}

# ---- 3. varargs, fcntl, dup ----------------------------------------------

@test "open modes under umask, O_TMPFILE, F_GETFL/F_SETFL with O_APPEND, dup/dup2/dup3/F_DUPFD" {
	pdo_both fcntl <<'EOF'
umask 027
open m %1/mode WRONLY|CREAT|EXCL|DIRECT 0666
fstat @m
stat %1/mode
open m2 %1/mode2 WRONLY|CREAT|DIRECT|APPEND 0751
fstat @m2
rep 3 write @m2 4k
fstat @m2
open m3 %1/mode WRONLY|CREAT|EXCL|DIRECT 0666
umask 022
openat m4 AT_FDCWD %1/mode4 RDWR|CREAT|DIRECT 0640
fstat @m4
creat m5 %1/mode5 0777
fstat @m5
open t %1 WRONLY|TMPFILE|DIRECT 0604
fstat @t
rep 3 write @t 4k
fstat @t
fstatat @t '' AT_EMPTY_PATH
linkat @t %1/tmpfile
stat %1/tmpfile
write @t 4k
stat %1/tmpfile
fstat @t
open t2 %1 RDWR|TMPFILE|DIRECT|APPEND 0600
rep 2 write @t2 4k
pread @t2 8k 0
fstat @t2
fresh flags
getfl @a
getfl @w
getfl @r
getfl @rw
write @a 4k
pos @a
getfl @a
setfl @a DIRECT
getfl @a
pos @a
write @a 4k
pos @a
fstat @a
lseek @a 4k SET
write @a 4k
pos @a
fstat @a
setfl @a APPEND|DIRECT
getfl @a
write @a 4k
pos @a
fstat @a
setfl @w APPEND|DIRECT
getfl @w
pos @w
write @w 4k
pos @w
fstat @w
setfl @w DIRECT
write @w 4k
pos @w
fstat @w
setfl @w APPEND
getfl @w
write @w 4k
pos @w
fstat @w
setfl @w APPEND|DIRECT
write @w 4k
pos @w
fstat @w
setfl @w APPEND|DIRECT|NONBLOCK|NOATIME
getfl @w
write @w 4k
fstat @w
fresh dups
dupfd d1 @a 0
dupfd_cloexec d2 @a 20
getfd @d2
getfl @d2
dup d3 @a
dup2 @a 30
dup3 @a 31 CLOEXEC
getfd 31
write @d1 4k
write @d2 4k
write @d3 4k
write 30 4k
write 31 4k
fstat @d1
fstat 31
pos @a
pos 30
close @a
write @d1 4k
fstat @d1
close @d1
close @d2
close @d3
close 30
write 31 4k
fstat 31
lseek 31 0 END
open o %1/other WRONLY|CREAT|TRUNC|DIRECT|APPEND 644
rep 2 write @o 4k
dup2 @o 31
fstat 31
write 31 4k
fstat @o
stat %1/dups
stat %1/other
dup2 @w 31
fstat 31
pwrite 31 4k 32k
fstat @w
dup2 31 31
dup2 @o @w
fstat @w
write @w 4k
fstat @o
stat %1/dups
lseek @rw 0 END
dup2 @rw @rw
pwrite @rw 4k 40k
fstat @rw
close 31
close @o
close @w
close @rw
close @r
stat %1/dups
stat %1/other
fresh dd
open c %1/x WRONLY|CREAT 644
close @c
dup2 @w 31
dup2 @c 31
write 31 4k
fstat 31
dup3 @a 31 0x1
fstat 31
pwrite 31 4k 20k
fstat 31
dup3 @a @a 0
dup3 @a @a CLOEXEC
write @a 4k
fstat @a
dup2 @a 0x7fffffff
dupfd x @a -1
dupfd x @a 0x7fffffff
write @a 4k
fstat 31
close 31
stat %1/dd
EOF
	reserved
	same_output
	same_files
	# F_GETFL of the O_APPEND|O_DIRECT fd says both.
	grep -q '^getfl @a: ret=ok errno=- flags=WRONLY|APPEND|DIRECT' "$SHM.out"
	# The modes asked for, under the umask.
	[ "$(noshim stat -c %a "$SHM/mode")" = 640 ]
	[ "$(noshim stat -c %a "$SHM/mode2")" = 750 ]
	[ "$(noshim stat -c %a "$SHM/tmpfile")" = 604 ]
}

@test "an O_TMPFILE descriptor, once its file is linked and written through another fd, sees the logical size" {
	pdo_both tmpfile <<'EOF'
open t %1 RDWR|TMPFILE|DIRECT 0604
rep 3 write @t 4k
linkat @t %1/tmpfile
open x %1/tmpfile WRONLY|DIRECT|APPEND
write @x 4k
ksize @x
fstat @x
fstat @t
lseek @t 0 END
write @t 4k
fstat @x
pread @t 4k 16k
EOF
	reserved
	same_output
	same_files
}

@test "an O_PATH descriptor of a served file: fstat, fstatat and statx with AT_EMPTY_PATH see the logical size" {
	pdo_both opath <<'EOF'
open p0 %1/f WRONLY|CREAT 644
close @p0
open p %1/f PATH
open a %1/f WRONLY|TRUNC|DIRECT|APPEND
rep 4 write @a 4k
ksize @a
open p2 %1/f PATH
fstat @p
fstat @p2
fstatat @p2 '' AT_EMPTY_PATH
statx @p2 '' AT_EMPTY_PATH BASIC
fxstat 1 @p2
open d %1 DIRECTORY|RDONLY
fstatat @d f 0
statx @d f 0 SIZE
fxstatat 1 @d f 0
EOF
	reserved
	same_output
}

# ---- 4. O_APPEND ------------------------------------------------------------

@test "O_APPEND: write leaves the position at its end, pwrite appends, RWF_APPEND appends, RWF_NOAPPEND writes at the offset" {
	pdo_both append <<'EOF'
fresh ap
pos @a
write @a 4k
pos @a
writev @a 4k,4k
pos @a
lseek @a 0 SET
write @a 4k
pos @a
lseek @a 1m SET
write @a 4k
pos @a
pwrite @a 4k 0
pos @a
fstat @a
pwrite @a 4k 4k
pwrite @a 4k 1m
pwrite @a 4k 100m
pos @a
fstat @a
pwritev @a 4k,4k 0
pos @a
fstat @a
pwritev2 @a 4k 0 0
pos @a
pwritev2 @a 4k -1 0
pos @a
fstat @a
pwritev2 @w 4k 0 APPEND
pos @w
fstat @w
pwritev2 @w 4k -1 APPEND
pos @w
fstat @w
lseek @w 8k SET
pwritev2 @w 4k -1 APPEND
pos @w
pwritev2 @w 4k 8k APPEND|DSYNC
pos @w
fstat @w
pwritev2 @a 4k 4k NOAPPEND
pos @a
fstat @a
pwritev2 @a 4k 200k NOAPPEND
pos @a
fstat @a
lseek @a 12k SET
pwritev2 @a 4k -1 NOAPPEND
pos @a
fstat @a
pwritev2 @w 4k 16k NOAPPEND
fstat @a
write @a 4k
pos @a
fstat @a
lseek @a 0 END
pos @a
pread @rw 8k 196k
pread @rw 8k 300k
readall @r
close @a
close @w
close @r
close @rw
stat %1/ap
EOF
	reserved
	same_output
	same_files
}

# ---- 5. fork, exec, the launcher ----------------------------------------

@test "fork, exec, posix_spawn, vfork: children write through inherited fds, sizes exact everywhere" {
	prog_both fork "$HELPERS/p_fork"
	[ "$REF_RC" -eq 0 ] && [ "$SHM_RC" -eq 0 ]
	same_output
	reserved
	same_files
	# The exec'd children ran under the shim, the library first.
	[ "$(grep -c '^#LD_PRELOAD=' "$SHM.out")" -eq 3 ]
	# (bats ignores a failing '! cmd': count the lines that do not match)
	[ "$(grep '^#LD_PRELOAD=' "$SHM.out" |
		grep -cv '^#LD_PRELOAD=[^:]*/libdioshim.so$')" -eq 0 ]
	# Their writes were counted where they were made: the sizes they
	# print are the exact ones (same_output), under a reservation.
	grep -A1 '^exec-child(2): fstat=' "$SHM.out" |
		awk -F'[= ]' '/^exec/ { n = $3 } /^#ksize/ { k = $2 }
			END { exit !(k > n && n > 0) }'
}

@test "launcher: --help, --version, exit statuses, a missing command, LD_PRELOAD prepended" {
	run "$DIOSHIM" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"usage: dioshim"* ]]
	run "$DIOSHIM" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "dioshim "* ]]
	run "$DIOSHIM"
	[ "$status" -eq 2 ]
	run "$DIOSHIM" -- true
	[ "$status" -eq 0 ]
	run "$DIOSHIM" true
	[ "$status" -eq 0 ]
	run "$DIOSHIM" -- sh -c 'exit 42'
	[ "$status" -eq 42 ]
	run -127 "$DIOSHIM" -- /nonexistent/dioshim-no-such-command
	[[ "$output" == *"No such file"* ]]
	run -127 "$DIOSHIM" dioshim-no-such-command-$$
	# Prepended, never replacing what was there.
	run env LD_PRELOAD=libm.so.6 "$DIOSHIM" -- printenv LD_PRELOAD
	[ "$status" -eq 0 ]
	[[ "$output" == */libdioshim.so:libm.so.6 ]]
	run noshim "$DIOSHIM" -- printenv LD_PRELOAD
	[[ "$output" == */libdioshim.so ]]
	# Both really loaded.
	run env LD_PRELOAD=libm.so.6 "$DIOSHIM" -- cat /proc/self/maps
	[[ "$output" == *libdioshim.so* ]]
	[[ "$output" == *libm.so.6* ]]
}

# ---- 6. closing ---------------------------------------------------------

@test "closefrom, close_range and fclose of an fdopen'd fd: new files keep working, no shim fd, no stale segment" {
	pdo_both close <<'EOF'
fresh cf
seg %1/cf
closefrom 3
seg %1/cf
write 3 4k
fstat 3
fstat 4
stat %1/cf
open a %1/cf2 WRONLY|CREAT|TRUNC|DIRECT|APPEND 644
rep 3 write @a 4k
ksize @a
fstat @a
open b %1/cf WRONLY|DIRECT|APPEND
write @b 4k
ksize @b
fstat @b
close_range 3 0xffffffff 0
seg %1/cf
seg %1/cf2
stat %1/cf
stat %1/cf2
fstat 3
open a %1/cf3 WRONLY|CREAT|TRUNC|DIRECT|APPEND 644
open b %1/cf3 RDWR|DIRECT
rep 2 write @a 4k
close_range 3 0xffffffff CLOSE_RANGE_CLOEXEC
getfd @a
write @a 4k
fstat @b
close_range 4 4 0
fstat @b
write @a 4k
fstat @a
lseek @a 0 END
open c %1/cf3 RDONLY
close_range 5 3 0
fstat @c
dup2 @a 10
close_range 10 10 0
fstat @a
write @a 4k
fstat @a
fdopen_fclose @a a
write @a 4k
fstat @a
open d %1/cf4 WRONLY|CREAT|TRUNC|DIRECT|APPEND 644
rep 2 write @d 4k
fstat @d
ksize @d
stat %1/cf3
fstat @c
seg %1/cf3
close @c
seg %1/cf3
stat %1/cf3
EOF
	reserved
	same_output
	same_files
	# Under the shim: a segment, gone with closefrom; none after
	# close_range; one while a reader of cf3 stays, none after.
	[ "$(segs "$SHM.out")" = 100010 ]
}

@test "an fd number reused behind the shim's back (freopen, a raw close) answers for its new file" {
	pdo_both stale <<'EOF'
fresh stale
open o %1/other WRONLY|CREAT|TRUNC 644
rep 5 write @o 4k
close @o
fdopen_freopen @w %1/other r
fstat @w
lseek @w 0 END
pread @w 4k 16k
lseek @w 16k DATA
rawclose @a
pread @a 4k 16k
lseek @a 16k DATA
fstat @r
EOF
	reserved
	same_output
}

# ---- 7. cancellation and signals -----------------------------------------

@test "threads cancelled in pwrite/write loops: the barrier is not stuck, ftruncate and exit work" {
	prog_both cancel "$HELPERS/p_cancel" cancel
	[ "$REF_RC" -eq 0 ]
	[ "$SHM_RC" -eq 0 ]
	same_output
	reserved
	same_files
}

@test "with a cancel pending, calls that are not cancellation points return (lseek, ftruncate, truncate, posix_fallocate...)" {
	prog_both pending "$HELPERS/p_cancel" pending
	[ "$REF_RC" -eq 0 ]
	[ "$SHM_RC" -eq 0 ]
	same_output
	reserved
}

@test "SIGALRM handlers opening, appending to and closing files while the main thread does the same: no deadlock" {
	prog_both sigopen "$HELPERS/p_cancel" sigopen
	[ "$REF_RC" -eq 0 ]
	[ "$SHM_RC" -eq 0 ]
	same_output
	reserved
}

@test "SIGALRM handlers appending to the fd the main thread appends to: no deadlock, every record once, size exact" {
	prog_both signal "$HELPERS/p_cancel" signal
	[ "$REF_RC" -eq 0 ]
	[ "$SHM_RC" -eq 0 ]
	same_output
	reserved
	grep -q '^records: total-matches=1 bad=0 duplicated=0$' "$SHM.out"
}

# ---- 8-10. what the shim must leave alone -------------------------------

@test "programs without O_DIRECT (tar, cp, sort) give identical results and create no segment" {
	local before_gen before_segs
	mkdir -p "$W/src/sub/deeper"
	seq 1 5000 | shuf --random-source=<(yes) >"$W/src/numbers"
	head -c 300000 /dev/urandom >"$W/src/sub/blob"
	printf 'hello\n' >"$W/src/sub/deeper/small"
	: >"$W/src/empty"
	ln -s sub/blob "$W/src/link"
	before_gen=$(hint_gen)
	before_segs=$(seg_files)

	noshim tar -cf "$W/ref.tar" -C "$W/src" .
	shim tar -cf "$W/shim.tar" -C "$W/src" .
	noshim cmp "$W/ref.tar" "$W/shim.tar"
	mkdir "$W/ref.x" "$W/shim.x"
	noshim tar -xf "$W/ref.tar" -C "$W/ref.x"
	shim tar -xf "$W/shim.tar" -C "$W/shim.x"
	noshim diff -r --no-dereference "$W/ref.x" "$W/shim.x"
	noshim diff -r --no-dereference "$W/src" "$W/shim.x"

	noshim cp -a "$W/src" "$W/ref.cp"
	shim cp -a "$W/src" "$W/shim.cp"
	noshim diff -r --no-dereference "$W/ref.cp" "$W/shim.cp"
	shim cp "$W/src/sub/blob" "$W/shim.blob"
	noshim cmp "$W/src/sub/blob" "$W/shim.blob"

	noshim sort -n "$W/src/numbers" -o "$W/ref.sorted"
	shim sort -n "$W/src/numbers" -o "$W/shim.sorted"
	noshim cmp "$W/ref.sorted" "$W/shim.sorted"
	shim sort -n -S 64k -T "$W" "$W/src/numbers" >"$W/shim.sorted2"
	noshim cmp "$W/ref.sorted" "$W/shim.sorted2"

	[ "$(hint_gen)" = "$before_gen" ]
	[ "$(seg_files)" = "$before_segs" ]
}

@test "DIOSHIM_DISABLE=1: a served workload makes no segment and the kernel's size is the kernel's" {
	pdo_both disable DIOSHIM_DISABLE=1 <<'EOF'
fresh d
seg %1/d
write @a 4k
pwrite @w 4k 40k
ksize @a
seg %1/d
fstat @a
ftruncate @w 24k
write @a 4k
ksize @a
close @a
stat %1/d
EOF
	same_output
	same_files
	# No reservation ever: the kernel sizes are the reference's.
	diff <(grep '^#' "$REF.out") <(grep '^#' "$SHM.out")
	[ "$(segs "$SHM.out")" = 00 ]
}

@test "files on filesystems not configured (tmpfs by default, DIOSHIM_FS naming another one) pass through" {
	local other=xfs
	[ "$FS_TYPE" = xfs ] && other=ext4
	local script='fresh n
seg %1/n
ksize @a
write @a 4k
pwrite @w 4k 32k
seg %1/n
fstat @a
ksize @a
close @a
stat %1/n'
	# This filesystem, but DIOSHIM_FS names the other one.
	pdo_both otherfs DIOSHIM_FS="$other" <<<"$script"
	same_output
	same_files
	diff <(grep '^#' "$REF.out") <(grep '^#' "$SHM.out")
	[ "$(segs "$SHM.out")" = 00 ]

	# tmpfs, not named: passed through (O_DIRECT works on tmpfs >= 6.6).
	TMPD=$(mktemp -d /dev/shm/p_interpose.XXXXXX)
	[ "$(stat -f -c %T "$TMPD")" = tmpfs ] || skip "/dev/shm is not tmpfs"
	W=$TMPD
	pdo_both tmpfs-default -u DIOSHIM_FS <<<"$script"
	same_output
	same_files
	diff <(grep '^#' "$REF.out") <(grep '^#' "$SHM.out")
	[ "$(segs "$SHM.out")" = 00 ]

	# Named, the same workload on tmpfs is served (the check above means
	# something) and still exact.
	pdo_both tmpfs-named DIOSHIM_FS=tmpfs <<<"$script"
	same_output
	same_files
	reserved
	[ "$(segs "$SHM.out")" = 11 ]
}

@test "close from a signal handler while its thread is inside the shim: the number, reused for a socket, is the socket's (issue 11, case 7)" {
	mkdir -p "$W/k" "$W/s"
	run timeout 120 env -u LD_PRELOAD "$HELPERS/sigclose" "$W/k" 300
	echo "kernel alone: $output"
	[ "$status" -eq 0 ]
	run timeout 120 "$DIOSHIM" "$HELPERS/sigclose" "$W/s" 300
	echo "under the shim: $output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" bad=0" ]]
	# The same while the thread is inside fork(), whose handlers hold the
	# shim's table: no hang.
	run timeout 120 "$DIOSHIM" "$HELPERS/sigclose" "$W/s" 300 fork
	echo "under the shim, forking: $output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" bad=0" ]]
}

@test "pwritev whose iovec array was read once, then unmapped or made PROT_NONE: EFAULT and the size of the kernel alone (the shim reads the array)" {
	local how out
	for how in unmap protect; do
		run timeout 60 env -u LD_PRELOAD "$HELPERS/t_fops" -d -c "$W/k.$how" \
			wv 0 4096 keep wv 4096 4096 "$how" wv 8192 4096 keep size
		echo "kernel alone: $output"
		[ "$status" -eq 0 ]
		out=$output
		run timeout 60 "$DIOSHIM" "$HELPERS/t_fops" -d -c "$W/s.$how" \
			wv 0 4096 keep wv 4096 4096 "$how" wv 8192 4096 keep size
		echo "under the shim: $output"
		[ "$status" -eq 0 ]
		[ "$output" = "$out" ]
		[[ "$output" == *"wv 8192 4096 keep = -1 EFAULT"* ]]
	done
}

@test "the address-space calls the shim wraps (mmap, mmap64, munmap, mprotect, pkey_mprotect, madvise, process_madvise, mremap, shmat, shmdt, sbrk), good and bad arguments: every answer and errno as the kernel alone" {
	run timeout 60 env -u LD_PRELOAD "$HELPERS/mmcalls"
	[ "$status" -eq 0 ]
	local k=$output
	run timeout 60 "$DIOSHIM" "$HELPERS/mmcalls"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "$k" ]
	[ "$(grep -c '' <<<"$output")" -eq 30 ]
}
