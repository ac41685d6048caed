#!/bin/sh
# The GPU check for a machine that cannot build Corral: a lent GPU machine with no Debian
# packages and a limit on what travels to it. Binaries built here travel in packs with the
# libraries they load (the machine's own C library is used), and the fixtures travel in two
# parts, each under the limit; each part runs what its files allow.
#
#   bench/gpu_remote.sh pack PART   here: writes .gpu/ (ignored) for part `bench` or `arch`
#   bench/gpu_remote.sh run PART    there: unpacks .gpu/ and runs the part, logging to $OUT
#
# Part `bench`: `corral gpus`, test_vulkan_ops, the quant/ models through test_vulkan_forward
# and tiny-tolstoy's F16 through test_vulkan_forward (the quant/ models with and without
# integer dot products, and split across buffers), one matrix product
# timed (bench_vulkan_matmul; the IQ types' too), what recording a dispatch costs the host
# (bench_vulkan_dispatch), then `corral bench` pp512/tg128 on the GPU and on the CPU for
# the L1B shape at Q4_0, Q8_0 and Q4_K_M (made there, in parallel, while the tests run).
# Part `arch`: every other test_vulkan_forward test but part `more`'s (llama4's prompts of
# 8196 tokens past its first chunk among them, which lavapipe leaves out), the split experts
# and test_vulkan_graphs. Part `more`: the tests whose fixtures would take `arch` past the limit
# (gemma3n, gemma4's E and MoE files, mllama, jina-bert-v2's, the fitting estimates).
# The tests themselves are those of `make test`; docs/GPU.md says what each checks.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=$ROOT/.gpu
FIX=$ROOT/tests/fixtures
mode=${1:-}
part=${2:-}

arch_files() {
    for f in bert chatglm cohere2 command-r-plus command-r deepseek2 exaone exaone4 falcon-40b \
        falcon gemma gemma2 gemma3 glm4 glm4moe gpt-oss-mxfp4 gpt-oss granite granitemoe \
        internlm2 llama-gqa llama-moe llama-tied mistral3 nomic-bert olmo2 olmo3 phi2 \
        phi3-longrope phi3 qwen2 qwen2moe qwen3 qwen3moe qwen3vl qwen3vlmoe smollm3 \
        stablelm-parallel stablelm starcoder starcoder2 gemma4 gemma-embedding qwen3next \
        qwen35moe qwen35 granitehybrid granitehybrid-moe nemotron-h nemotron-h-moe lfm2 llama4 \
        nemotron lfm2moe jina-bert-v2 jina-bert-v2-code nomic-bert-moe laguna; do
        echo "arch/$f.gguf"
    done
    echo vision/gemma3-text.gguf
    echo vision/qwen25vl-text.gguf
    echo vision/gemma4v-text.gguf
    echo vision/llama4-text.gguf
    echo stories260K.gguf
    echo lora/adapter-f16-qv.gguf
}

# part `more`: its tests (MORE_TESTS) and the files they read
MORE_TESTS='test_gemma3n*,test_gemma4_per_layer*,test_gemma4_dense*,test_jina*,test_mllama*,test_fit_estimate*'
more_files() {
    for f in gemma3n gemma4-e gemma4-moe mllama jina-bert-v2 jina-bert-v2-code jina-bert-v2-split \
        llama-gqa qwen3moe gpt-oss deepseek2 gemma4 qwen35 lfm2 granitehybrid qwen3next \
        nemotron-h-moe nomic-bert-moe; do
        echo "arch/$f.gguf"
    done
    echo vision/mllama.gguf
    echo vision/mllama.wide.embd.f32
}

pack_binaries() { # name, files...
    name=$1
    shift
    tmp=$(mktemp -d)
    mkdir -p "$tmp/bin" "$tmp/lib"
    cp "$@" "$tmp/bin/"
    strip "$tmp"/bin/*
    for f in "$tmp"/bin/*; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libresolv|libpthread|libdl|librt)\.so' |
        while read -r lib; do cp -L "$lib" "$tmp/lib/"; done
    # the loader is opened at run time, and NVIDIA's driver needs glvnd's libraries
    for lib in libvulkan.so.1 libGLdispatch.so.0 libEGL.so.1 libGLX.so.0 libOpenGL.so.0 \
        libGL.so.1 libGLESv2.so.2; do
        cp -L "$(ldconfig -p | awk -v l=$lib '$1 == l {print $NF; exit}')" "$tmp/lib/"
    done
    tar cf - -C "$tmp" . | xz -T0 -9 >"$PACK/$name.txz"
    rm -rf "$tmp"
}

if [ "$mode" = pack ]; then
    B=$ROOT/build/release
    rm -rf "$PACK"
    mkdir -p "$PACK/fixtures"
    pack_binaries test "$B/tests/test_vulkan_ops" "$B/tests/test_vulkan_forward" \
        "$B/tests/test_vulkan_graphs"
    case $part in
    bench)
        pack_binaries corral "$B/corral" "$B/bench/bench_vulkan_matmul" \
            "$B/bench/bench_vulkan_dispatch" "$B/bench/make_bench_model"
        files="vocab-llama3-bpe.gguf tiny-tolstoy-f16.gguf $(cd "$FIX" && ls quant/*.gguf)" ;;
    arch) files=$(arch_files) ;;
    more) files=$(more_files) ;;
    *) echo "usage: $0 pack bench|arch|more" >&2; exit 2 ;;
    esac
    for f in $files; do
        mkdir -p "$PACK/fixtures/$(dirname "$f")"
        cp -l "$FIX/$f" "$PACK/fixtures/$f"
    done
    du -sh "$PACK"
    exit 0
fi

[ "$mode" = run ] || { echo "usage: $0 pack|run bench|arch|more" >&2; exit 2; }
OUT=${OUT:-/tmp}
G=/tmp/corral-gpu
mkdir -p "$G"
for p in "$PACK"/*.txz; do
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$p" "$G"
done
export LD_LIBRARY_PATH=$G/lib CORRAL_VULKAN_LOADER=$G/lib/libvulkan.so.1
export CORRAL_FIXTURES=$PACK/fixtures CORRAL_BIN=$G/bin/corral
# the driver's libraries are mounted there, but not in the loader's cache until ldconfig
ldconfig 2>/dev/null || true
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd \
    __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
exec >"$OUT/$part.log" 2>&1
step() { # seconds, name, command...
    limit=$1
    name=$2
    shift 2
    echo "=== $name ($(date -u +%T))"
    start=$(date +%s)
    timeout "$limit" "$@"
    echo "=== $name: rc=$? in $(($(date +%s) - start)) s"
}

echo "$(date -u +%Y-%m-%dT%H:%MZ); CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs"
grep PRETTY_NAME /etc/os-release
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
ls /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1
[ -x "$G/bin/corral" ] && step 30 "corral gpus" env VK_LOADER_DEBUG=error,driver "$G/bin/corral" gpus
T=$G/bin/test_vulkan_forward
if "$G/bin/test_vulkan_ops" >/dev/null 2>&1 </dev/null; [ $? = 77 ]; then
    echo "no usable Vulkan device: nothing more to run"
    cat "$icd"
    lib=$(ldconfig -p | awk '$1 == "libGLX_nvidia.so.0" {print $NF; exit}')
    echo "libGLX_nvidia.so.0: $lib"
    [ -n "$lib" ] && ldd "$lib"
    ls /usr/local/nvidia /usr/local/nvidia/lib64 2>&1 | head -60
    exit 1
fi
case $part in
bench)
    DIR=/tmp/corral-bench
    mkdir -p "$DIR"
    for type in Q4_0 Q8_0 Q4_K_M; do
        [ -f "$DIR/L1B-$type.gguf" ] ||
            "$G/bin/make_bench_model" L1B $type "$CORRAL_FIXTURES/vocab-llama3-bpe.gguf" \
                "$DIR/L1B-$type.gguf" >"$DIR/$type.log" 2>&1 &
    done
    step 120 test_vulkan_ops "$G/bin/test_vulkan_ops"
    step 120 "test_vulkan_forward quant" env CORRAL_TEST_FILTER='test_quant_*,test_tiny_tolstoy*' "$T"
    step 120 "test_vulkan_forward quant, no integer dot" \
        env CORRAL_TEST_FILTER='test_quant_*' CORRAL_VULKAN_NO_INT_DOT=1 "$T"
    step 60 "test_vulkan_forward split" \
        env CORRAL_TEST_FILTER=test_quant_q4_k_m CORRAL_VULKAN_SPLIT_BYTES=40000 "$T"
    step 60 "test_vulkan_forward what the device lacks" \
        env CORRAL_TEST_FILTER='test_what_the_device_lacks*' "$T"
    step 60 bench_vulkan_matmul "$G/bin/bench_vulkan_matmul" 20
    step 60 "bench_vulkan_matmul, no integer dot" env CORRAL_VULKAN_NO_INT_DOT=1 \
        "$G/bin/bench_vulkan_matmul" 20
    step 90 "bench_vulkan_matmul, IQ types" \
        "$G/bin/bench_vulkan_matmul" 20 iq4_xs iq2_xxs iq2_s iq3_s iq1_s
    step 30 bench_vulkan_dispatch "$G/bin/bench_vulkan_dispatch" 50
    echo "=== waiting for the models ($(date -u +%T))"
    wait
    cat "$DIR"/*.log
    for type in Q4_0 Q8_0 Q4_K_M; do
        f=$DIR/L1B-$type.gguf
        step 90 "bench $type vulkan" "$G/bin/corral" bench "$f" -p 512 -n 128 -r 3 --device vulkan
        step 90 "bench $type cpu" "$G/bin/corral" bench "$f" -p 512 -n 128 -r 3 --device cpu
    done ;;
arch)
    step 240 "test_vulkan_forward (quant/, tiny-tolstoy and part more's in the other parts)" \
        env CORRAL_TEST_SKIP="test_quant_*,test_tiny_tolstoy*,test_what_the_device_lacks*,$MORE_TESTS" "$T"
    step 60 "test_vulkan_forward split experts" \
        env CORRAL_TEST_FILTER=test_llama_moe CORRAL_VULKAN_SPLIT_BYTES=40000 "$T"
    step 120 test_vulkan_graphs "$G/bin/test_vulkan_graphs" ;;
more)
    step 240 "test_vulkan_forward (the tests of the larger fixtures)" \
        env CORRAL_TEST_FILTER="$MORE_TESTS" "$T" ;;
esac
echo "=== done ($(date -u +%T))"
