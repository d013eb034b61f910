#!/bin/bash
# config.sh: one source of truth for the settings (shim/config.def).  Every
# DIOSHIM_* variable the library or the command reads is in config.def;
# every entry is in the README's Configuration table with the same default
# and in dioshim(7); `dioshim --help` prints the list from config.def
# itself.  Exit 0 pass, 1 fail.
top=$(cd "$(dirname "$0")/../.." && pwd)
def=$top/shim/config.def
man7=$top/contrib/man/dioshim.7
launcher=${BUILD:-$top/build}/dioshim
bad=0
fail() { echo "$*"; bad=1; }
help=$([ -x "$launcher" ] && "$launcher" --help)

# name default, one per line, from CONFIG(name, "default", ...).
entries=$(sed -n -E 's/^CONFIG\((DIOSHIM_[A-Z_]+), "([^"]*)".*/\1 \2/p' "$def")
[ -n "$entries" ] || { echo "no entries in $def"; exit 1; }

# Read: every DIOSHIM_ name the sources write as a whole string (getenv,
# load_size), and every getenv of one anywhere.
read_names=$( { grep -ho '"DIOSHIM_[A-Z_]*"' "$top"/shim/config.c
	grep -ho 'getenv("DIOSHIM_[A-Z_]*")' "$top"/shim/*.c \
		"$top"/shim/dioshim/*.c; } | grep -o 'DIOSHIM_[A-Z_]*' | sort -u)
for n in $read_names; do
	grep -q "^$n " <<<"$entries" || fail "$n: read, not in config.def"
done

while read -r n d; do
	grep -qx "$n" <<<"$read_names" || fail "$n: in config.def, read nowhere"
	row=$(grep -F "| \`$n\` |" "$top/README.md")
	if [ -z "$row" ]; then
		fail "$n: not in the README's Configuration table"
	elif [ -n "$d" ] && [[ $row != *"| \`$n\` | \`$d\` |"* ]]; then
		fail "$n: the README's default is not \`$d\`"
	fi
	[ -z "$help" ] || grep -q "^  $n[= ]" <<<"$help" ||
		fail "$n: not in dioshim --help"
	if [ -e "$man7" ]; then
		grep -q "$n" "$man7" || fail "$n: not in dioshim(7)"
	fi
done <<<"$entries"
where="the README"
[ -z "$help" ] || where="--help, $where"
[ ! -e "$man7" ] || where="$where and dioshim(7)"
[ $bad -eq 0 ] && echo "$(wc -l <<<"$entries") settings, each read, in $where"
exit $bad
