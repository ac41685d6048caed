#!/bin/sh
# The npm clients the integration tests drive (package-lock.json), installed once for every
# build preset: `npm ci` into SHARED, a directory outside the build trees, again only when the
# lock file changes. Each build's integration directory IT links its node_modules there; Node
# resolves the packages through the link. Without IT it only installs (`make test` starts that
# beside the first build, whose compiling leaves the network and the disk idle).
# Usage: npm_install.sh SHARED NPM [IT]
set -eu
here=$(dirname "$0")
shared=$1
npm=$2
it=${3:-}
mkdir -p "$shared"
exec 9>"$shared/.lock"
flock 9 # two presets' tests may start at once
if ! cmp -s "$here/package-lock.json" "$shared/installed-lock.json" || [ ! -d "$shared/node_modules" ]; then
    rm -f "$shared/installed-lock.json"
    cp "$here/package.json" "$here/package-lock.json" "$shared/"
    (cd "$shared" && "$npm" ci --no-audit --no-fund --loglevel=error)
    cp "$here/package-lock.json" "$shared/installed-lock.json"
fi
[ -n "$it" ] || exit 0
rm -rf "$it/node_modules"
ln -s "$shared/node_modules" "$it/node_modules"
