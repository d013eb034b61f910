#!/bin/bash
# man.sh: dioshim(1) and dioshim(7) (contrib/man) lint clean: groff's
# warnings and mandoc's, each printing nothing.  Exit 0 pass, 1 fail, 77
# skip (neither tool installed).
top=$(cd "$(dirname "$0")/../.." && pwd)
bad=0 ran=
for page in "$top"/contrib/man/dioshim.[17]; do
	name=$(basename "$page")
	if command -v groff >/dev/null; then
		out=$(groff -ww -z -man "$page" 2>&1)
		[ -z "$out" ] || { echo "$name: groff: $out"; bad=1; }
		ran="$ran groff"
	fi
	if command -v mandoc >/dev/null; then
		out=$(mandoc -T lint -W warning "$page" 2>&1)
		[ -z "$out" ] || { echo "$name: mandoc: $out"; bad=1; }
		ran="$ran mandoc"
	fi
done
[ -n "$ran" ] || { echo "neither groff nor mandoc is installed"; exit 77; }
[ $bad -eq 0 ] && echo "dioshim.1 and dioshim.7 lint clean ($(echo $ran | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//'))"
exit $bad
