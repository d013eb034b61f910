#!/bin/bash
# exports.sh: the library exports exactly the wrapper table, shim/real.def
# (STYLE.md: a wrapper nobody listed cannot exist), and every entry of the
# table is exported.  Exit 0 pass, 1 fail, 77 skip (no library or no nm).
top=$(cd "$(dirname "$0")/../.." && pwd)
lib=${BUILD:-$top/build}/libdioshim.so
command -v nm >/dev/null || { echo "nm is not installed"; exit 77; }
[ -e "$lib" ] || { echo "no $lib: make first"; exit 77; }

# Each entry is KIND(ret, name, ...), possibly over several lines.
table=$(sed -n -E 's/^[A-Z]+\([^,]*, *([A-Za-z_0-9]+),.*/\1/p' \
	"$top/shim/real.def" | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | sort -u)
diff=$(diff <(echo "$table") <(echo "$exported") | grep '^[<>]')
if [ -n "$diff" ]; then
	echo "$diff" | sed -e 's/^< \(.*\)/\1: in real.def, not exported/' \
		-e 's/^> \(.*\)/\1: exported, not in real.def/'
	exit 1
fi
echo "$(echo "$exported" | wc -l) symbols exported, each one an entry of real.def"
