#!/bin/sh
# DeepSeek-OCR images end to end through a real `corral serve`: the tiny deepseek2-ocr text
# model with its "deepseekocr" projector on two FROM lines (llama.cpp's layout) and as ollama
# ships them (one deepseekocr GGUF carrying the tower, written by test_vision_deepseekocr
# --write-single); an image through /api/generate giving llama.cpp's 16 greedy ids for the
# global view alone and for two tiles and the global view, the same answer on /api/chat, and
# a projector whose SAM heads do not split its width refused at create, naming the cause.
# With CORRAL_TEST_SHORT=1 (the sanitizer build, tests/short_fixture.h), whose towers run
# many times slower, every request takes the small image only: the server's paths are the
# same, and test_vision_deepseekocr takes the tiles through the sanitizers.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_DEEPSEEKOCR_WRITER (test_vision_deepseekocr),
# CORRAL_TEST_SHORT.
# Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-deepseekocr
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
create pair "$CORRAL_FIXTURES/arch/deepseek2-ocr.gguf" "$vision/deepseekocr-mmproj.gguf"
CORRAL_FIXTURES="$CORRAL_FIXTURES" "$CORRAL_DEEPSEEKOCR_WRITER" --write-single "$work/deepseekocr-single.gguf" \
    >"$work/out" 2>&1 || fail "writing ollama's layout: $(cat "$work/out")"
create single "$work/deepseekocr-single.gguf"
ok "create from the text GGUF and its deepseekocr projector, and from ollama's single file; show lists vision"

# API MODEL IMAGE: a request of the reference prompt with IMAGE where llama.cpp put it
request() {
    python3 - "$@" <<'PY'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
prompt = "[img]Free OCR."
options = {"temperature": 0, "num_predict": 16, "num_ctx": 1024}
if api == "generate":
    # unloaded after each answer: no cached prefix, so every prompt token is counted
    body = {"model": model, "prompt": prompt, "images": [image], "stream": False,
            "options": options, "keep_alive": 0}
else:
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": prompt, "images": [image]}]}
print(json.dumps(body))
PY
}

# check MODEL IMAGE: generate's prompt tokens and greedy ids as the reference's
check() {
    request generate "$1" "$vision/deepseekocr-$2.png" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate with $2"
    python3 - "$work/generate.json" "$vision/deepseekocr.$2.ref.txt" <<'PY' || fail "$1 with $2: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read()
n_past = int(re.search(r"^n_past_after_prompt (\d+)$", ref, re.M).group(1))
assert r["prompt_eval_count"] == n_past, (r["prompt_eval_count"], n_past)
want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
assert r["context"][-16:] == want, (r["context"][-16:], want)
PY
}
short=${CORRAL_TEST_SHORT:-0}
for model in pair single; do
    check $model small
    if [ "$short" != 1 ]; then
        check $model wide
        ok "$model: the global view alone (273 + 9 tokens), two tiles and the global view (483 + 9): llama.cpp's greedy ids"
    else
        ok "$model: the global view alone (273 + 9 tokens): llama.cpp's greedy ids"
    fi
done
chat_image=wide
if [ "$short" = 1 ]; then chat_image=small; fi

# the same prompt and image on /api/chat answers as generate does
request generate pair "$vision/deepseekocr-$chat_image.png" >"$work/request.json"
curl -fs "$base/api/generate" -d @"$work/request.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
request chat pair "$vision/deepseekocr-$chat_image.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
ok "/api/chat answers as /api/generate"

# a projector whose 3 SAM heads do not split its width of 8 is refused at create
python3 - "$vision/deepseekocr-mmproj.gguf" "$work/bad-mmproj.gguf" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"clip.vision.sam.head_count"
at = data.index(key) + len(key)
assert struct.unpack_from("<I", data, at)[0] == 4  # a u32
struct.pack_into("<I", data, at + 4, 3)
open(sys.argv[2], "wb").write(data)
PY
printf 'FROM %s\nFROM %s\n' "$CORRAL_FIXTURES/arch/deepseek2-ocr.gguf" "$work/bad-mmproj.gguf" > "$work/Modelfile"
if "$corral" create bad -f "$work/Modelfile" >"$work/out" 2>&1; then fail "a bad projector was created"; fi
grep -q "inconsistent SAM encoder" "$work/out" || fail "create's error does not name the cause: $(cat "$work/out")"
ok "a projector whose SAM heads do not split its width is refused at create, naming it"
