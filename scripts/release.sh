#!/usr/bin/env bash
# The production build and install, one script for the Dockerfile and for CI (issue 31), so the
# image is made by the same commands CI runs natively:
#   scripts/release.sh build            in a source tree with `npm ci` done: `npm run build`
#                                       (dist/server/main.js + dist/web)
#   scripts/release.sh assemble <dir>   a production install in <dir>: the build output, what it
#                                       reads at run time (prisma/, docs/public/, prisma.config.ts),
#                                       and `npm ci --omit=dev --ignore-scripts` (no dev dependency,
#                                       no install script: the Prisma client is already in the bundle)
# Then: cd <dir> && npm start (or node --enable-source-maps dist/server/main.js [--role=api|worker]).
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  build)
    npm run -s build
    ;;
  assemble)
    dir="${2:?usage: scripts/release.sh assemble <dir>}"
    test -f dist/server/main.js || { echo "release: no build (scripts/release.sh build first)" >&2; exit 1; }
    mkdir -p "$dir/scripts" "$dir/docs"
    cp package.json package-lock.json prisma.config.ts "$dir/"
    cp scripts/ensure-build.mjs scripts/build-stamp.mjs "$dir/scripts/"
    rm -rf "$dir/dist" "$dir/prisma" "$dir/docs/public"
    cp -r dist "$dir/dist"
    rm -rf "$dir/dist/.build-lock"
    cp -r prisma "$dir/prisma"
    cp -r docs/public "$dir/docs/public"
    (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
    echo "release: production install in $dir (node_modules $(du -sh "$dir/node_modules" | cut -f1))"
    ;;
  *)
    echo "usage: scripts/release.sh build | assemble <dir>" >&2
    exit 2
    ;;
esac
