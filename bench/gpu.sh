#!/bin/sh
# The GPU check, in one go on a machine with a Vulkan GPU: builds the release preset, lists
# the devices (`corral gpus`), runs the Vulkan tests on the real device (a GPU ranks before
# lavapipe, which the tests also allow), times one 2048 x 2048 matrix product with and
# without integer dot products (bench_vulkan_matmul; the IQ types' kernels too, with them),
# and what recording a dispatch costs the host (bench_vulkan_dispatch), then `corral bench`
# pp512 and tg128 with every layer on the GPU for the Llama-3.2-1B shape (L1B) at Q4_0, Q8_0
# and Q4_K_M, and the same on the CPU for comparison. The GB/s column of a tg row is the weights read per token times the
# tokens per second: set it against the GPU's memory bandwidth (docs/PERFORMANCE.md).
# Models are made once, deterministically, in $CORRAL_BENCH_DIR (default /tmp/corral-bench).
# Usage: bench/gpu.sh   (CORRAL_BENCH_REPS repetitions, default 5; CORRAL_BENCH_MODELS the
#        list, default "L1B:Q4_0 L1B:Q8_0 L1B:Q4_K_M"; CORRAL_GPU_CPU_TOO=0 skips the CPU rows)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build/release
DIR=${CORRAL_BENCH_DIR:-/tmp/corral-bench}
REPS=${CORRAL_BENCH_REPS:-5}
MODELS=${CORRAL_BENCH_MODELS:-"L1B:Q4_0 L1B:Q8_0 L1B:Q4_K_M"}
VOCAB=$ROOT/tests/fixtures/vocab-llama3-bpe.gguf

cd "$ROOT"
cmake --preset release >/dev/null
cmake --build --preset release
echo "$(date -u +%Y-%m-%dT%H:%MZ); CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs"
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$BUILD/corral" gpus
ctest --test-dir "$BUILD" -R 'test_vulkan' --output-on-failure
# one matrix product, with the device's integer dot products and without them
"$BUILD/bench/bench_vulkan_matmul" 20
CORRAL_VULKAN_NO_INT_DOT=1 "$BUILD/bench/bench_vulkan_matmul" 20
# the IQ types (their lookup tables: IQ4's values, the lattice grids)
"$BUILD/bench/bench_vulkan_matmul" 20 iq4_xs iq2_xxs iq2_s iq3_s iq1_s
"$BUILD/bench/bench_vulkan_dispatch" 50

mkdir -p "$DIR"
for spec in $MODELS; do
    shape=${spec%%:*}
    type=${spec#*:}
    file=$DIR/$shape-$type.gguf
    if [ ! -f "$file" ]; then
        echo "making $file"
        "$BUILD/bench/make_bench_model" "$shape" "$type" "$VOCAB" "$file"
    fi
    echo
    # a model whose weight types the device kernels lack fails here with the reason, and
    # the script goes on to the next
    "$BUILD/corral" bench "$file" -p 512 -n 128 -r "$REPS" --device vulkan || true
    if [ "${CORRAL_GPU_CPU_TOO:-1}" != 0 ]; then
        "$BUILD/corral" bench "$file" -p 512 -n 128 -r "$REPS" --device cpu | tail -n 2
    fi
done
