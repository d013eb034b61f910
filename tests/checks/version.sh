#!/bin/bash
# version.sh: one version everywhere it is written: DIOSHIM_VERSION
# (include/dioshim.h, which --version prints), debian/changelog's top
# entry (the package's version) and the man pages' headers.  Exit 0
# pass, 1 fail.
top=$(cd "$(dirname "$0")/../.." && pwd)
bad=0
want=$(sed -n -E 's/^#define DIOSHIM_VERSION "([^"]+)"$/\1/p' \
	"$top/include/dioshim.h")
[ -n "$want" ] || { echo "no DIOSHIM_VERSION in include/dioshim.h"; exit 1; }
# dpkg-parsechangelog when it is there; the top line's "dioshim (V)" else.
if command -v dpkg-parsechangelog >/dev/null; then
	deb=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
else
	deb=$(sed -n -E '1s/^dioshim \(([^)]+)\).*/\1/p' "$top/debian/changelog")
fi
[ "$deb" = "$want" ] ||
	{ echo "debian/changelog: '$deb', DIOSHIM_VERSION: $want"; bad=1; }
for page in "$top"/contrib/man/dioshim.[17]; do
	th=$(sed -n -E 's/^\.TH .* "dioshim ([^"]+)" .*/\1/p' "$page")
	[ "$th" = "$want" ] ||
		{ echo "$(basename "$page"): '$th', DIOSHIM_VERSION: $want"; bad=1; }
done
[ $bad -eq 0 ] && echo "version $want in dioshim.h, debian/changelog, dioshim.1 and dioshim.7"
exit $bad
