# shellcheck shell=bash
# Shared by the bench scripts that print side-by-side tables.

# field NAME LINE: the value of NAME= in a helper's key=value output line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
# The median of the numbers on standard input, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# bench_scratch NAME: scratch filesystems registered for this run and a
# segment directory of its own (SHM), both removed at exit.  TOP: the
# tree.
bench_scratch() {
	export SCRATCH_REGISTRY=${TMPDIR:-/tmp}/dioshim-$1-$$.registry
	# shellcheck source=../tests/lib/scratchfs.sh
	source "$TOP/tests/lib/scratchfs.sh"
	SHM=$(mktemp -d "/dev/shm/dioshim-$1-shm.XXXXXX")
	trap 'scratch_destroy_all; rm -rf "$SHM"' EXIT
}

# Read fio's JSON (group_reporting: one job) from stdin; prints
# "iops io_bytes cpu_us_per_write error".  awk, not jq or python: nothing
# beyond what CI already has.  CPU: fio's usr_cpu+sys_cpu are percentages
# of job_runtime (the summed runtime of the group's jobs, in ms).
fio_parse() {
	awk '
	function num(line) { sub(/.*: */, "", line); sub(/[,"]+$/, "", line)
			     gsub(/"/, "", line); return line + 0 }
	/^ *"write" : \{/ { inw = 1; depth = 0 }
	inw && /\{/ { depth++ }
	inw && /\}/ { if (--depth == 0) inw = 0 }
	inw && depth == 1 && /"iops" :/ { iops = num($0) }
	inw && depth == 1 && /"io_bytes" :/ { bytes = num($0) }
	inw && depth == 1 && /"total_ios" :/ { ios = num($0) }
	/^ *"job_runtime" :/ { jrt = num($0) }
	/^ *"usr_cpu" :/ { usr = num($0) }
	/^ *"sys_cpu" :/ { sys = num($0) }
	/^ *"error" :/ { err += num($0) }
	END { cpu = ios ? (usr + sys) / 100 * jrt * 1000 / ios : 0
	      printf "%.0f %d %.2f %d\n", iops, bytes, cpu, err }'
}
