#!/bin/bash
# sizes.sh: no source file of shim/ over 1000 lines, no function over 100
# (STYLE.md: a file is one concern and fits in a reader's head).  A
# function is what kernel style writes it as: a line "{" alone at column
# 0 to the next "}" at column 0.  Exceptions are listed below, each with
# its reason; none is the goal.  Exit 0 pass, 1 fail.
top=$(cd "$(dirname "$0")/../.." && pwd)
max_file=1000 max_fn=100

# file-or-function  reason
exceptions='
'
excepted() { grep -qx "$1 .*" <<<"$exceptions"; }

bad=0
cd "$top" || exit 1
for f in shim/*.[chS] shim/*.def shim/dioshim/*.c; do
	[ -e "$f" ] || continue
	n=$(wc -l <"$f")
	if [ "$n" -gt $max_file ] && ! excepted "$f"; then
		echo "$f: $n lines (at most $max_file)"
		bad=1
	fi
done
long=$(awk -v max=$max_fn '
	FNR == 1 { start = 0 }
	/^\{$/ { start = FNR; name = prev }
	/^\}/ && start { n = FNR - start - 1
		if (n > max) { sub(/\(.*/, "", name); k = split(name, w, /[ *]+/)
			print FILENAME ":" start ": " w[k] "() " n " lines" }
		start = 0 }
	{ if ($0 !~ /^[{}]/ && $0 ~ /^[a-zA-Z_]/) prev = $0
	  else if ($0 ~ /^\t/ && prev != "" && $0 !~ /;/) prev = prev $0 }
' shim/*.c shim/dioshim/*.c)
while IFS= read -r l; do
	[ -n "$l" ] || continue
	fn=${l#*: }; fn=${fn%%()*}
	excepted "$fn" && continue
	echo "$l (at most $max_fn)"
	bad=1
done <<<"$long"
[ $bad -eq 0 ] && echo "every file at most $max_file lines, every function at most $max_fn"
exit $bad
