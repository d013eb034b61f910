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
