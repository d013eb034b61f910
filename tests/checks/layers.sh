#!/bin/bash
# layers.sh: the layering of shim/ (DESIGN.md 8), from the objects' symbols
# and shim/layers, the one rank table.  Fails on a reference from a lower
# layer to a higher one, on any cycle (also inside one layer), on an
# #include of a higher layer's header, on an object the table does not
# rank, and on a file whose head comment names another layer than the
# table's.  Exit 0 pass, 1 fail, 77 skip (no objects or no nm).
#   BUILD=build tests/checks/layers.sh      (-v: print every edge)
top=$(cd "$(dirname "$0")/../.." && pwd)
obj=${BUILD:-$top/build}/obj
table=$top/shim/layers
command -v nm >/dev/null || { echo "nm is not installed"; exit 77; }
command -v tsort >/dev/null || { echo "tsort is not installed"; exit 77; }
ls "$obj"/*.o >/dev/null 2>&1 || { echo "no objects in $obj: make first"; exit 77; }

# module -> layer, and its place in the table (bottom up)
declare -A rank pos
n=0
while read -r mod layer _; do
	case $mod in ''|'#'*) continue ;; esac
	rank[$mod]=${layer#L}
	pos[$mod]=$((n += 1))
done <"$table"

# An edge from -> to (what: symbol or "includes x.h") is down or level;
# level only to a module listed before from.
check_edge() {
	local from=$1 to=$2 what=$3
	[ -n "${rank[$from]}" ] && [ -n "${rank[$to]}" ] || return 0
	if [ "${rank[$from]}" -lt "${rank[$to]}" ]; then
		fail "up: $from (L${rank[$from]}) -> $to (L${rank[$to]}): $what"
	elif [ "${pos[$from]}" -lt "${pos[$to]}" ]; then
		fail "up inside L${rank[$from]}: $from -> $to, listed after it: $what"
	fi
}

bad=0
fail() { echo "$*"; bad=1; }

# Each file's head comment says its layer first, as the table does.
for f in "$top"/shim/*.c; do
	m=$(basename "$f" .c)
	said=$(awk 'NR == 1 { next } { print } /\*\/$/ { exit }' "$f" |
		grep -o '\bL[0-5]\b' | head -n 1)
	[ -z "${rank[$m]}" ] || [ "$said" = "L${rank[$m]}" ] ||
		fail "shim/$m.c: its head says ${said:-no layer}, shim/layers L${rank[$m]}"
done

# Symbol edges: "from to symbol", for the library's objects.
edges=$(for o in "$obj"/*.o; do
	m=$(basename "$o" .o)
	# An object whose source is gone (a stale build) is not the tree's.
	[ -e "$top/shim/$m.c" ] || continue
	[ -n "${rank[$m]}" ] || fail "$m.o: not in shim/layers"
	nm --defined-only -g "$o" | awk -v m="$m" 'NF == 3 { print "D", m, $3 }'
	nm -u "$o" | awk -v m="$m" '{ print "U", m, $2 }'
done | awk '$1 == "D" { def[$3] = $2 }
	$1 == "U" { n++; um[n] = $2; us[n] = $3 }
	END { for (i = 1; i <= n; i++)
		if (def[us[i]] != "" && def[us[i]] != um[i])
			print um[i], def[us[i]], us[i] }')

# Include edges: a file of module m including "x.h" of module x (x_priv.h:
# module x's insides, for the files of its layer that share them).
# Exceptions, each with its reason:
#   hot  defines, on the one page every wrapper reads, variables that
#        belong to real, shm and fdtable: it includes their headers for
#        the types alone, and references nothing.
incs=$(cd "$top/shim" && grep -H '^#include "' *.c *.h 2>/dev/null |
	sed -E 's/^([a-z_0-9]+)\.[ch]:#include "([a-z_0-9]+)\.(h|def)".*/\1 \2/' |
	sed -E 's/_priv / /; s/_priv$//' | awk '$1 != $2 && $1 != "hot"')

while read -r from to sym; do
	[ -n "$from" ] || continue
	check_edge "$from" "$to" "$sym"
	[ "${1:-}" = -v ] && echo "$from -> $to: $sym"
done <<<"$edges"
while read -r from to; do
	[ -n "$from" ] || continue
	check_edge "$from" "$to" "includes $to.h"
done <<<"$incs"

# Cycles, symbols and includes together: tsort names the modules of each
# loop on stderr.
loops=$( { awk '{ print $2, $1 }' <<<"$edges"; awk '{ print $2, $1 }' <<<"$incs"; } |
	sort -u | tsort 2>&1 >/dev/null | sed -n "s/^tsort: \([a-z_0-9]*\)$/\1/p" | sort -u | tr "\n" " ")
if [ -n "$loops" ]; then
	fail "cycle among:" $loops
	# The references among them, to find the one to turn around.
	{ awk '{ print $1, $2, $3 }' <<<"$edges"
	  awk '{ print $1, $2, "(#include)" }' <<<"$incs"; } |
		awk -v set=" $loops " 'index(set, " " $1 " ") && index(set, " " $2 " ") {
			k = $1 " -> " $2; e[k] = e[k] " " $3 }
			END { for (k in e) print "  " k ":" e[k] }' | sort
fi
[ $bad -eq 0 ] && echo "$(wc -l <<<"$edges") references and $(wc -l <<<"$incs") includes, each down the table, no cycle"
exit $bad
