#!/bin/sh
# Corral against llama.cpp on the same GGUF files: `corral bench` and llama.cpp's llama-bench
# in turn (one engine, then the other, the first of each round alternating), each run one
# repetition of every test after its own warm-up, so that both see the same load. Prints
# every run, then per file and test the median of the rounds for each engine, the ratio
# (Corral over llama.cpp; above 1 Corral is faster) and, for generation, the effective
# bandwidth of each engine (the bytes a generated token reads, as `corral bench` counts them:
# in a mixture of experts only the used experts' share) as a share of the read bandwidth
# measured by bench/bench_bandwidth at the same thread count before the file's rounds.
#
# llama-bench runs with what `corral bench` does: the given threads, no GPU layers, flash
# attention on (Corral's attention folds chunks of the cache with a running maximum), an F16
# KV cache, the file mapped, a prompt decoded as one batch (-ub 512, the largest prompt).
#
# Usage: LLAMA_BENCH=/path/to/llama-bench bench/vs_llamacpp.sh MODEL.gguf [MODEL.gguf ...]
# Environment: CORRAL_BIN (default build/release/corral), VS_ROUNDS (5), VS_THREADS (1,2),
#              VS_PROMPTS (128,512), VS_GEN (64), VS_LLAMA_ARGS (more llama-bench options)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORRAL=${CORRAL_BIN:-$ROOT/build/release/corral}
BANDWIDTH=$(dirname "$CORRAL")/bench/bench_bandwidth
ROUNDS=${VS_ROUNDS:-5}
THREADS=${VS_THREADS:-1,2}
PROMPTS=${VS_PROMPTS:-128,512}
GEN=${VS_GEN:-64}
if [ -z "${LLAMA_BENCH:-}" ] || [ $# -lt 1 ]; then
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
for tool in "$CORRAL" "$LLAMA_BENCH" "$BANDWIDTH"; do
    [ -x "$tool" ] || { echo "vs_llamacpp: $tool is not an executable" >&2; exit 2; }
done
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

# the largest prompt, so that llama.cpp decodes every prompt as one batch as Corral does
UBATCH=$(echo "$PROMPTS" | tr ',' '\n' | sort -n | tail -n 1)
[ "$UBATCH" -ge 1 ] 2>/dev/null || UBATCH=512

run_corral() { # file: "bytes MB" (read per generated token), "corral TEST THREADS T/S" per test
    "$CORRAL" bench "$1" -p "$PROMPTS" -n "$GEN" -t "$THREADS" -r 1 | awk -F'|' '
        /weights read per generated token/ { sub(/.*per generated token /, ""); sub(/ MB.*/, "");
                                             print "bytes", $0 }
        $2 ~ /^ *(pp|tg)[0-9]+ *$/ { gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4);
                                     print "corral", $2, $3, $4 }'
}

run_llama() { # file: "llama.cpp TEST THREADS T/S" per test
    # shellcheck disable=SC2086 # VS_LLAMA_ARGS is a list of options
    "$LLAMA_BENCH" -m "$1" -p "$PROMPTS" -n "$GEN" -t "$THREADS" -r 1 -ngl 0 -fa on \
        -b 2048 -ub "$UBATCH" -ctk f16 -ctv f16 -lm mmap -o jsonl ${VS_LLAMA_ARGS:-} 2>/dev/null |
        awk 'function field(name,   s) {
                 if (!match($0, "\"" name "\": *[0-9.eE+-]+")) return -1
                 s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); return s + 0 }
             { p = field("n_prompt"); g = field("n_gen"); t = field("n_threads");
               test = p > 0 ? "pp" p : "tg" g
               printf "llama.cpp %s %d %.2f\n", test, t, field("avg_ts") }'
}

bandwidth() { # threads: GB/s
    "$BANDWIDTH" "$1" | sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p'
}

echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
features=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -E '^(avx2|avx512f|avx512_vnni|avx512vbmi|avx512_bf16|avx_vnni|amx_int8)$' | tr '\n' ' ' | sed 's/ $//')
echo "family $family model $model; features: ${features:-none of avx2, avx512, amx}"
echo "corral: $CORRAL (tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown))"
echo "llama-bench: $LLAMA_BENCH, -ngl 0 -fa on -b 2048 -ub $UBATCH -ctk f16 -ctv f16 -lm mmap ${VS_LLAMA_ARGS:-}"
echo "tests: pp $PROMPTS, tg $GEN, threads $THREADS; $ROUNDS rounds, one run of each test per round"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for file in "$@"; do
    echo
    echo "== $file"
    : >"$RESULTS"
    for t in $(echo "$THREADS" | tr ',' ' '); do
        echo "bandwidth $t $(bandwidth "$t")" >>"$RESULTS"
    done
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        if [ $((round % 2)) -eq 1 ]; then
            run_corral "$file" | tee -a "$RESULTS"
            run_llama "$file" | tee -a "$RESULTS"
        else
            run_llama "$file" | tee -a "$RESULTS"
            run_corral "$file" | tee -a "$RESULTS"
        fi
        round=$((round + 1))
    done
    sort -k1,1 -k2,2 -k3,3n -k4,4n "$RESULTS" | awk -v rounds="$ROUNDS" '
        $1 == "bandwidth" { bw[$2] = $3; next }
        $1 == "bytes" { mb = $2; next }
        { key = $2 " " $3; v[$1, key, ++n[$1, key]] = $4; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key } }
        function median(engine, key,   c) {
            c = n[engine, key]
            if (c == 0) return 0
            return c % 2 ? v[engine, key, (c + 1) / 2] : (v[engine, key, c / 2] + v[engine, key, c / 2 + 1]) / 2
        }
        END {
            printf "weights read per generated token: %s MB; read bandwidth", mb
            for (t in bw) printf " %s GB/s at %s thread%s;", bw[t], t, t == 1 ? "" : "s"
            printf "\nmedians of %d rounds, t/s\n\n", rounds
            print "| test | threads | corral | llama.cpp | ratio | corral GB/s (% of read) | llama.cpp GB/s (% of read) |"
            print "|---|---:|---:|---:|---:|---:|---:|"
            for (i = 1; i <= nk; i++) {
                split(keys[i], k, " ")
                c = median("corral", keys[i]); l = median("llama.cpp", keys[i])
                ratio = l > 0 ? sprintf("%.2f", c / l) : "-"
                cg = lg = "-"
                if (k[1] ~ /^tg/ && mb > 0) {
                    cg = sprintf("%.1f", c * mb / 1000); lg = sprintf("%.1f", l * mb / 1000)
                    if (bw[k[2]] > 0) {
                        cg = cg sprintf(" (%.0f%%)", 100 * c * mb / 1000 / bw[k[2]])
                        lg = lg sprintf(" (%.0f%%)", 100 * l * mb / 1000 / bw[k[2]])
                    }
                }
                printf "| %s | %s | %.2f | %.2f | %s | %s | %s |\n", k[1], k[2], c, l, ratio, cg, lg
            }
        }'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
