#!/bin/sh
# llama4 images end to end through a real `corral serve`: the tiny llama4 fixtures as
# llama.cpp lays them out (a text GGUF and a "llama4" projector on two FROM lines) and as
# ollama ships them (one llama4 GGUF carrying the tower, written by test_vision_llama4
# --write-single); an image through /api/generate giving llama.cpp's 16 greedy ids for a
# square, two tiles and six tiles, the same answer on /api/chat, and a projector whose pixel
# shuffle does not fit its grid refused at create, naming the cause.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_LLAMA4_WRITER (test_vision_llama4). Exits non-zero
# on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-llama4
vision="$CORRAL_FIXTURES/vision"
base="http://127.0.0.1:$port"
template='TEMPLATE "{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}"'

# name FROM...: a model of the files, the prompt given as it is; show must list vision
create() {
    name=$1
    shift
    : > "$work/Modelfile"
    for f in "$@"; do echo "FROM $f" >> "$work/Modelfile"; done
    echo "$template" >> "$work/Modelfile"
    "$corral" create "$name" -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create $name: $(cat "$work/out")"
    "$corral" show "$name" >"$work/out" 2>&1
    grep -q "vision" "$work/out" || fail "show $name does not list vision: $(cat "$work/out")"
}
create pair "$vision/llama4-text.gguf" "$vision/llama4-mmproj.gguf"
CORRAL_FIXTURES="$CORRAL_FIXTURES" "$CORRAL_LLAMA4_WRITER" --write-single "$work/llama4-single.gguf" \
    >"$work/out" 2>&1 || fail "writing ollama's layout: $(cat "$work/out")"
create single "$work/llama4-single.gguf"
ok "create from the text GGUF and its llama4 projector, and from ollama's single file; show lists vision"

# API MODEL IMAGE: a request of the reference prompt with IMAGE where llama.cpp put it
request() {
    python3 - "$@" <<'EOF'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
prompt = "Look: [img] What is it?"
options = {"temperature": 0, "num_predict": 16, "num_ctx": 256}
if api == "generate":
    # unloaded after each answer: no cached prefix, so every prompt token is counted
    body = {"model": model, "prompt": prompt, "images": [image], "stream": False,
            "options": options, "keep_alive": 0}
else:
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": prompt, "images": [image]}]}
print(json.dumps(body))
EOF
}

# check MODEL IMAGE: generate's prompt tokens and greedy ids as the reference's
check() {
    request generate "$1" "$vision/llama4-$2.png" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate with $2"
    python3 - "$work/generate.json" "$vision/llama4.$2.ref.txt" <<'EOF' || fail "$1 with $2: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read()
n_past = int(re.search(r"^n_past_after_prompt (\d+)$", ref, re.M).group(1))
assert r["prompt_eval_count"] == n_past, (r["prompt_eval_count"], n_past)
want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
assert r["context"][-16:] == want, (r["context"][-16:], want)
EOF
}
for model in pair single; do
    check $model square
    check $model wide
    check $model odd
    ok "$model: a square (7 + 4 + 10 tokens), two tiles and the overview (12), six and the overview (28): llama.cpp's greedy ids"
done

# the same prompt and image on /api/chat answers as generate does
request generate pair "$vision/llama4-wide.png" >"$work/request.json"
curl -fs "$base/api/generate" -d @"$work/request.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
request chat pair "$vision/llama4-wide.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
ok "/api/chat answers as /api/generate"

# a projector whose 3 x 3 pixel shuffle does not fit its 4 x 4 patch grid is refused at create
python3 - "$vision/llama4-mmproj.gguf" "$work/bad-mmproj.gguf" <<'EOF'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"clip.vision.projector.scale_factor"
at = data.index(key) + len(key)
assert struct.unpack_from("<I", data, at)[0] == 4  # a u32
struct.pack_into("<I", data, at + 4, 3)
open(sys.argv[2], "wb").write(data)
EOF
printf 'FROM %s\nFROM %s\n' "$vision/llama4-text.gguf" "$work/bad-mmproj.gguf" > "$work/Modelfile"
if "$corral" create bad -f "$work/Modelfile" >"$work/out" 2>&1; then fail "a bad projector was created"; fi
grep -q "pixel shuffle of 3 x 3" "$work/out" || fail "create's error does not name the cause: $(cat "$work/out")"
ok "a projector whose pixel shuffle does not fit is refused at create, naming it"
