#!/bin/sh
# Fuzz one libFuzzer target for a fixed time: run_fuzzer.sh TARGET SECONDS [SEED...]
# Seeds (files or directories) are copied into a fresh corpus directory first, so the
# repository is never written to. Any crash, leak or sanitizer report fails the run.
set -eu
target=$1
seconds=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
for seed in "$@"; do
    if [ -d "$seed" ]; then cp -r "$seed"/. "$work/corpus/"; else cp "$seed" "$work/corpus/"; fi
done
# libFuzzer cuts every input, seeds included, to -max_len: at least the largest seed, so
# that a whole model or projector file is among the inputs and not only its first bytes
max_len=65536
for f in "$work/corpus"/*; do
    [ -f "$f" ] || continue
    size=$(wc -c < "$f")
    [ "$size" -le "$max_len" ] || max_len=$size
done
cd "$work"
exec "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 "$work/corpus"
