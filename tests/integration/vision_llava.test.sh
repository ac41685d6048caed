#!/bin/sh
# LLaVA end to end through a real `corral serve`: the tiny LLaVA 1.5 and 1.6 fixtures (a text
# GGUF and an "mlp" projector on two FROM lines, as ollama's llava models are laid out), an
# image through /api/generate giving llama.cpp's 16 greedy ids, the same answer on /api/chat,
# OpenAI's /v1/chat/completions answering as the messages ollama makes of its content parts,
# 1.6's slices counted as llama.cpp counts them, and moondream's shape (the phi2 fixture and
# an "mlp" projector over a 378-pixel SigLIP tower) giving llama.cpp's greedy ids.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-llava
vision="$CORRAL_FIXTURES/vision"
base="http://127.0.0.1:$port"

# name projector [text]: a model of the text GGUF (a path; llava-text.gguf) and the projector,
# the prompt given as it is
create() {
    cat > "$work/Modelfile" <<EOF
FROM ${3:-$vision/llava-text.gguf}
FROM $vision/$2
TEMPLATE "{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}"
EOF
    "$corral" create "$1" -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create $1: $(cat "$work/out")"
    "$corral" show "$1" >"$work/out" 2>&1
    grep -q "vision" "$work/out" || fail "show $1 does not list vision: $(cat "$work/out")"
}
create llava15 llava15-mmproj.gguf
create llava16 llava16-mmproj.gguf
# the runner caps the context at the trained length, which the phi2 fixture has at 256: its
# copy says 2048, real moondream's (phi2's RoPE does not read it), to hold 729 image tokens
python3 - "$CORRAL_FIXTURES/arch/phi2.gguf" "$work/phi2.gguf" <<'EOF' || fail "copy phi2.gguf"
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"phi2.context_length"
at = data.index(key) + len(key)  # then the value's type (4: uint32) and the value
assert data.count(key) == 1 and struct.unpack_from("<II", data, at) == (4, 256)
struct.pack_into("<I", data, at + 4, 2048)
open(sys.argv[2], "wb").write(data)
EOF
create moondream moondream-mmproj.gguf "$work/phi2.gguf"
ok "create from the text GGUF and its llava projector; show lists vision"

# API MODEL IMAGE: a request of the reference prompt with IMAGE where llama.cpp put it
request() {
    python3 - "$@" <<'EOF'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
before, after = "USER: ", "\nWhat is this? ASSISTANT:"
options = {"temperature": 0, "num_predict": 16, "num_ctx": 1024}
if api == "generate":
    # unloaded after each answer: no cached prefix, so every prompt token is counted
    body = {"model": model, "prompt": before + "[img]" + after, "images": [image],
            "stream": False, "options": options, "keep_alive": 0}
elif api == "chat":
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": before + "[img]" + after, "images": [image]}]}
elif api == "chat-parts":  # OpenAI's content parts as ollama turns them into messages
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": before},
                         {"role": "user", "content": "", "images": [image]},
                         {"role": "user", "content": after}]}
else:
    body = {"model": model, "temperature": 0, "max_tokens": 16, "seed": 1,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": before},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}},
                {"type": "text", "text": after}]}]}
print(json.dumps(body))
EOF
}

# check MODEL IMAGE REF TOKENS: generate's prompt tokens and greedy ids as the reference's
check() {
    request generate "$1" "$vision/$2" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate with $2"
    python3 - "$work/generate.json" "$vision/$3" "$4" <<'EOF' || fail "$1 with $2: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read() if sys.argv[2].endswith(".txt") else ""
assert r["prompt_eval_count"] == int(sys.argv[3]), r["prompt_eval_count"]
if ref:
    want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
    assert r["context"][-16:] == want, (r["context"][-16:], want)
EOF
}
check llava15 llava-square.png llava15.square.ref.txt 93
ok "LLaVA 1.5: 8 + 64 + 21 prompt tokens and llama.cpp's 16 greedy ids"
check llava16 llava-square.png llava16.square.ref.txt 93
ok "LLaVA 1.6, an image within the square: the overview alone, llama.cpp's greedy ids"
check llava16 llava-wide.png - 221
ok "LLaVA 1.6, a 64 x 32 image: the overview and two slices, 192 image tokens"
check moondream moondream-square.png moondream.square.ref.txt 756
ok "moondream's shape over phi2: 6 + 729 + 21 prompt tokens and llama.cpp's 16 greedy ids"

# the same prompt and image on the chat APIs answer as generate does
request generate llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/api/generate" -d @"$work/request.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
request chat llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
ok "/api/chat answers as /api/generate"
# OpenAI's text, image_url, text parts are three messages, as ollama makes them
request chat-parts llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat in parts"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/want"
request openai llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/v1/chat/completions" -d @"$work/request.json" >"$work/openai.json" || fail "/v1/chat/completions"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$work/openai.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/v1/chat/completions said '$(cat "$work/got")', /api/chat '$(cat "$work/want")'"
ok "/v1/chat/completions with an image_url part answers as /api/chat with those messages"
