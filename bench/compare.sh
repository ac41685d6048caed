#!/bin/sh
# Two corral binaries on one benchmark, in turn and in balanced order (A B B A per round):
# on a VM the first of two back-to-back runs can read faster (docs/PERFORMANCE.md, "How to
# measure"), so blocks of one binary, or always the same one first, bias the comparison.
# Prints each run's tokens/s per test, then per binary and test the median and the range.
# Usage: bench/compare.sh OLD_CORRAL NEW_CORRAL ROUNDS MODEL.gguf [corral bench options]
#   e.g. bench/compare.sh /tmp/corral-old build/release/corral 3 L1B-Q4_0.gguf -p 0 -n 32 -t 1
set -eu
if [ $# -lt 4 ]; then
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
OLD=$1
NEW=$2
ROUNDS=$3
shift 3
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

run() { # label binary args...: one `corral bench`, a "label test t/s" line per test
    label=$1
    binary=$2
    shift 2
    "$binary" bench "$@" | awk -F'|' -v label="$label" \
        '$2 ~ /^ *(pp|tg)/ { gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4);
                             print label, $2 "-" $3 "t", $4 }'
}

round=0
while [ "$round" -lt "$ROUNDS" ]; do
    run old "$OLD" "$@" | tee -a "$RESULTS"
    run new "$NEW" "$@" | tee -a "$RESULTS"
    run new "$NEW" "$@" | tee -a "$RESULTS"
    run old "$OLD" "$@" | tee -a "$RESULTS"
    round=$((round + 1))
done

echo
echo "binary test: median (min - max) of $((2 * ROUNDS)) runs, t/s"
sort -k1,1 -k2,2 -k3,3n "$RESULTS" | awk '
    function flush() {
        if (n > 0)
            printf "%s %s: %.2f (%.2f - %.2f)\n", key1, key2,
                   n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2, v[1], v[n]
    }
    $1 != key1 || $2 != key2 { flush(); key1 = $1; key2 = $2; n = 0 }
    { v[++n] = $3 }
    END { flush() }'
