# shellcheck shell=bash
# Shared by the bench scripts that print side-by-side tables.

# field NAME LINE: the value of NAME= in a helper's key=value output line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
# The median of the numbers on standard input, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
