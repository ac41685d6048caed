#!/bin/sh
# Compiler and linker launcher of the clang preset, which is a warnings check: clang's
# warnings come from its front end, so each file is parsed and checked (-fsyntax-only, the
# dependency file still written) and no code is generated. An empty file stands in for each
# object and, with --link first, for each linked program, so the build's steps complete.
# CMakePresets.json names it; nothing it produces can run.
set -eu
link=0
if [ "${1:-}" = --link ]; then
    link=1
    shift
fi
out= prev=
for arg in "$@"; do
    [ "$prev" = -o ] && out=$arg
    prev=$arg
done
[ "$link" = 1 ] || "$@" -fsyntax-only
[ -z "$out" ] || : >"$out"
