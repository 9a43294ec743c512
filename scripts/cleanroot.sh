#!/usr/bin/env bash
# Proves the README's two commands on a clean Debian 12 root filesystem: a
# fresh clone of one revision, inside a chroot that holds only what a new
# machine of the project's kind has, runs command 1 (server answers a ping,
# then stops) and command 2 (bash scripts/test.sh). docs/testing.md explains.
#
# usage (as root): bash scripts/cleanroot.sh [--root DIR] [--rev REV] [--rebuild-base]
#   --root DIR      the chroot (default: ../cleanroot beside the repository);
#                   DIR-base.tar.zst beside it keeps the prepared base
#   --rev REF       the branch, tag or HEAD to clone (default HEAD)
#   --rebuild-base  make the base again (debootstrap) instead of reusing it
# Needs debootstrap (apt-get install debootstrap); it is no project dependency.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
root="$repo/../cleanroot"
rev=HEAD
rebuild=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    --rebuild-base) rebuild=1; shift ;;
    *) echo "cleanroot: unknown argument $1" >&2; exit 2 ;;
  esac
done
root=$(realpath -m "$root")
base="$root-base.tar.zst"
log() { printf 'cleanroot: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "cleanroot: must run as root (debootstrap, mount, chroot)" >&2
  exit 1
fi
if [ "$root" = / ] || [ -z "$root" ]; then
  echo "cleanroot: refusing root directory $root" >&2
  exit 1
fi
commit=$(git rev-parse --verify "$rev^{commit}")
git rev-parse --symbolic-full-name "$rev" | grep -q . || {
  echo "cleanroot: --rev must name a ref (a branch, a tag or HEAD), not a bare commit" >&2
  exit 2
}

mounts=(proc sys dev dev/pts dev/shm)
unmount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    if mountpoint -q "$root/${mounts[$i]}"; then
      umount "$root/${mounts[$i]}" || umount -l "$root/${mounts[$i]}"
    fi
  done
}
mount_all() {
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  mount --bind /dev/shm "$root/dev/shm"
}
# A login-like environment: none of this shell's variables leak in.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# Empties the root. Never while anything is mounted below it: rm would walk
# into the bind-mounted /dev of the machine itself.
remove_root() {
  unmount_all
  if awk -v r="$root/" 'index($2 "/", r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    echo "cleanroot: something is still mounted under $root; not removing it" >&2
    exit 1
  fi
  rm -rf --one-file-system "$root"
}

# The image's Node.js, packed again from its installed files as a .deb (the
# package file itself is not kept on the machine). Its npm is the one the
# machine runs, upgraded at start-up, not the one the .deb first held.
pack_image_node() {
  local out=$1 stage
  stage=$(mktemp -d)
  mkdir -p "$stage/DEBIAN"
  dpkg -L nodejs | grep -v '^/usr/lib/node_modules/' | while read -r f; do
    if [ -d "$f" ] && [ ! -L "$f" ]; then mkdir -p "$stage$f"; else cp -a "$f" "$stage$f"; fi
  done
  mkdir -p "$stage/usr/lib/node_modules" "$stage/usr/bin"
  cp -a /usr/lib/node_modules/. "$stage/usr/lib/node_modules/"
  cp -a /usr/bin/npm /usr/bin/npx "$stage/usr/bin/"
  [ -e /usr/bin/corepack ] && cp -a /usr/bin/corepack "$stage/usr/bin/"
  dpkg -s nodejs | grep -v '^Status:' | sed '/^Conffiles:/,$d' \
    | sed "s/^Installed-Size: .*/Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)/" \
    > "$stage/DEBIAN/control"
  local s
  for s in preinst postinst prerm postrm; do
    [ -f "/var/lib/dpkg/info/nodejs.$s" ] && cp "/var/lib/dpkg/info/nodejs.$s" "$stage/DEBIAN/$s"
  done
  dpkg-deb --root-owner-group -Zxz -z1 --build "$stage" "$out" >/dev/null
  rm -rf "$stage"
}

make_base() {
  command -v debootstrap >/dev/null || {
    echo "cleanroot: debootstrap is missing: apt-get install debootstrap" >&2
    exit 1
  }
  local sources=/etc/apt/sources.list.d/debian.sources mirror
  mirror=$(sed -n 's/^URIs: *//p' "$sources" | head -n 1)
  log "debootstrap --variant=minbase bookworm $root (mirror from $sources)"
  remove_root
  debootstrap --variant=minbase bookworm "$root" "$mirror"
  # The same archive suites as this machine: bookworm, -updates, -security.
  cp "$sources" "$root/etc/apt/sources.list.d/debian.sources"
  rm -f "$root/etc/apt/sources.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount_all
  # This machine's TLS trust (its network presents its own CA): part of the
  # machine, not of the project, so the root gets it as the machine has it.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  if [ -f /usr/etc/npmrc ]; then
    mkdir -p "$root/usr/etc" && cp /usr/etc/npmrc "$root/usr/etc/npmrc"
  fi
  # git to clone with; what a new machine of this kind has as Node.js.
  in_root apt-get update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    git ca-certificates >/dev/null
  in_root update-ca-certificates >/dev/null
  if dpkg-query -W -f='${db:Status-Status}' nodejs 2>/dev/null | grep -qx installed; then
    log "installing this machine's Node.js $(node --version) (nodejs $(dpkg-query -W -f='${Version}' nodejs), repacked)"
    pack_image_node "$root/tmp/nodejs-image.deb"
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      /tmp/nodejs-image.deb >/dev/null
    rm -f "$root/tmp/nodejs-image.deb"
  else
    log "this machine has no nodejs package: the root gets no Node.js"
  fi
  in_root apt-get clean
  unmount_all
  log "saving the base as $base"
  tar --zstd --one-file-system -C "$root" -cpf "$base" .
}

if [ "$rebuild" -eq 1 ] || [ ! -f "$base" ]; then
  make_base
else
  log "restoring $root from $base"
  remove_root
  mkdir -p "$root"
  tar --zstd -C "$root" -xpf "$base"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount_all

# The revision to test, as a bundle to clone from; shared/ beside the clone,
# as the developers and CI have it.
mkdir -p "$root/srv" "$root/root/work"
git bundle create "$root/srv/atomdb.bundle" "$rev" 2>/dev/null
if [ -d "$repo/../shared" ]; then
  cp -r "$repo/../shared" "$root/root/work/shared"
fi

cat > "$root/root/readme-commands.sh" <<EOF
#!/bin/bash
# Generated by scripts/cleanroot.sh: the README's two commands in a fresh clone.
set -u
cd /root/work && git clone -q --no-checkout /srv/atomdb.bundle atomdb && cd atomdb && git checkout -q $commit
echo "clone: \$(git log --oneline -1)"
echo "node: \$(node --version 2>&1 || true), npm: \$(npm --version 2>&1 || true)"

t0=\$SECONDS
( bash scripts/install-deps.sh && cmake -S . -B build && cmake --build build -j2 && ./build/atomdb --dbpath ./data ) \\
  > /root/command1.log 2>&1 &
pid=\$!
# atomdb logs "Waiting for connections" (mongod's JSON line) once it listens.
until grep -q "Waiting for connections" /root/command1.log 2>/dev/null; do
  if ! kill -0 \$pid 2>/dev/null; then
    echo "command 1 ended before the server listened:"; tail -40 /root/command1.log; exit 1
  fi
  if [ \$((SECONDS - t0)) -gt 3600 ]; then
    echo "command 1: no server listening after an hour:"; tail -40 /root/command1.log; exit 1
  fi
  sleep 1
done
echo "command 1: server listening after \$((SECONDS - t0)) s"
/usr/bin/python3 -c "
import pymongo
c = pymongo.MongoClient('mongodb://127.0.0.1:27017/?directConnection=true', serverSelectionTimeoutMS=5000)
print('command 1: ping answered', c.admin.command('ping'))
c.close()"
ping_rc=\$?
# bash runs the subshell's last command in its place: \$pid is atomdb itself.
srv=\$pid
[ "\$(cat /proc/\$pid/comm 2>/dev/null)" = atomdb ] || srv=\$(pgrep -P \$pid -x atomdb)
kill -TERM \$srv
wait \$pid
echo "command 1: atomdb exited with status \$? after SIGTERM"
[ \$ping_rc -eq 0 ] || exit 1

t0=\$SECONDS
bash scripts/test.sh
rc=\$?
echo "command 2: bash scripts/test.sh exited \$rc after \$((SECONDS - t0)) s"
exit \$rc
EOF
chmod +x "$root/root/readme-commands.sh"

log "running the README's two commands on $commit inside $root"
t0=$SECONDS
set +e
in_root bash /root/readme-commands.sh 2>&1 | tee "$root/root/readme-commands.log"
rc=${PIPESTATUS[0]}
set -e
log "done in $((SECONDS - t0)) s with exit status $rc (log: $root/root/readme-commands.log)"
exit "$rc"
