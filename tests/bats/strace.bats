#!/usr/bin/env bats
# fs: ext4 xfs
# What reaches the kernel: an 8-thread append workload run through the
# launcher under strace (outside the shim: strace itself is not preloaded),
# and the log parsed for the data file's calls.  Under the shim every write
# must end inside the size that the preceding fallocates (reservations) or
# ftruncates established, so the kernel never sees an extending write;
# reservations are rare; the last call trims the file to the exact size.
# Without the shim the same workload extends the file write after write.

load helper


setup_file() { fs_setup_file "${FS:-ext4}" 1G; }
teardown_file() { fs_teardown_file; }
setup() {
	fs_require
	command -v strace >/dev/null || skip "strace is not installed"
	F=$SCRATCH_MNT/strace.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
}

TRACE="trace=pwrite64,pwritev,pwritev2,write,fallocate,ftruncate"

# Parse an `strace -f -y` log for the calls on FILE's descriptors.  Prints
# key=value pairs: writes (data writes that returned), checked (positioned
# writes whose range was parsed), extending (writes that, when they entered the kernel, ended past the size
# established by completed fallocate(mode 0)/ftruncate calls), fallocates,
# ftruncates, last_trunc (length of the last ftruncate), trunc_last (1 if
# that ftruncate came after every write), final (the established size at
# the end).
analyze() {
	awk -v path="$2" '
	BEGIN { fdtag = "<" path ">" }
	# "3</path>": strace -y names each descriptor argument.
	function num(s) { return s + 0 }
	function ours(s) { sub(/^[0-9]+/, "", s); return s == fdtag }
	# A call entering the kernel.
	function enter(call, args,    a, n, off, len) {
		n = split(args, a, ", ")
		if (!ours(a[1]))
			return
		if (call == "pwrite64" || call == "pwritev" || call == "pwritev2") {
			if (call == "pwrite64") {
				len = num(a[3]); off = num(a[4])
			} else {
				if (!match(args, /iov_len=[0-9]+/))
					return
				len = num(substr(args, RSTART + 8, RLENGTH - 8))
				if (!match(args, /\], [0-9]+, [0-9]+/))
					return
				split(substr(args, RSTART + 3, RLENGTH - 3), a, ", ")
				off = num(a[2])
			}
			checked++
			if (off + len > size)
				extending++
			seen_write = NR
		} else if (call == "write") {
			# write(2) on the file: its offset is unknown here.
			plain++
			seen_write = NR
		}
	}
	# A call that returned: args and the return value.
	function leave(call, args, ret,    a, n) {
		n = split(args, a, ", ")
		if (!ours(a[1]))
			return
		if ((call == "pwrite64" || call == "pwritev" ||
		     call == "pwritev2" || call == "write") && ret > 0)
			writes++
		if (call == "fallocate" && ret == 0) {
			fallocates++
			if (a[2] == "0" && num(a[3]) + num(a[4]) > size)
				size = num(a[3]) + num(a[4])
		}
		if (call == "ftruncate" && ret == 0) {
			ftruncates++
			size = num(a[2])
			last_trunc = size
			trunc_at = NR
		}
	}
	function parse(s, what) {
		# s: "call(args) = ret ..." or "call(args"
		call = substr(s, 1, index(s, "(") - 1)
		rest = substr(s, index(s, "(") + 1)
		if (what == "enter")
			return
		if (!match(rest, /\) += -?[0-9]+/)) {
			ret = -1
			args = rest
			return
		}
		args = substr(rest, 1, RSTART - 1)
		ret = num(substr(rest, RSTART + 1 + index(substr(rest, RSTART + 1), "=")))
	}
	{
		pid = $1
		line = substr($0, length($1) + 2)
		sub(/^ +/, "", line)
		if (line ~ /<unfinished \.\.\.>$/) {
			sub(/ <unfinished \.\.\.>$/, "", line)
			pend[pid] = line
			c = substr(line, 1, index(line, "(") - 1)
			enter(c, substr(line, index(line, "(") + 1))
			next
		}
		if (line ~ /^<\.\.\. [a-z0-9_]+ resumed>/) {
			if (!(pid in pend))
				next
			sub(/^<\.\.\. [a-z0-9_]+ resumed>/, "", line)
			line = pend[pid] line
			delete pend[pid]
			parse(line, "leave")
			leave(call, args, ret)
			next
		}
		if (line !~ /^[a-z0-9_]+\(/)
			next
		parse(line, "leave")
		c = substr(line, 1, index(line, "(") - 1)
		enter(c, substr(line, index(line, "(") + 1))
		leave(call, args, ret)
	}
	END {
		printf "writes=%d checked=%d extending=%d plain=%d fallocates=%d ftruncates=%d last_trunc=%d trunc_last=%d final=%d\n",
		       writes, checked, extending, plain, fallocates, ftruncates,
		       last_trunc, (trunc_at > seen_write), size
	}' "$1"
}

field() { sed -n "s/.*\\b$1=\\([0-9]*\\).*/\\1/p" <<<"$2"; }

# strace -f the launcher running CMD...; the analysis of F's calls.
traced() {
	timeout 600 strace -f -qq -y -s 1 -e "$TRACE" -o "$T/strace.log" "$@"
	analyze "$T/strace.log" "$F" | tee "$T/analysis"
}

@test "8 threads appending at a shared counter under the shim: every pwrite64 ends inside the reservation, fallocates under 1% of the writes, the last call trims to the exact size" {
	local want=$((8 * 600 * 4096)) a
	run traced "$DIOSHIM" "$APPENDBENCH" run -m counter -t 8 -n 600 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	a=${lines[-1]}
	[ "$(field writes "$a")" -eq 4800 ]
	[ "$(field checked "$a")" -eq 4800 ]
	[ "$(field extending "$a")" -eq 0 ]
	[ "$(field fallocates "$a")" -ge 1 ]
	[ $(($(field fallocates "$a") * 100)) -lt 4800 ]
	[ "$(field last_trunc "$a")" -eq "$want" ]
	[ "$(field trunc_last "$a")" -eq 1 ]
	[ "$(real_size "$F")" -eq "$want" ]
	run noshim "$APPENDBENCH" check -t 8 -n 600 "$F"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "8 threads appending with O_APPEND under the shim: the writes reach the kernel as positioned pwritev2 calls inside the reservation, fallocates under 1%, the last call trims" {
	local want=$((8 * 600 * 4096)) a
	run traced "$DIOSHIM" "$APPENDBENCH" run -m append -t 8 -n 600 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	a=${lines[-1]}
	[ "$(field writes "$a")" -eq 4800 ]
	# No write(2) reached the kernel: each append was made positional.
	[ "$(field plain "$a")" -eq 0 ]
	[ "$(field checked "$a")" -eq 4800 ]
	[ "$(field extending "$a")" -eq 0 ]
	[ "$(field fallocates "$a")" -ge 1 ]
	[ $(($(field fallocates "$a") * 100)) -lt 4800 ]
	[ "$(field last_trunc "$a")" -eq "$want" ]
	[ "$(field trunc_last "$a")" -eq 1 ]
	[ "$(real_size "$F")" -eq "$want" ]
	run noshim "$APPENDBENCH" check -t 8 -n 600 "$F"
	[ "$status" -eq 0 ]
	assert_no_segment "$F"
}

@test "control: the same counter workload without the shim makes no fallocate and extends the file write after write" {
	local a
	run traced env -u LD_PRELOAD "$APPENDBENCH" run -m counter -t 8 -n 600 "$F"
	echo "$output"
	[ "$status" -eq 0 ]
	a=${lines[-1]}
	[ "$(field writes "$a")" -eq 4800 ]
	[ "$(field checked "$a")" -eq 4800 ]
	[ "$(field fallocates "$a")" -eq 0 ]
	# The check above can fail: here most writes extend the file.
	[ "$(field extending "$a")" -ge 2400 ]
	[ "$(real_size "$F")" -eq $((8 * 600 * 4096)) ]
}

@test "fio psync, 4 jobs writing regions of a new file under the shim: every pwrite64 inside a reservation (fallocates fio itself never makes), the file trimmed to the exact size" {
	command -v fio >/dev/null || skip "fio is not installed"
	local a
	cd "$T"
	run traced "$DIOSHIM" fio --name=regions --filename="$F" --direct=1 \
		--bs=4k --size=3100k --numjobs=4 --offset_increment=3100k \
		--ioengine=psync --rw=write --fallocate=none --group_reporting
	echo "$output"
	[ "$status" -eq 0 ]
	a=${lines[-1]}
	[ "$(field writes "$a")" -eq 3100 ]
	[ "$(field checked "$a")" -eq 3100 ]
	[ "$(field extending "$a")" -eq 0 ]
	[ "$(field fallocates "$a")" -ge 1 ]
	[ "$(real_size "$F")" -eq $((4 * 3100 * 1024)) ]
	assert_no_segment "$F"
}
