#!/bin/sh
# Each model family through a real `corral serve`: create from the tiny fixture GGUF
# (tests/fixtures/arch), show (architecture, parameter count, context length), /api/generate
# giving llama.cpp's greedy ids (arch/NAME.json, or NAME.ref.txt; F32 KV cache, as the references were made), and a q4_K_M copy (create --quantize) that
# generates too. FAMILIES lists the families, one a line.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
FAMILIES="
granite
olmo2
smollm3
mistral3
starcoder2
cohere2
exaone4
glm4
qwen3moe
granitemoe
gpt-oss
gemma
command-r
exaone
olmo3
qwen35
gemma4
gemma4-e
gemma4-moe
qwen35moe
granitehybrid
granitehybrid-moe
glm4moe
qwen3next
nemotron-h
nemotron-h-moe
lfm2
qwen3vl
qwen3vlmoe
"
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-families.XXXXXX")
port=$(free_port)
export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
export CORRAL_KV_CACHE_TYPE=f32 # as the references were made
unset OLLAMA_HOST
mkdir -p "$HOME" "$work/src"
corral=$CORRAL_BIN
api="http://127.0.0.1:$port/api"

"$corral" serve >"$work/server.log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; tail -20 "$work/server.log"; exit 1; }

wait_for_url "$api/version" || true
curl -fs "$api/version" >/dev/null || fail "the server did not start"

# json FILE EXPR: a Python expression over the JSON document d in FILE
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# ref_json NAME OUT: for a family made with tools/archref (NAME.ref.txt and NAME.gguf, no
# NAME.json), the fields this test reads from a NAME.json: the input text, input and greedy ids,
# and the GGUF's metadata (every tensor's ne, the scalar keys).
ref_json() {
    python3 - "$CORRAL_FIXTURES/arch/$1.ref.txt" "$CORRAL_FIXTURES/arch/$1.gguf" >"$2" <<'PY'
import json, struct, sys
d = {}
for line in open(sys.argv[1]):
    if line.startswith("# input_text: "):
        d["input_text"] = json.loads(line[len("# input_text: "):])
    elif line.startswith(("input_ids ", "greedy_ids ")):
        key, _, *ids = line.split()
        d[key] = [int(i) for i in ids]
data = open(sys.argv[2], "rb").read()
pos = 24
def take(fmt):
    global pos
    v = struct.unpack_from(fmt, data, pos)[0]
    pos += struct.calcsize(fmt)
    return v
def string():
    n = take("<Q")
    return take(f"<{n}s").decode("utf-8", "replace")
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
def value(t):
    if t == 8:
        return string()
    if t == 9:
        et, n = take("<I"), take("<Q")
        return [value(et) for _ in range(n)]
    return take(SCALAR[t])
n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
meta = {}
for _ in range(n_kv):
    key = string()
    meta[key] = value(take("<I"))
tensors = {}
for _ in range(n_tensors):
    name = string()
    tensors[name] = [take("<Q") for _ in range(take("<I"))]
    take("<I"), take("<Q")
meta["tensors"] = tensors
d["metadata"] = meta
d["arch"] = meta["general.architecture"]
json.dump(d, sys.stdout)
PY
}

N=16 # tokens generated per request: all of llama.cpp's greedy ids
for name in $FAMILIES; do
    ref="$CORRAL_FIXTURES/arch/$name.json"
    if [ ! -f "$ref" ] && [ -f "$CORRAL_FIXTURES/arch/$name.ref.txt" ]; then
        ref_json "$name" "$work/$name.ref.json" || fail "$name: cannot read $name.ref.txt"
        ref="$work/$name.ref.json"
    fi
    [ -f "$ref" ] || fail "$name: no $ref"
    arch=$(json "$ref" 'd["arch"]')
    ln -sf "$CORRAL_FIXTURES/arch/$name.gguf" "$work/src/$name.gguf"
    # the prompt as it is, whatever the family would render (gpt-oss: harmony)
    printf 'FROM ./%s.gguf\nTEMPLATE {{ .Prompt }}\n' "$name" >"$work/src/Modelfile.$name"
    "$corral" create "$name" -f "$work/src/Modelfile.$name" >"$work/out" 2>&1 \
        || fail "$name: create: $(cat "$work/out")"
    ok "$name: created from its GGUF"

    # show: the family, every tensor's elements counted, the trained context
    params=$(json "$ref" 'sum(__import__("math").prod(ne) for ne in d["metadata"]["tensors"].values())')
    ctx=$(json "$ref" 'd["metadata"][d["arch"] + ".context_length"]')
    arch=$(json "$ref" 'd["arch"]')
    curl -fs "$api/show" -d "{\"model\":\"$name\"}" >"$work/show.json" || fail "$name: /api/show"
    [ "$(json "$work/show.json" 'd["model_info"]["general.parameter_count"]')" = "$params" ] \
        || fail "$name: /api/show parameter count is not $params"
    "$corral" show "$name" >"$work/out" || fail "$name: show"
    grep -Eq "^ +architecture +$arch\$" "$work/out" || fail "$name: show: $(cat "$work/out")"
    grep -Eq "^ +parameters +[0-9.]+[KMB]\$" "$work/out" || fail "$name: show: $(cat "$work/out")"
    grep -Eq "^ +context length +$ctx\$" "$work/out" || fail "$name: show: $(cat "$work/out")"
    ok "$name: show reports architecture, $params parameters and context $ctx"

    # generate: the prompt's tokens, then llama.cpp's greedy ids
    text=$(json "$ref" 'json.dumps(d["input_text"])')
    want=$(json "$ref" "d['input_ids'] + d['greedy_ids'][:$N]")
    curl -fs "$api/generate" -d "{\"model\":\"$name\",\"prompt\":$text,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" \
        >"$work/gen.json" || fail "$name: /api/generate"
    got=$(json "$work/gen.json" 'd["context"]')
    [ "$got" = "$want" ] || fail "$name: /api/generate context $got, llama.cpp $want"
    ok "$name: /api/generate gives llama.cpp's greedy tokens"

    # a q4_K_M copy: show reports it and it generates
    "$corral" create "$name-q4" -q q4_K_M -f "$work/src/Modelfile.$name" >"$work/out" 2>&1 \
        || fail "$name: create -q q4_K_M: $(cat "$work/out")"
    "$corral" show "$name-q4" >"$work/out" || fail "$name-q4: show"
    grep -Eq "^ +quantization +Q4_K_M\$" "$work/out" || fail "$name-q4: show: $(cat "$work/out")"
    grep -Eq "^ +architecture +$arch\$" "$work/out" || fail "$name-q4: show: $(cat "$work/out")"
    curl -fs "$api/generate" -d "{\"model\":\"$name-q4\",\"prompt\":$text,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" \
        >"$work/gen.json" || fail "$name-q4: /api/generate"
    [ "$(json "$work/gen.json" 'd["eval_count"]')" = "$N" ] || fail "$name-q4: $(cat "$work/gen.json")"
    ok "$name: the q4_K_M copy generates"
    "$corral" stop "$name" && "$corral" stop "$name-q4" || fail "$name: stop"
done
echo "all family checks passed"
