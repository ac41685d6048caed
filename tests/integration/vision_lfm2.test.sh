#!/bin/sh
# LFM2-VL images end to end through a real `corral serve`: the tiny lfm2 fixtures as llama.cpp
# lays them out (a text GGUF and an "lfm2" projector on two FROM lines) and as ollama's
# converter can write them (one lfm2 GGUF carrying the tower, written by test_vision_lfm2
# --write-single); an image through /api/generate giving llama.cpp's prompt length and 16
# greedy ids for the square, the wide image and a small one that both resize up to 128 x 144,
# the same answer on /api/chat, and the tiled
# image (the 16-pixel tower) laid out as llama.cpp lays it: three tiles and the thumbnail with
# their marks, its 1032 prompt tokens and greedy ids.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_LFM2_WRITER (test_vision_lfm2). Exits non-zero on
# the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-lfm2
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
create pair "$vision/lfm2v-text.gguf" "$vision/lfm2v-mmproj.gguf"
create tiled "$vision/lfm2v-text.gguf" "$vision/lfm2v16-mmproj.gguf"
CORRAL_FIXTURES="$CORRAL_FIXTURES" "$CORRAL_LFM2_WRITER" --write-single "$work/lfm2-single.gguf" \
    >"$work/out" 2>&1 || fail "writing ollama's layout: $(cat "$work/out")"
create single "$work/lfm2-single.gguf"
ok "create from the text GGUF and its lfm2 projector, and from ollama's single file; show lists vision"

# API MODEL IMAGE: a request of the reference prompt with IMAGE where llama.cpp put it
request() {
    python3 - "$@" <<'EOF'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
prompt = "Look: [img] What is it?"
options = {"temperature": 0, "num_predict": 16, "num_ctx": 2048}
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

# check MODEL IMAGE REF [ids]: generate's prompt tokens (and greedy ids) as the reference's
check() {
    request generate "$1" "$vision/lfm2v-$2.png" >"$work/request.json"
    curl -s "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate with $2"
    python3 - "$work/generate.json" "$vision/$3.ref.txt" "${4:-}" <<'EOF' || fail "$1 with $2: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read()
n_past = int(re.search(r"^n_past_after_prompt (\d+)$", ref, re.M).group(1))
assert r["prompt_eval_count"] == n_past, (r["prompt_eval_count"], n_past)
if sys.argv[3]:
    want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
    assert r["context"][-16:] == want, (r["context"][-16:], want)
EOF
}
for model in pair single; do
    check $model square lfm2v.square ids
    check $model wide lfm2v.wide ids
    check $model small lfm2v.small ids
    ok "$model: the square (8 + 64 + 10 tokens), the wide image (96) and a small one resized up (72): llama.cpp's greedy ids"
done
check tiled tiles lfm2v16.tiles ids
ok "the tiled image: three tiles and the thumbnail with their marks, llama.cpp's 1032 prompt tokens and greedy ids"

# the same prompt and image on /api/chat answers as generate does
request generate pair "$vision/lfm2v-wide.png" >"$work/request.json"
curl -fs "$base/api/generate" -d @"$work/request.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
request chat pair "$vision/lfm2v-wide.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
ok "/api/chat answers as /api/generate"
