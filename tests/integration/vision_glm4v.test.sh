#!/bin/sh
# GLM-OCR's images end to end through a real `corral serve`: the tiny glm4 text model (M-RoPE)
# and its "glm4v" projector on two FROM lines (llama.cpp's layout), and the same model as
# ollama's converter writes GLM-OCR, one glmocr GGUF carrying the tower (CORRAL_GLM4V_SINGLE,
# written by CTest's vision_glm4v_files); an image through /api/generate giving llama.cpp's
# prompt count and 16 greedy ids for each, the same answer on /api/chat, and a broken
# projector (CORRAL_GLM4V_BROKEN: its mm.patch_merger.bias left out) refused at create with a
# 400 naming it. Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_GLM4V_SINGLE, CORRAL_GLM4V_BROKEN.
# Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-glm4v
vision="$CORRAL_FIXTURES/vision"
base="http://127.0.0.1:$port"

# name FROM...: a model of those files, the prompt given as it is
create() {
    name=$1
    shift
    : > "$work/Modelfile"
    for from in "$@"; do echo "FROM $from" >> "$work/Modelfile"; done
    echo 'TEMPLATE "{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}"' >> "$work/Modelfile"
    "$corral" create "$name" -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create $name: $(cat "$work/out")"
    "$corral" show "$name" >"$work/out" 2>&1
    grep -q "vision" "$work/out" || fail "show $name does not list vision: $(cat "$work/out")"
}
create glmpair "$vision/glm4v-text.gguf" "$vision/glm4v-mmproj.gguf"
ok "create from the text GGUF and its glm4v projector; show lists vision"
create glmone "$CORRAL_GLM4V_SINGLE"
ok "create from ollama's single GGUF carrying the tower; show lists vision"

# API MODEL: the reference prompt with the image where llama.cpp put it
request() {
    python3 - "$1" "$2" "$vision/qwen3vl-wide.png" <<'EOF'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
prompt = "[gMASK]<sop><|user|>\n[img]What is this?<|assistant|>\n"
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

# check MODEL REF: generate's prompt tokens (5 of text with <|begin_of_image|>, 12 image
# tokens, 12 of text from <|end_of_image|>: 29) and greedy ids as the reference's
check() {
    request generate "$1" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate"
    python3 - "$work/generate.json" "$vision/$2" <<'EOF' || fail "$1: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read()
assert r["prompt_eval_count"] == 29, r["prompt_eval_count"]
want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
assert r["context"][-16:] == want, (r["context"][-16:], want)
EOF
}
check glmpair glm4v.wide.ref.txt
ok "the pair: 5 + 12 + 12 prompt tokens and llama.cpp's 16 greedy ids"
check glmone glm4v.wide.ref.txt
ok "the single file: the pair's prompt count and greedy ids"

# the same prompt and image on /api/chat answers as generate does
for model in glmpair glmone; do
    request generate $model >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
    request chat $model >"$work/request.json"
    curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "$model: /api/chat"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' \
        "$work/chat.json" >"$work/got"
    cmp -s "$work/got" "$work/want" ||
        fail "$model: /api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
done
ok "/api/chat answers as /api/generate, for both layouts"

# a broken projector is a 400 at create, naming what is wrong
upload() {
    digest="sha256:$(sha256sum "$1" | cut -d' ' -f1)"
    curl -fs -T "$1" -X POST "$base/api/blobs/$digest" >/dev/null || fail "blob upload of $1"
    echo "$digest"
}
text=$(upload "$vision/glm4v-text.gguf")
broken=$(upload "$CORRAL_GLM4V_BROKEN")
code=$(curl -s -o "$work/create.json" -w '%{http_code}' "$base/api/create" \
    -d "{\"model\":\"glmbad\",\"stream\":false,\"files\":{\"model.gguf\":\"$text\",\"mmproj.gguf\":\"$broken\"}}")
[ "$code" = 400 ] || fail "create with a broken projector: HTTP $code $(cat "$work/create.json")"
grep -q "mm.patch_merger.bias" "$work/create.json" || fail "the 400 does not name mm.patch_merger.bias: $(cat "$work/create.json")"
ok "a projector without mm.patch_merger.bias is a 400 at create naming it"
