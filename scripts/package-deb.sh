#!/bin/bash
# package-deb.sh [--binary PATH] [OUTDIR]: builds atomdb_<version>_<arch>.deb (default into
# dist/) with dpkg-deb: /usr/bin/atomdb, /etc/atomdb/atomdb.conf (mongod.conf
# YAML), the systemd unit atomdb.service (its own user, /var/lib/atomdb,
# Type=notify, hardening), a man page, and Depends computed from the binary's
# shared libraries by dpkg-shlibdeps. Then checks it with lintian and fails on
# any lintian error. docs/operations.md says how to install and run it.
# --binary packages an atomdb already built instead of building build-deb/
# (the package test uses it to package the binary under test).
set -euo pipefail
binary=
if [ "${1:-}" = --binary ]; then
  binary=$(realpath "${2:?--binary needs a path}")
  shift 2
fi
cd "$(dirname "$0")/.."
repo=$PWD
out=$(realpath -m "${1:-$repo/dist}")
build=${BUILD_DIR:-$repo/build-deb}
jobs=${JOBS:-2}
# who answers for the package: set DEB_MAINTAINER for a real release (the
# default's .invalid domain says there is no mailbox behind it)
maintainer=${DEB_MAINTAINER:-atomdb developers <atomdb@atomdb.invalid>}

version=$(sed -n 's/^project(atomdb VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "package-deb: no version in CMakeLists.txt's project()" >&2; exit 1; }
arch=$(dpkg --print-architecture)
for tool in dpkg-deb dpkg-shlibdeps lintian strip; do
  command -v "$tool" >/dev/null || {
    echo "package-deb: $tool is missing: run scripts/install-deps.sh (dpkg-dev, lintian, binutils)" >&2
    exit 1
  }
done

if [ -z "$binary" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWERROR=ON -DSANITIZE= \
    -DFAULT_INJECTION=OFF >/dev/null
  cmake --build "$build" -j "$jobs" --target atomdb
  binary=$build/atomdb
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -D -m 0755 "$binary" "$root/usr/bin/atomdb"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/atomdb"
install -D -m 0644 packaging/atomdb.conf "$root/etc/atomdb/atomdb.conf"
install -D -m 0644 packaging/atomdb.service "$root/lib/systemd/system/atomdb.service"
install -D -m 0644 packaging/atomdb.1 "$root/usr/share/man/man1/atomdb.1"
gzip -9n "$root/usr/share/man/man1/atomdb.1"
install -D -m 0644 packaging/deb/copyright "$root/usr/share/doc/atomdb/copyright"

# the changelog of a native package: this build's version and commit
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$root/usr/share/doc/atomdb/changelog" <<CHANGELOG
atomdb ($version) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $when
CHANGELOG
gzip -9n "$root/usr/share/doc/atomdb/changelog"

# Depends from the shared libraries the binary links (dpkg-shlibdeps reads
# the shlibs/symbols files of the installed -dev packages' libraries), plus
# the Snowball stop word lists text search reads at run time (src/doc/fts.c)
mkdir -p "$stage/src/debian"
printf 'Source: atomdb\n\nPackage: atomdb\nArchitecture: any\n' > "$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O -e"$root/usr/bin/atomdb" 2>/dev/null |
         sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -d -m 0755 "$root/DEBIAN"
for s in postinst prerm postrm; do
  install -m 0755 "packaging/deb/$s" "$root/DEBIAN/$s"
done
echo /etc/atomdb/atomdb.conf > "$root/DEBIAN/conffiles"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) \
  > "$root/DEBIAN/md5sums"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: atomdb
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $shlibs, adduser, liblingua-stopwords-perl
Section: database
Priority: optional
Description: document database server speaking the MongoDB wire protocol
 atomdb is a single-node document database that MongoDB drivers, mongosh and
 MongoDB's tools use as a one-member replica set: atomic single-document
 updates, snapshot (and serializable) transactions, lease locks with fencing
 tokens, a write-ahead log with snapshots, Prometheus metrics and a live
 status page.
CONTROL

mkdir -p "$out"
deb="$out/atomdb_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$root" "$deb" >/dev/null
echo "package-deb: built $deb"
# lintian: errors fail the build; warnings are printed
lintian --fail-on error --suppress-tags-from-file /dev/null "$deb" || {
  echo "package-deb: lintian reported errors" >&2
  exit 1
}
echo "package-deb: lintian found no errors"
