#!/bin/sh
# Corral's 1-token matrix kernels against ggml's (llama.cpp's CPU backend) on this CPU, one
# thread: bench/ggml_matvec.c is compiled against a ggml build given here, then it and
# `bench_quant --min` run in turn, ROUNDS rounds each, and the in-cache figures (weights in
# L2, where a kernel's arithmetic and not the memory sets its speed) are put side by side
# with their ratio (Corral over ggml). ggml's sample includes its quantization of the
# activation row and its graph dispatch, a few microseconds of a 40 us product, which
# bench_quant's does not: read ratios within about 5% as equal. The memory columns need a
# quiet machine (ggml's are whole 1 GiB passes, bench_quant's the least of its slices).
#
# Usage: bench/vs_ggml_kernels.sh GGML_SOURCE GGML_LIBS [ROUNDS [TYPE ...]]
#   GGML_SOURCE: a ggml or llama.cpp checkout (its ggml/ or top directory with include/)
#   GGML_LIBS:   the directory holding its built libggml*.so (CPU backend built in)
#   Environment: CORRAL_BUILD (default build/release)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CORRAL_BUILD:-$ROOT/build/release}
if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
SRC=$1
LIBS=$2
ROUNDS=${3:-20}
[ $# -ge 3 ] && shift 3 || shift 2
TYPES=${*:-"q4_0 q8_0 q4_K q5_K q6_K"}
INCLUDE=$SRC/include
[ -f "$INCLUDE/ggml.h" ] || INCLUDE=$SRC/ggml/include
[ -f "$INCLUDE/ggml.h" ] || { echo "vs_ggml_kernels: no ggml.h under $SRC" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -o "$TMP/ggml_matvec" "$ROOT/bench/ggml_matvec.c" -I"$INCLUDE" \
    -L"$LIBS" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$LIBS"

echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086 # the types are words
"$TMP/ggml_matvec" "$ROUNDS" $TYPES 2>/dev/null | tee "$TMP/ggml.txt"
# shellcheck disable=SC2086
"$BUILD/bench/bench_quant" --min "$ROUNDS" $TYPES | tee "$TMP/corral.txt"
echo
echo "in cache, 1 thread, GB/s of weights at the least: Corral, ggml, Corral / ggml"
awk 'FNR == NR { if ($2 ~ /^[0-9.]+$/) ggml[$1] = $2; next }
     ($1 in ggml) && $4 ~ /^[0-9.]+$/ {
         printf "%-6s %7.1f %7.1f %6.2fx\n", $1, $4, ggml[$1], $4 / ggml[$1] }' \
    "$TMP/ggml.txt" "$TMP/corral.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
