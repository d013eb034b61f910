#!/usr/bin/env bash
# bench/real.sh: real programs, the kernel alone against dioshim — QEMU's
# image tools, PostgreSQL, MariaDB, RocksDB (bench/real-*.sh, each side
# by side, interleaved, medians of REPS) — as one Markdown section and a
# plot (bench/real.png, when gnuplot is there).  bench/run.sh's "real"
# section runs it; alone:
#
#   sudo bench/real.sh                       # every program, ext4 and XFS
#   sudo PROGRAMS="qemu rocksdb" SECS=10 bench/real.sh
#
# OUT: where the Markdown goes (default: stdout).  PLOT: the PNG ("" = none).
# A program whose packages are missing is skipped and the table says so.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
: "${PROGRAMS:=qemu postgres mariadb rocksdb}" "${OUT:=/dev/stdout}"
: "${PLOT=$TOP/bench/real.png}"
export REPS=${REPS:-3} SECS=${SECS:-20} FSTYPES=${FSTYPES:-ext4 xfs}
export BUILD=${BUILD:-$TOP/build}

lines=$(mktemp)
skipped=()
trap 'rm -f "$lines"' EXIT
for p in $PROGRAMS; do
	echo "real: $p" >&2
	out=$("$TOP/bench/real-$p.sh")
	rc=$?
	grep '^real ' <<<"$out" >>"$lines"
	[ "$rc" -eq 0 ] || skipped+=("$p (exit $rc)")
done

{
	echo "## Real programs: what they gain, what they pay (bench/real.sh; issue 14)"
	echo
	echo "Each program as its users run it, on a fresh scratch filesystem, the"
	echo "kernel alone and \`dioshim --\` interleaved, REPS=$REPS, medians;"
	echo "SECS=$SECS for the timed database runs.  CPU: user+sys of the"
	echo "program (the server's processes for the databases) per operation."
	echo "Recipes: contrib/qemu.md, postgresql.md, mariadb.md, rocksdb.md."
	echo
	echo "| program | fs | workload | unit | kernel | dioshim | ratio | CPU µs/op kernel | CPU µs/op dioshim |"
	echo "|---|---|---|---|--:|--:|--:|--:|--:|"
	while read -r _ prog fs w unit rest; do
		f() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$rest"; }
		echo "| $prog | $fs | $w | $unit | $(f kernel) | $(f dioshim) |" \
			"$(f ratio)x | $(f cpu_us_k) | $(f cpu_us_s) |"
	done <"$lines"
	[ ${#skipped[@]} -eq 0 ] || echo -e "\nNot measured: ${skipped[*]}."
	if [ -n "$PLOT" ] && command -v gnuplot >/dev/null && [ -s "$lines" ]; then
		echo
		echo "![dioshim over the kernel alone, per program and workload](real.png)"
	fi
} >"$OUT"

# The plot: one bar per program/workload/filesystem, dioshim over the
# kernel alone (1.0 = the same); the gains above the line, the costs
# below.
if [ -n "$PLOT" ] && command -v gnuplot >/dev/null && [ -s "$lines" ]; then
	dat=$(mktemp)
	awk '{ r = $0; sub(/.*ratio=/, "", r); sub(/ .*/, "", r)
	       printf "\"%s %s\\n%s\" %s %s\n", $2, $4, $3, r, ($3 == "ext4" ? 1 : 2) }' \
		"$lines" >"$dat"
	gnuplot <<EOF
set terminal pngcairo size 1150,560 font "sans,10"
set bmargin 9
set rmargin 6
set output "$PLOT"
set title "dioshim over the kernel alone (same run, interleaved, medians; blue ext4, orange XFS): above 1 = faster"
set style fill solid 0.8 border -1
set boxwidth 0.7
set yrange [0:*]
set grid ytics
set ylabel "throughput ratio, dioshim / kernel"
set xtics rotate by -40 font "sans,8" noenhanced
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 lc rgb "black"
set key off
plot "$dat" using 0:2:(\$3 == 1 ? 0x3b7dd8 : 0xe07b39):xtic(1) with boxes lc rgb variable, \
     "$dat" using 0:2:(sprintf("%.2f", \$2)) with labels offset 0,0.7 font "sans,8"
EOF
	rm -f "$dat"
	echo "real: plot in $PLOT" >&2
fi
