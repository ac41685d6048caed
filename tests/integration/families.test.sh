#!/bin/sh
# Each model family through a real `corral serve`: create from the tiny fixture GGUF
# (tests/fixtures/arch), show (architecture, parameter count, context length), /api/generate
# giving llama.cpp's greedy ids (arch/NAME.json, or NAME.ref.txt; F32 KV cache, as the
# references were made), and a q4_K_M copy (create --quantize) that generates too. FAMILIES lists the families, one a line. With CORRAL_TEST_SHORT=1 (the
# sanitizer build, tests/short_fixture.h) every third family: the server's paths are the same
# for each, and test_forward checks every family's own code under the sanitizers.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_TEST_SHORT. Exits non-zero on the first failed check
# (the answers' values are checked after every family has run).
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
llama4
chatglm
internlm2
starcoder
falcon
falcon-40b
nemotron
lfm2moe
gemma3n
laguna
deepseek2-ocr
"
export CORRAL_KV_CACHE_TYPE=f32 # as the references were made
serve_in_scratch families
mkdir -p "$work/src"
api="http://127.0.0.1:$port/api"
curl -fs "$api/version" >/dev/null || fail "the server did not start"

# ref_vars NAME...: for each NAME, $work/NAME.ref: shell assignments for the family's reference
# (arch/NAME.json, or for a family made with tools/archref NAME.ref.txt and the GGUF's own
# metadata): arch, params (every tensor's elements), ctx (the trained context), text (the input
# as a JSON string) and want (the input ids, then llama.cpp's first N greedy ids). One Python
# start for all families: each start costs a tenth of a second or more.
ref_vars() {
    python3 - "$CORRAL_FIXTURES/arch" "$work" "$N" "$@" <<'PY'
import json, math, os, shlex, struct, sys
arch_dir, work, n, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]

def reference(name):
    path = os.path.join(arch_dir, name + ".json")
    if os.path.exists(path):
        return json.load(open(path))
    d = {}
    for line in open(os.path.join(arch_dir, name + ".ref.txt")):
        if line.startswith("# input_text: "):
            d["input_text"] = json.loads(line[len("# input_text: "):])
        elif line.startswith(("input_ids ", "greedy_ids ")):
            key, _, *ids = line.split()
            d[key] = [int(i) for i in ids]
    data = open(os.path.join(arch_dir, name + ".gguf"), "rb").read()
    pos = 24
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v
    def string():
        return take(f"<{take('<Q')}s").decode("utf-8", "replace")
    SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, count = take("<I"), take("<Q")
            return [value(et) for _ in range(count)]
        return take(SCALAR[t])
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    tensors = {}
    for _ in range(n_tensors):
        tname = string()
        tensors[tname] = [take("<Q") for _ in range(take("<I"))]
        take("<I"), take("<Q")
    meta["tensors"] = tensors
    d["metadata"] = meta
    d["arch"] = meta["general.architecture"]
    return d

for name in names:
    d = reference(name)
    meta = d["metadata"]
    out = {
        "arch": d["arch"],
        "params": sum(math.prod(ne) for ne in meta["tensors"].values()),
        "ctx": meta[d["arch"] + ".context_length"],
        "text": json.dumps(d["input_text"]),
        "want": json.dumps(d["input_ids"] + d["greedy_ids"][:n]),
    }
    with open(os.path.join(work, name + ".ref"), "w") as f:
        f.write("; ".join(f"{k}={shlex.quote(str(v))}" for k, v in out.items()) + "\n")
    with open(os.path.join(work, name + ".expect.json"), "w") as f:
        json.dump({"params": out["params"], "want": json.loads(out["want"])}, f)
PY
}

# check_answers NAME...: the first difference, if any, between what the server answered to
# each family (NAME.show.json, NAME.gen.json, NAME.gen-q4.json in $work) and its reference
# (NAME.expect.json: params and want, as in NAME.ref; N tokens for the copy). One Python start
# for all families.
check_answers() {
    python3 - "$work" "$N" "$@" <<'PY' || fail "$(cat "$work/why")"
import json, os, sys
work, n, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
load = lambda f: json.load(open(os.path.join(work, f)))
for name in names:
    expect, why = load(name + ".expect.json"), None
    params, want = expect["params"], expect["want"]
    got = load(name + ".show.json")["model_info"].get("general.parameter_count")
    if got != params:
        why = f"{name}: /api/show parameter count {got}, not {params}"
    elif load(name + ".gen.json").get("context") != want:
        why = f"{name}: /api/generate context {load(name + '.gen.json').get('context')}, llama.cpp {want}"
    elif load(name + ".gen-q4.json").get("eval_count") != n:
        why = f"{name}-q4: " + json.dumps(load(name + ".gen-q4.json"))
    if why:
        open(os.path.join(work, "why"), "w").write(why)
        sys.exit(1)
PY
}

N=16 # tokens generated per request: all of llama.cpp's greedy ids
names= i=0
for name in $FAMILIES; do
    i=$((i + 1))
    if [ "${CORRAL_TEST_SHORT:-0}" = 1 ] && [ $((i % 3)) != 1 ]; then continue; fi
    names="$names $name"
done
# shellcheck disable=SC2086 # names: one word each
ref_vars $names || fail "cannot read the families' references"
for name in $names; do
    . "$work/$name.ref"
    ln -sf "$CORRAL_FIXTURES/arch/$name.gguf" "$work/src/$name.gguf"
    # the prompt as it is, whatever the family would render (gpt-oss: harmony)
    printf 'FROM ./%s.gguf\nTEMPLATE {{ .Prompt }}\n' "$name" >"$work/src/Modelfile.$name"
    "$corral" create "$name" -f "$work/src/Modelfile.$name" >"$work/out" 2>&1 \
        || fail "$name: create: $(cat "$work/out")"
    ok "$name: created from its GGUF"

    # show: the family, every tensor's elements counted, the trained context
    curl -fs "$api/show" -d "{\"model\":\"$name\"}" >"$work/$name.show.json" || fail "$name: /api/show"
    "$corral" show "$name" >"$work/out" || fail "$name: show"
    grep -Eq "^ +architecture +$arch\$" "$work/out" || fail "$name: show: $(cat "$work/out")"
    grep -Eq "^ +parameters +[0-9.]+[KMB]\$" "$work/out" || fail "$name: show: $(cat "$work/out")"
    grep -Eq "^ +context length +$ctx\$" "$work/out" || fail "$name: show: $(cat "$work/out")"

    # generate: the prompt's tokens, then llama.cpp's greedy ids
    curl -fs "$api/generate" -d "{\"model\":\"$name\",\"prompt\":$text,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" \
        >"$work/$name.gen.json" || fail "$name: /api/generate"

    # a q4_K_M copy: show reports it and it generates
    "$corral" create "$name-q4" -q q4_K_M -f "$work/src/Modelfile.$name" >"$work/out" 2>&1 \
        || fail "$name: create -q q4_K_M: $(cat "$work/out")"
    "$corral" show "$name-q4" >"$work/out" || fail "$name-q4: show"
    grep -Eq "^ +quantization +Q4_K_M\$" "$work/out" || fail "$name-q4: show: $(cat "$work/out")"
    grep -Eq "^ +architecture +$arch\$" "$work/out" || fail "$name-q4: show: $(cat "$work/out")"
    curl -fs "$api/generate" -d "{\"model\":\"$name-q4\",\"prompt\":$text,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" \
        >"$work/$name.gen-q4.json" || fail "$name-q4: /api/generate"
    ok "$name: show reports architecture $arch and context $ctx; both copies answered"
    "$corral" stop "$name" && "$corral" stop "$name-q4" || fail "$name: stop"
done
# renderer_chat NAME RENDER_FIELDS LINE...: NAME created from the Modelfile of LINEs, then
# NAME.show.json (/api/show), NAME.render.json (a chat of "Hi" with RENDER_FIELDS, rendered
# only) and NAME.chat.json (a chat of "Hi" answered with thinking unset: on for a model that
# thinks)
renderer_chat() {
    model=$1 fields=$2
    shift 2
    printf '%s\n' "$@" >"$work/src/Modelfile.$model"
    "$corral" create "$model" -f "$work/src/Modelfile.$model" >"$work/out" 2>&1 \
        || fail "$model: create: $(cat "$work/out")"
    curl -fs "$api/show" -d "{\"model\":\"$model\"}" >"$work/$model.show.json" \
        || fail "$model: /api/show"
    hi="\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]"
    curl -fs "$api/chat" -d "{$hi,$fields,\"_debug_render_only\":true}" \
        >"$work/$model.render.json" || fail "$model: render"
    curl -fs "$api/chat" -d "{$hi,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" \
        >"$work/$model.chat.json" || fail "$model: /api/chat"
}
# renderer_check NAME WANT: NAME (renderer_chat's) has the tools and thinking capabilities,
# its render is WANT (with Python's backslash escapes: \n, \uXXXX), and its answer to a
# prompt that opens the thinking is thinking
renderer_check() {
    python3 - "$work" "$1" "$2" <<'PY' || fail "$(cat "$work/why")"
import codecs, json, os, sys
work, name, want = sys.argv[1], sys.argv[2], codecs.decode(sys.argv[3], "unicode_escape")
load = lambda f: json.load(open(os.path.join(work, name + f)))
caps = load(".show.json").get("capabilities")
rendered = load(".render.json").get("_debug_info", {}).get("rendered_template")
message = load(".chat.json").get("message", {})
why = None
if "thinking" not in caps or "tools" not in caps:
    why = f"{name}: capabilities {caps}"
elif rendered != want:
    why = f"{name}: rendered {rendered!r}"
elif not message.get("thinking") or message.get("content"):
    why = f"{name}: the answer to a prompt that opens the thinking: {message}"
if why:
    open(os.path.join(work, "why"), "w").write(why)
    sys.exit(1)
PY
}
# laguna without a TEMPLATE: ollama's laguna renderer lays out the chat (the default system
# turn, thinking opened or closed as think says), and the answer to a prompt that opens the
# thinking is thinking; the model thinks and offers tools
case " $names " in *" laguna "*)
    renderer_chat laguna-chat '"think":false' 'FROM ./laguna.gguf'
    renderer_check laguna-chat '\u3008|EOS|\u3009<system>\n\nYou are a helpful, conversationally-fluent assistant made by Poolside. You are here to be helpful to users through natural language conversations.\n</system>\n<user>\nHi\n</user>\n<assistant>\n</think>'
    ok "laguna-chat: ollama's laguna renderer lays out the chat; the answer is thinking"
    "$corral" stop laguna-chat || fail "laguna-chat: stop" ;;
esac
# qwen35 (its GGUF has no chat template) named to ollama's qwen3.5 renderer and parser, as
# ollama's library manifests name them: the built-in renderer lays out the chat with its
# tools (their JSON in ollama's field order), thinking closed as think says
case " $names " in *" qwen35 "*)
    tool='{"type":"function","function":{"name":"add","parameters":{"properties":{"a":{"type":"number"}},"required":["a"],"type":"object"}}}'
    renderer_chat qwen35-chat "\"tools\":[$tool],\"think\":false" 'FROM ./qwen35.gguf' \
        'RENDERER qwen3.5' 'PARSER qwen3.5'
    help='\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>'
    renderer_check qwen35-chat '<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "required": ["a"], "properties": {"a": {"type": "number"}}}}}'"$help"'<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'
    ok "qwen35-chat: ollama's qwen3.5 renderer lays out the chat and its tools; the answer is thinking"
    "$corral" stop qwen35-chat || fail "qwen35-chat: stop" ;;
esac
# shellcheck disable=SC2086
check_answers $names
for name in $names; do
    ok "$name: /api/show's parameter count, llama.cpp's greedy tokens, $N tokens from the q4_K_M copy"
done
echo "all family checks passed"
