#!/bin/sh
# The benchmark table of docs/PERFORMANCE.md: prints the CPU, the memory read bandwidth at 1
# and 2 threads, then `corral bench` (pp128, tg64 at 1 and 2 threads; pp512 at 2 threads for
# the L1B shapes; for L1B Q4_0, pp128 at depth 4096 at 1 and 2 threads and tg64 of 1 and of
# 4 sequences together at 2 threads) on each
# synthesized model. Models are made once, deterministically, in
# $CORRAL_BENCH_DIR (default /tmp/corral-bench), never in the repository.
# Usage: bench/run.sh [BUILD_DIR]   (default build/release; CORRAL_BIN overrides the binary,
#        CORRAL_BENCH_REPS the repetitions, CORRAL_BENCH_MODELS the list, e.g. "Q05B:Q4_0")
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
CORRAL=${CORRAL_BIN:-$BUILD/corral}
DIR=${CORRAL_BENCH_DIR:-/tmp/corral-bench}
REPS=${CORRAL_BENCH_REPS:-5}
MODELS=${CORRAL_BENCH_MODELS:-"L1B:Q4_0 L1B:Q8_0 L1B:Q4_K_M Q05B:Q4_0 Q05B:Q8_0"}
VOCAB=$ROOT/tests/fixtures/vocab-llama3-bpe.gguf

mkdir -p "$DIR"
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
# "AMD EPYC" names Zen 3 and Zen 4 alike under KVM: family, model and the vector features
# tell them apart (and which kernels run)
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
features=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_int8|amx_bf16)$' | tr '\n' ' ' | sed 's/ $//')
echo "family $family model $model; features: ${features:-none of avx2, avx512, amx}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bench/bench_bandwidth" 1
"$BUILD/bench/bench_bandwidth" 2
# whether the two threads share an L3, and what each placement reads (docs/PERFORMANCE.md)
"$BUILD/bench/bench_placement" 20 | tail -n 1
for spec in $MODELS; do
    shape=${spec%%:*}
    type=${spec#*:}
    file=$DIR/$shape-$type.gguf
    if [ ! -f "$file" ]; then
        echo "making $file"
        "$BUILD/bench/make_bench_model" "$shape" "$type" "$VOCAB" "$file"
    fi
    echo
    # the 2-thread figure can move within a minute (35 or 58 GB/s on one Zen 4 VM), so it
    # is read again before each model
    "$BUILD/bench/bench_bandwidth" 2 | sed 's/^/before the model: /'
    "$CORRAL" bench "$file" -p 128 -n 64 -t 1,2 -r "$REPS"
    if [ "$shape" = L1B ]; then
        "$CORRAL" bench "$file" -p 512 -n 0 -t 2 -r "$REPS" | tail -n 1
    fi
    # a prompt after a long conversation: attention over 4096 cached cells per token
    # (the cache filled once per test, untimed), then the issue's batching figure: 4
    # sequences decoding together against one, in-process (bench/bench_serve measures the
    # same through the server)
    if [ "$shape:$type" = L1B:Q4_0 ]; then
        "$CORRAL" bench "$file" -p 128 -n 0 -d 4096 -t 1,2 -r "$REPS" | tail -n 2
        "$CORRAL" bench "$file" -p 0 -n 64 -s 1,4 -t 2 -r "$REPS" | tail -n 2
    fi
done
echo
echo "after the models:"
"$BUILD/bench/bench_bandwidth" 2
"$BUILD/bench/bench_placement" 20 | tail -n 1
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
