#!/bin/sh
# The npm clients the integration tests drive (package-lock.json), installed once for every
# build preset: `npm ci` into SHARED, a directory outside the build trees, again only when the
# lock file changes. Each build's integration directory IT links its node_modules there; Node
# resolves the packages through the link.
# Usage: npm_install.sh SHARED IT NPM
set -eu
shared=$1
it=$2
npm=$3
mkdir -p "$shared"
exec 9>"$shared/.lock"
flock 9 # two presets' tests may start at once
if ! cmp -s "$it/package-lock.json" "$shared/installed-lock.json" || [ ! -d "$shared/node_modules" ]; then
    rm -f "$shared/installed-lock.json"
    cp "$it/package.json" "$it/package-lock.json" "$shared/"
    (cd "$shared" && "$npm" ci --no-audit --no-fund --loglevel=error)
    cp "$it/package-lock.json" "$shared/installed-lock.json"
fi
rm -rf "$it/node_modules"
ln -s "$shared/node_modules" "$it/node_modules"
