#!/usr/bin/env bash
# Prints zprof's offsets table (JSON) for one OpenZFS release, compiled from that
# release's own headers with libzpool's DEBUG flags: the system's (Debian 12,
# 2.1.11) or one that setup.sh unpacked into $ZPROF_CACHE/openzfs/VERSION.
#   scripts/offsets-table.sh 2.3.2 > zprof/offsets/libzpool-2.3.2-debian.json
# tests/tests/offsets.rs runs the same recipe and compares with the shipped tables.
set -euo pipefail
version=${1:?usage: offsets-table.sh VERSION}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${ZPROF_CACHE:-$HOME/.cache/zprof}/openzfs/$version/root
if [[ -d $cache ]]; then
    root=$cache
    pkgver=$(awk -v v="$version" '$1 == v { print $3 }' "$here/scripts/openzfs-releases")
else
    root=/
    pkgver=$(dpkg-query -W -f='${Version}' libzfslinux-dev)
fi
includes=()
for dir in usr/include/libspl usr/include/libzfs usr/include/libzpool; do
    [[ -d $root/$dir ]] && includes+=(-I "$root/$dir")
done
# sys/zfs_ioctl.h is only in zfs-dkms's copy of the source tree.
includes+=(-idirafter "$root/usr/src/zfs-$version/include")
library=$(ls "$root"/lib/x86_64-linux-gnu/libzpool.so.[0-9] "$root"/usr/lib/x86_64-linux-gnu/libzpool.so.[0-9] 2>/dev/null | head -n1 || true)
build_id=$(readelf -n "$library" | awk '/Build ID/ { print $3 }')
exe=$(mktemp)
trap 'rm -f "$exe"' EXIT
gcc -O0 -w -D_GNU_SOURCE -D_REENTRANT -D_FILE_OFFSET_BITS=64 -D_LARGEFILE64_SOURCE \
    -DDEBUG -UNDEBUG -DZFS_DEBUG "${includes[@]}" -o "$exe" "$here/zprof/offsets/zfs_offsets.c"
"$exe" -j "$version" "libzfslinux-dev $pkgver headers, DEBUG layout" "$build_id"
