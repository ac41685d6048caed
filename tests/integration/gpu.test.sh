#!/bin/sh
# The server with a model on a GPU, under Mesa's lavapipe (CORRAL_VULKAN_ALLOW_CPU=1): a chat
# without options.num_gpu (as many layers as fit, ollama's default) gives the greedy text of
# `corral infer` on the CPU, /api/ps reports the bytes on the GPU (size_vram) and `corral ps`
# the split; with num_gpu 0 the model stays on the CPU (size_vram 0, "100% CPU"). At start the server logs the devices it found and the
# one it chose. Without a Vulkan loader (CORRAL_VULKAN_LOADER naming none), `corral infer
# --device vulkan` runs on the CPU with one log line saying so, and `corral serve` logs one
# line that no GPU is usable; each load then says it runs on the CPU, a warning only when
# num_gpu asked for layers by number. Skipped (77) on a machine without a Vulkan device.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
unset CORRAL_KV_CACHE_TYPE OLLAMA_KV_CACHE_TYPE CORRAL_CONTEXT_LENGTH OLLAMA_CONTEXT_LENGTH OLLAMA_HOST
export CORRAL_VULKAN_ALLOW_CPU=1
"$CORRAL_BIN" gpus | grep -q chosen || { echo "skipped: no Vulkan device"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-gpu.XXXXXX")
port=$(free_port)
base="http://127.0.0.1:$port"
export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
mkdir -p "$HOME" "$work/src"
"$CORRAL_BIN" serve 2>"$work/server.log" &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_for_url "$base/" || true

fail() { echo "FAIL: $*"; tail -20 "$work/server.log"; exit 1; }

# wait_log FILE PATTERN: whether the log gets a line matching PATTERN within 10 s
wait_log() {
    for _ in $(seq 100); do grep -q "$2" "$1" && return 0; sleep 0.1; done
    return 1
}
# at start the server logs each Vulkan device (name, type, memory) and the one it chose
wait_log "$work/server.log" 'msg="inference compute" library=vulkan id=[0-9]* name="[^"]*" type=[a-z]* total="[0-9.]* GiB" available="[0-9.]* GiB" use=chosen' ||
    fail "no start-up line for the chosen device"
ok "serve logs the device it chose: $(grep -m1 'use=chosen' "$work/server.log" | sed 's/.*msg=//')"

prompt="Once upon a time, there was a little girl"
ln -s "$CORRAL_FIXTURES/arch/llama-gqa.gguf" "$work/src/llama-gqa.gguf"
printf 'FROM ./llama-gqa.gguf\n' > "$work/src/Modelfile"
"$CORRAL_BIN" create gqa -f "$work/src/Modelfile" >"$work/out" 2>&1 || fail "create: $(cat "$work/out")"

# generate OPTIONS: the greedy text of /api/generate for the prompt (raw)
generate() {
    curl -s "$base/api/generate" -d "{\"model\": \"gqa\", \"prompt\": \"$prompt\", \"raw\": true,
        \"stream\": false, \"options\": {\"temperature\": 0, \"num_predict\": 16 $1}}" |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(r.get("response", r))'
}
# vram: size_vram and size of the loaded model in /api/ps
vram() {
    curl -s "$base/api/ps" | python3 -c '
import json, sys
m = json.load(sys.stdin)["models"][0]
print(m["size_vram"], m["size"])'
}

"$CORRAL_BIN" infer "$work/src/llama-gqa.gguf" "$prompt" -n 16 --temperature 0 2>/dev/null > "$work/cpu.txt"

generate ', "num_gpu": 0' > "$work/plain.txt"
cmp -s "$work/plain.txt" "$work/cpu.txt" || fail "CPU chat '$(cat "$work/plain.txt")' != infer '$(cat "$work/cpu.txt")'"
[ "$(vram | cut -d' ' -f1)" = 0 ] || fail "with num_gpu 0 size_vram is $(vram)"
"$CORRAL_BIN" ps > "$work/ps" 2>&1
grep -q "100% CPU" "$work/ps" || fail "corral ps with num_gpu 0: $(cat "$work/ps")"
ok "with num_gpu 0 the model runs on the CPU"

generate "" > "$work/gpu.txt"
cmp -s "$work/gpu.txt" "$work/cpu.txt" || fail "GPU chat '$(cat "$work/gpu.txt")' != infer '$(cat "$work/cpu.txt")'"
ok "without num_gpu (as many layers as fit) the greedy text is the CPU's"
read -r size_vram size <<EOF2
$(vram)
EOF2
[ "$size_vram" -gt 0 ] || fail "size_vram is $size_vram without num_gpu"
ok "/api/ps: size_vram $size_vram of $size bytes"
"$CORRAL_BIN" ps > "$work/ps" 2>&1
grep -q "GPU" "$work/ps" || fail "corral ps without num_gpu: $(cat "$work/ps")"
ok "corral ps shows the split: $(grep gqa "$work/ps" | tr -s ' ')"

CORRAL_VULKAN_LOADER=/nonexistent/libvulkan.so.1 "$CORRAL_BIN" infer "$work/src/llama-gqa.gguf" \
    "$prompt" -n 16 --temperature 0 --device vulkan >"$work/noloader.txt" 2>"$work/noloader.err" ||
    fail "infer without a loader: $(cat "$work/noloader.err")"
cmp -s "$work/noloader.txt" "$work/cpu.txt" || fail "without a loader: '$(cat "$work/noloader.txt")'"
[ "$(grep -c 'running on the CPU: no Vulkan loader' "$work/noloader.err")" = 1 ] ||
    fail "without a loader, the log: $(cat "$work/noloader.err")"
ok "without a Vulkan loader infer runs on the CPU with one log line"

noport=$(free_port)
CORRAL_HOST="127.0.0.1:$noport" CORRAL_VULKAN_LOADER=/nonexistent/libvulkan.so.1 \
    "$CORRAL_BIN" serve 2>"$work/noloader-server.log" &
noserver=$!
wait_log "$work/noloader-server.log" 'msg="no compatible GPUs were discovered, models run on the CPU" reason="no Vulkan loader' ||
    { kill "$noserver"; fail "without a loader, serve logs: $(cat "$work/noloader-server.log")"; }
# a load says why it runs on the CPU: a warning only when num_gpu asked for layers by number
gpu_base=$base
base="http://127.0.0.1:$noport"
generate "" > "$work/noloader-any.txt"
generate ', "num_gpu": 2, "num_ctx": 1024' > "$work/noloader-two.txt"
base=$gpu_base
kill "$noserver"
wait "$noserver" 2>/dev/null || true
[ "$(grep -c 'msg="inference compute"' "$work/noloader-server.log")" = 0 ] ||
    fail "without a loader, serve lists devices: $(cat "$work/noloader-server.log")"
ok "without a Vulkan loader serve logs one line that no GPU is usable"
cmp -s "$work/noloader-any.txt" "$work/cpu.txt" && cmp -s "$work/noloader-two.txt" "$work/cpu.txt" ||
    fail "without a loader: '$(cat "$work/noloader-any.txt")', '$(cat "$work/noloader-two.txt")'"
[ "$(grep 'running on the CPU: no Vulkan loader' "$work/noloader-server.log" | grep -c 'level=INFO.* model=gqa')" = 1 ] &&
    [ "$(grep 'running on the CPU: no Vulkan loader' "$work/noloader-server.log" | grep -c 'level=WARN.* model=gqa')" = 1 ] ||
    fail "without a loader, the loads' lines: $(grep 'running on the CPU' "$work/noloader-server.log")"
ok "without a loader a load logs INFO, and WARN when num_gpu asked for layers"
