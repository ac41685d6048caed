#!/bin/sh
# `make test`: every preset built and every test run (the release build's tests, clang's
# warnings check, the sanitizer build's tests, the fuzzers), with the packages already
# installed (`make deps`). Exits non-zero when a build or a test fails.
#
# A test run leaves much of the machine idle: the integration tests wait on servers and
# clients, and many unit tests on a runner they started. So the next presets build beside
# each run at the lowest priority (nice 19), on what the tests leave: clang's check and the
# sanitizer build beside the release tests, the fuzzers beside the sanitizer tests. The tests
# keep the cores whenever they want them; a build not finished when its run ends goes on at
# full speed before the next run. A background build's output goes to build/NAME.log, shown
# if it fails.
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
background=""
# a background build is a process group of its own (setsid), stopped whole if this ends early
trap '[ -z "$background" ] || kill -- "-$background" 2>/dev/null || true' EXIT
trap 'exit 1' INT TERM HUP

# build_in_background NAME PRESET...: configure and build each preset in turn, niced, as one
# background job
build_in_background() {
    name=$1
    shift
    setsid nice -n 19 sh -c 'for preset; do
        cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" || exit 1
    done' sh "$@" >"build/$name.log" 2>&1 &
    background=$!
}

# wait_for_background NAME: its status; its log on failure
wait_for_background() {
    if wait "$background"; then
        background=""
        echo "build/$1.log: built"
    else
        background=""
        cat "build/$1.log"
        echo "build/$1.log: the build failed" >&2
        exit 1
    fi
}

# The npm clients install (tests/integration/npm_install.sh) beside the first build, where
# it waits on the network and the disk while the compiler has the cores; best effort, since
# the integration tests' own setup installs whatever is still missing, and says why it failed.
cmake --preset release >/dev/null
npm=""
if command -v npm >/dev/null; then
    tests/integration/npm_install.sh build/npm-clients npm >build/npm-clients.log 2>&1 &
    npm=$!
fi
cmake --build --preset release
[ -z "$npm" ] || wait "$npm" || true

build_in_background clang-and-asan clang asan
ctest --preset release -j3
wait_for_background clang-and-asan

build_in_background fuzz fuzz
ctest --preset asan -j3
wait_for_background fuzz

ctest --preset fuzz -j2
