#!/bin/sh
# An image the runner refuses is the client's mistake on every API: a 2000 x 1 picture passes
# the server's own checks (it decodes within the limits) but is too thin for minicpm-v's
# slicing, which the runner finds when it sizes the image's parts; /api/generate, /api/chat,
# /v1/chat/completions, /v1/messages and /v1/responses all answer 400 naming why, not 500.
# The fixture projector's square is 32 pixels, under which no picture the server decodes is
# too thin; its copy here says 448, the real model's (the tower reads the patches whatever the
# square), under which the picture's parts would be wider than the 8192 pixels a part may be.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-refused
tools="$(dirname "$0")/../../tools/archref"

vision_patch_u32 "$vision/minicpmv-mmproj.gguf" "$work/mmproj.gguf" clip.vision.image_size 32 448
printf 'FROM %s\nFROM %s\n%s\n' "$vision/minicpmv-text.gguf" "$work/mmproj.gguf" \
    "$vision_template" > "$work/Modelfile"
"$corral" create minicpmv -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create minicpmv: $(cat "$work/out")"
python3 "$tools/testpng.py" "$work/thin.png" 2000 1 || fail "write the 2000 x 1 picture"

# API: the request body of that API with the thin picture
request() {
    python3 - "$1" "$work/thin.png" <<'EOF'
import base64, json, sys
api, path = sys.argv[1:3]
image = base64.b64encode(open(path, "rb").read()).decode()
url = "data:image/png;base64," + image
if api == "generate":
    body = {"model": "minicpmv", "prompt": "Describe.", "images": [image], "stream": False}
elif api == "chat":
    body = {"model": "minicpmv", "stream": False,
            "messages": [{"role": "user", "content": "Describe.", "images": [image]}]}
elif api == "openai":
    body = {"model": "minicpmv", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe."},
        {"type": "image_url", "image_url": {"url": url}}]}]}
elif api == "anthropic":
    body = {"model": "minicpmv", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
        {"type": "text", "text": "Describe."}]}]}
else:
    body = {"model": "minicpmv", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "Describe."},
        {"type": "input_image", "image_url": url}]}]}
print(json.dumps(body))
EOF
}

# API PATH: that API's answer to the thin picture is a 400 whose message says it is too thin
refused() {
    request "$1" >"$work/request.json"
    status=$(curl -s -o "$work/answer.json" -w '%{http_code}' "$base$2" -d @"$work/request.json")
    [ "$status" = 400 ] || fail "$2 answered $status, not 400: $(cat "$work/answer.json")"
    grep -q "too thin" "$work/answer.json" || fail "$2's error does not say why: $(cat "$work/answer.json")"
    ok "$2: the thin picture is a 400 saying it is too thin"
}
refused generate /api/generate
refused chat /api/chat
refused openai /v1/chat/completions
refused anthropic /v1/messages
refused responses /v1/responses
