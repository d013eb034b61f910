#!/usr/bin/env bats
# fs: ext4 xfs
# The fault harness's fast subset (make faults runs all of it, see
# tests/faults/faults.sh): one workload with a failure injected by strace
# at one system call, under the shim and with the kernel alone under the
# same injection (the control).  Every property the kernel alone keeps
# (tests/faults/lib.sh: no acknowledged record lost or doubled, no zero
# block inside the data, the size at the end of the data after the last
# close, no EOF record, no segment, no hang, no error the program was not
# injected with) must hold under the shim.  Each test reproduces alone
# with: tests/faults/faults.sh one FS WORKLOAD SIDE SYSCALL:ERRNO:WHEN
# (WHEN counts per thread; N+ fails from the N-th call on).

load helper

setup_file() { fs_setup_file "${FS:-ext4}" 512M; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	# shellcheck source=../faults/lib.sh
	source "$TOP/tests/faults/lib.sh"
	local why
	why=$(faults_skip_reason) || skip "$why"
	export FAULTS_SHM=$DIOSHIM_SHM_DIR FAULTS_TIMEOUT=10
}

# fault_case WORKLOAD SIDE SYSCALL:ERRNO:WHEN: the control, the shim run,
# their properties; fails on any difference.
fault_case() {
	local wl=$1 side=$2 inj=$3 cinj d=$BATS_TEST_TMPDIR diff
	inj=$(set +e; fault_resolve "$wl" "$side" "$inj" "$d/calls" "$SCRATCH_MNT")
	cinj=$(fault_control_inj "$wl" "$inj")
	(set +e; fault_run "$wl" kernel "$cinj" "$d/kernel" "$SCRATCH_MNT")
	echo "kernel alone, $cinj: $(fault_props_line "$d/kernel")"
	(set +e; fault_run "$wl" "$side" "$inj" "$d/shim" "$SCRATCH_MNT")
	echo "shim ($side), $inj: $(fault_props_line "$d/shim")"
	sed 's/^/  /' "$d/shim/detail"
	diff=$(fault_diff "$d/shim/props" "$d/kernel/props")
	echo "differences: ${diff:-none}"
	echo "reproduce: tests/faults/faults.sh one $FS_TYPE $wl $side $inj"
	[ -z "${diff// /}" ]
}

# Issue 28, 3: a reservation that fails after others were made cuts
# acknowledged writes (the undo truncates to a size below them).
@test "fallocate EIO from the 4th on, libaio at queue depth 16: no acknowledged write cut, fstat never shrinks, no record left" {
	fault_case aio-seq always fallocate:EIO:4+
}

@test "fallocate ENOSPC from the 4th on, io_uring at queue depth 16: no acknowledged write cut, no record left" {
	fault_case uring-seq always fallocate:ENOSPC:4+
}

@test "fallocate ENOSPC at the 4th, 2 processes appending: no acknowledged append lost, no hole" {
	fault_case append always fallocate:ENOSPC:4
}

# Issue 28, 4: a member that takes no size when its own fstat fails.
@test "fstat EIO from the 8th on, 2 processes appending: no acknowledged append lost" {
	fault_case append always fstat:EIO:8+
}

# Issue 28, 5.
@test "the last close's trim fails once (ftruncate EIO, last call): the file ends at its data, no record, no segment" {
	fault_case counter always ftruncate:EIO:last
}

@test "the last close's trim is refused once (ftruncate EPERM, last call): the file ends at its data, no record, no segment" {
	fault_case counter always ftruncate:EPERM:last
}

@test "fstat fails for good from two thirds of its calls on, libaio: no reserved tail, record or segment left" {
	fault_case aio-seq always fstat:EIO:2/3+
}

# Issue 28, 6.
@test "a failed append among parallel appends (pwritev2 EIO at each thread's 13th): no hole, no size past the data" {
	fault_case append always pwritev2:EIO:13
}

@test "an interrupted append among parallel appends (pwritev2 EINTR at each thread's 13th): no hole" {
	fault_case append always pwritev2:EINTR:13
}

# Issue 28, 7.
@test "the memory probe fails (madvise ENOMEM, first call), 2 processes appending: no acknowledged append lost, no hole" {
	fault_case append always madvise:ENOMEM:1
}

@test "the memory probe fails (madvise ENOMEM from the 2nd on), libaio: fstat covers every reaped write" {
	fault_case aio-seq always madvise:ENOMEM:2+
}

@test "the memory probe keeps saying EAGAIN (madvise from the 2nd on), libaio appends: no hang" {
	fault_case aio-append always madvise:EAGAIN:2+
}

# Issue 28, 8.
@test "removing the EOF record fails once (fremovexattr EIO): no record left" {
	fault_case counter always fremovexattr:EIO:1
}

@test "removing the segment fails once (unlinkat EIO, last call): no segment left" {
	fault_case counter always unlinkat:EIO:last
}

@test "the lock calls fail for good from two thirds of them on (fcntl ENOLCK), libaio: no segment left" {
	fault_case aio-seq always fcntl:ENOLCK:2/3+
}

# (openat EMFILE for good is left to make faults: with no descriptor to
# be had, a process can neither ask whether a guest holds the file nor
# read /proc/locks, and leaves the segment — never a size, a record or a
# byte — for the next user or dioshim gc; dioshim(7) says so.)

# Found by make faults: a probe that fails makes one process write the
# file outside the shim, or another's live writer look dead, beside a
# process that reserves.
@test "identifying the file fails once in each process (fstatfs EIO, first call): no acknowledged append lost, no hole" {
	fault_case append always fstatfs:EIO:1
}

@test "identifying the file fails for good from the 2nd call on (fstatfs EIO): no acknowledged append lost" {
	fault_case append always fstatfs:EIO:2+
}

@test "identifying the file fails once (statx EIO, first call), default engage: no acknowledged append lost" {
	fault_case append default statx:EIO:1
}

@test "a live writer's liveness probe fails (kill ESRCH, first call): no append lost, the file ends at its data" {
	fault_case append always kill:ESRCH:1
}

# Found by make faults: a submission the kernel refuses, a program that
# exits on an error with writes in flight.
@test "io_uring_enter EINTR at the first submission: fstat never shows the reservation, the exit does not hang" {
	fault_case uring-seq always io_uring_enter:EINTR:1
}

@test "the program exits on a failed fstat (newfstatat EIO at its 21st) with io_uring writes in flight: no record, segment or hole left" {
	fault_case uring-seq always newfstatat:EIO:21
}
