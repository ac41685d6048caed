#!/bin/sh
# The model families through a real `corral serve`: for each of FAMILIES, create from its tiny
# arch/ GGUF, check that `corral show` and /api/show describe it (architecture, parameter count,
# context length), that /api/generate continues the reference input with llama.cpp's greedy
# ids (F32 KV cache, as the references were made), and that a q4_K_M copy made by
# `corral create --quantize` loads and generates.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
FAMILIES="starcoder2 cohere2 exaone4 glm4"
set -eu
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-families.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
export CORRAL_KV_CACHE_TYPE=f32
unset OLLAMA_HOST
mkdir -p "$HOME"
corral=$CORRAL_BIN
url="http://127.0.0.1:$port"

server=""
cleanup() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; tail -20 "$work/server.log" 2>/dev/null; exit 1; }
ok() { echo "ok   $*"; }
# expect NAME TEXT FILE: FILE contains TEXT
expect() { grep -qF -- "$2" "$3" || fail "$1: expected '$2' in: $(cat "$3")"; ok "$1"; }
# field FILE EXPR: a value of the JSON in FILE (EXPR in Python, over d)
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

"$corral" serve >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -fs "$url/api/version" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || fail "the server exited"
    sleep 0.1
done
curl -fs "$url/api/version" >/dev/null || fail "the server did not start"

for family in $FAMILIES; do
    ref="$CORRAL_FIXTURES/arch/$family.json"
    printf 'FROM %s\n' "$CORRAL_FIXTURES/arch/$family.gguf" >"$work/Modelfile.$family"

    "$corral" create "$family" -f "$work/Modelfile.$family" >"$work/out" 2>&1 ||
        fail "$family: create: $(cat "$work/out")"
    expect "$family: create from the GGUF" "success" "$work/out"

    # the description: architecture, parameters (every tensor's elements), context length
    params=$(field "$ref" 'sum(__import__("math").prod(ne) for ne in d["metadata"]["tensors"].values())')
    ctx_len=$(field "$ref" 'd["metadata"]["'"$family"'.context_length"]')
    "$corral" show "$family" >"$work/out"
    expect "$family: show names the architecture" "architecture        $family" "$work/out"
    expect "$family: show gives the parameter count" \
        "parameters          $(python3 -c "print('%.0fK' % ($params / 1e3))")" "$work/out"
    expect "$family: show gives the context length" "context length      $ctx_len" "$work/out"
    curl -fs "$url/api/show" -d "{\"model\":\"$family\"}" >"$work/show.json" || fail "$family: /api/show"
    [ "$(field "$work/show.json" 'd["model_info"]["general.parameter_count"]')" = "$params" ] ||
        fail "$family: /api/show parameter_count is not $params"
    ok "$family: /api/show counts $params parameters"

    # /api/generate: the reference text (the default template passes it through), then
    # llama.cpp's 16 greedy ids
    python3 - "$ref" "$family" >"$work/request.json" <<'EOF'
import json, sys
ref = json.load(open(sys.argv[1]))
print(json.dumps({"model": sys.argv[2], "prompt": ref["input_text"], "stream": False,
                  "options": {"temperature": 0, "num_predict": 16}}))
EOF
    curl -fs "$url/api/generate" -d @"$work/request.json" >"$work/answer.json" ||
        fail "$family: /api/generate"
    python3 - "$ref" "$work/answer.json" <<'EOF' || fail "$family: /api/generate ids differ from llama.cpp"
import json, sys
ref, answer = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = ref["input_ids"] + ref["greedy_ids"]
if answer["context"] != want or answer["eval_count"] != 16:
    sys.exit(f"context {answer['context']}, want {want}")
EOF
    ok "$family: /api/generate gives llama.cpp's greedy ids"

    # a q4_K_M copy loads and generates
    "$corral" create "$family-q4" -q q4_K_M -f "$work/Modelfile.$family" >"$work/out" 2>&1 ||
        fail "$family: create -q q4_K_M: $(cat "$work/out")"
    expect "$family: create -q q4_K_M" "success" "$work/out"
    "$corral" show "$family-q4" >"$work/out"
    expect "$family: show reports Q4_K_M" "Q4_K_M" "$work/out"
    sed "s/\"$family\"/\"$family-q4\"/" "$work/request.json" >"$work/request-q4.json"
    curl -fs "$url/api/generate" -d @"$work/request-q4.json" >"$work/answer.json" ||
        fail "$family: /api/generate with the q4_K_M copy"
    [ "$(field "$work/answer.json" 'd["eval_count"]')" = 16 ] ||
        fail "$family: the q4_K_M copy did not generate 16 tokens: $(cat "$work/answer.json")"
    ok "$family: the q4_K_M copy generates"
done
echo "all family checks passed"
