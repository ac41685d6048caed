#!/bin/sh
# LoRA adapters through the server (issue 44): `corral create` with ADAPTER lines uploads the
# adapters, stores them as adapter layers and /api/show lists them; /api/generate then gives
# the same greedy text as `corral infer --lora` (one F32 adapter; an F32 and an F16 one
# together), different from the base model's; an adapter for another model is refused at
# create with the tensor or the architecture named, and nothing is stored; new weights under a
# base model's adapter must fit it too.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
unset CORRAL_KV_CACHE_TYPE OLLAMA_KV_CACHE_TYPE CORRAL_CONTEXT_LENGTH OLLAMA_CONTEXT_LENGTH OLLAMA_HOST
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-lora.XXXXXX")
port=$(free_port)
base="http://127.0.0.1:$port"
export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
mkdir -p "$HOME"
"$CORRAL_BIN" serve 2>"$work/server.log" &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_for_url "$base/" || true

fail() { echo "FAIL: $*"; tail -20 "$work/server.log"; exit 1; }
expect() { grep -qF -- "$2" "$3" || fail "$1: expected '$2' in: $(cat "$3")"; ok "$1"; }

prompt="Once upon a time, there was a little girl"
mkdir -p "$work/src"
for f in arch/llama-gqa.gguf arch/llama-tied.gguf arch/qwen2.gguf lora/adapter-f32-r4.gguf \
         lora/adapter-f16-qv.gguf; do
    ln -s "$CORRAL_FIXTURES/$f" "$work/src/$(basename "$f")"
done

# create NAME MODELFILE_LINES...: corral create from a Modelfile of those lines
create() {
    name=$1
    shift
    printf '%s\n' "$@" > "$work/src/Modelfile"
    "$CORRAL_BIN" create "$name" -f "$work/src/Modelfile" >"$work/out" 2>&1
}

# generate MODEL: the greedy text of /api/generate for the prompt, as given (raw)
generate() {
    curl -s "$base/api/generate" -d "{\"model\": \"$1\", \"prompt\": \"$prompt\", \"raw\": true,
        \"stream\": false, \"options\": {\"temperature\": 0, \"num_predict\": 16}}" |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(r.get("response", r))'
}

# infer ARGS...: the greedy text of corral infer on the base model
infer() {
    "$CORRAL_BIN" infer "$work/src/llama-gqa.gguf" "$prompt" -n 16 --temperature 0 "$@" 2>/dev/null
}

create lora-f32 "FROM ./llama-gqa.gguf" "ADAPTER ./adapter-f32-r4.gguf" ||
    fail "create with ADAPTER: $(cat "$work/out")"
expect "create with an ADAPTER line" "success" "$work/out"
"$CORRAL_BIN" show lora-f32 --modelfile > "$work/show"
expect "show --modelfile lists the adapter" "ADAPTER $work/models/blobs/sha256-" "$work/show"
curl -s "$base/api/show" -d '{"model": "lora-f32"}' > "$work/show.json"
python3 - "$work/models" "$work/show.json" <<'EOF' || fail "adapter layer: $(cat "$work/show.json")"
import glob, json, sys
manifest = json.load(open(glob.glob(sys.argv[1] + "/manifests/*/*/lora-f32/latest")[0]))
types = [l["mediaType"] for l in manifest["layers"]]
assert types.count("application/vnd.ollama.image.adapter") == 1, types
assert types.count("application/vnd.ollama.image.model") == 1, types
EOF
ok "the adapter is a layer of its own media type"

generate lora-f32 > "$work/server.txt"
infer --lora "$work/src/adapter-f32-r4.gguf" > "$work/infer.txt"
cmp -s "$work/server.txt" "$work/infer.txt" ||
    fail "/api/generate '$(cat "$work/server.txt")' != infer --lora '$(cat "$work/infer.txt")'"
ok "/api/generate with the adapter is infer --lora's text"
infer > "$work/base.txt"
cmp -s "$work/server.txt" "$work/base.txt" && fail "the adapter changes nothing: $(cat "$work/base.txt")"
ok "the adapter changes the base model's text"

create lora-two "FROM ./llama-gqa.gguf" "ADAPTER ./adapter-f32-r4.gguf" \
    "ADAPTER ./adapter-f16-qv.gguf" || fail "create with two ADAPTERs: $(cat "$work/out")"
"$CORRAL_BIN" show lora-two --modelfile > "$work/show"
[ "$(grep -c '^ADAPTER ' "$work/show")" = 2 ] || fail "two ADAPTER lines: $(cat "$work/show")"
ok "show --modelfile lists both adapters"
generate lora-two > "$work/server.txt"
infer --lora "$work/src/adapter-f32-r4.gguf" --lora "$work/src/adapter-f16-qv.gguf:1" > "$work/infer.txt"
cmp -s "$work/server.txt" "$work/infer.txt" ||
    fail "two adapters: /api/generate '$(cat "$work/server.txt")' != infer '$(cat "$work/infer.txt")'"
ok "/api/generate with two adapters is infer's text with both"

# a model made FROM an adapted one keeps its adapter
create lora-child "FROM lora-f32" "PARAMETER temperature 0" || fail "create FROM lora-f32: $(cat "$work/out")"
generate lora-child > "$work/child.txt"
infer --lora "$work/src/adapter-f32-r4.gguf" > "$work/infer.txt"
cmp -s "$work/child.txt" "$work/infer.txt" || fail "FROM an adapted model: '$(cat "$work/child.txt")'"
ok "a model made from an adapted one keeps the adapter"

# refusals: nothing is created
create bad "FROM ./qwen2.gguf" "ADAPTER ./adapter-f32-r4.gguf" && fail "adapter on qwen2 accepted"
expect "an adapter for another architecture is refused" "the adapter is for architecture 'llama', the model is 'qwen2'" "$work/out"
create bad "FROM ./llama-tied.gguf" "ADAPTER ./adapter-f32-r4.gguf" && fail "adapter on llama-tied accepted"
expect "an adapter that does not fit is refused, naming the tensor" "'adapter-f32-r4.gguf': adapter tensors for 'blk.0.attn_q.weight' do not fit it" "$work/out"
create bad "FROM ./llama-gqa.gguf" "ADAPTER ./llama-gqa.gguf" && fail "a model as adapter accepted"
expect "a model given as adapter is refused" "'llama-gqa.gguf' is not an adapter" "$work/out"
"$CORRAL_BIN" list > "$work/out"
grep -q "^bad" "$work/out" && fail "a refused create left a model: $(cat "$work/out")"
ok "refused creates store no model"

# /api/create directly: 400 with the tensor named; 404 for a blob never uploaded
digest=sha256:$(sha256sum "$work/src/adapter-f32-r4.gguf" | cut -d' ' -f1)
model_digest=sha256:$(sha256sum "$work/src/llama-tied.gguf" | cut -d' ' -f1)
curl -s -o /dev/null -X POST --data-binary @"$work/src/llama-tied.gguf" "$base/api/blobs/$model_digest"
status=$(curl -s -o "$work/body" -w '%{http_code}' "$base/api/create" -d "{\"model\": \"bad\",
    \"files\": {\"m.gguf\": \"$model_digest\"}, \"adapters\": {\"a.gguf\": \"$digest\"}}")
[ "$status" = 400 ] || fail "/api/create with a misfit adapter: $status $(cat "$work/body")"
expect "/api/create: 400 naming the tensor" "'a.gguf': adapter tensors for 'blk.0.attn_q.weight' do not fit it" "$work/body"
status=$(curl -s -o "$work/body" -w '%{http_code}' "$base/api/create" -d "{\"model\": \"bad\",
    \"files\": {\"m.gguf\": \"$model_digest\"}, \"adapters\": {\"a.gguf\": \"sha256:$(printf '%064d' 0)\"}}")
[ "$status" = 404 ] || fail "/api/create with an adapter not uploaded: $status $(cat "$work/body")"
ok "/api/create: 404 for an adapter blob not uploaded"
status=$(curl -s -o "$work/body" -w '%{http_code}' "$base/api/create" -d "{\"model\": \"bad\",
    \"adapters\": {\"a.gguf\": \"$digest\"}}")
[ "$status" = 400 ] || fail "/api/create with only an adapter: $status $(cat "$work/body")"
ok "/api/create: an adapter without a model is a 400"
status=$(curl -s -o "$work/body" -w '%{http_code}' "$base/api/create" -d "{\"model\": \"bad\",
    \"from\": \"lora-f32\", \"files\": {\"m.gguf\": \"$model_digest\"}}")
[ "$status" = 400 ] || fail "new weights under the base's adapter: $status $(cat "$work/body")"
expect "/api/create: the base's adapter must fit new weights" "the base model's adapter: adapter tensors for 'blk.0.attn_q.weight' do not fit it" "$work/body"
