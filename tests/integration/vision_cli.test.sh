#!/bin/sh
# `corral run` with an image path, through a real `corral serve` (issue 43): a Modelfile with
# the text GGUF and its projector on two FROM lines (as ollama's), show listing vision, and
# `corral run MODEL "./square.png Describe the picture."` printing what the server's own
# /api/chat answers for that image and text; a text-only model keeps the path as text.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-cli

vision="$CORRAL_FIXTURES/vision"
mkdir -p "$work/src"
cp "$vision/square.png" "$work/src/square.png"
cat > "$work/src/Modelfile" <<EOF
FROM $vision/gemma3-text.gguf
FROM $vision/gemma3-mmproj.gguf
PARAMETER temperature 0
PARAMETER num_predict 16
TEMPLATE "{{ range .Messages }}{{ .Content }}{{ end }}"
EOF
"$corral" create gemma3v -f "$work/src/Modelfile" >"$work/out" 2>&1 || fail "create: $(cat "$work/out")"
ok "create from a Modelfile with the model and its projector"
"$corral" show gemma3v >"$work/out" 2>&1
grep -q "vision" "$work/out" || fail "show does not list vision: $(cat "$work/out")"
ok "show lists the vision capability"

# the server's own answer for the image and the text
python3 - "$work/src/square.png" >"$work/request.json" <<'EOF'
import base64, json, sys
image = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": "gemma3v", "stream": False,
                  "messages": [{"role": "user", "content": "Describe the picture.", "images": [image]}]}))
EOF
curl -fs "http://127.0.0.1:$port/api/chat" -d @"$work/request.json" >"$work/reference.json" ||
    fail "the server's /api/chat with the image"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["message"]["content"]; sys.stdout.write(r if r.endswith("\n") else r+"\n")' \
    "$work/reference.json" >"$work/reference.txt"
[ -s "$work/reference.txt" ] || fail "empty reference answer"
(cd "$work/src" && "$corral" run gemma3v "./square.png Describe the picture.") >"$work/out" 2>"$work/err" </dev/null ||
    fail "run: $(cat "$work/err")"
grep -qF "Added image './square.png'" "$work/err" || fail "run did not attach the image: $(cat "$work/err")"
cmp -s "$work/out" "$work/reference.txt" || fail "run printed '$(cat "$work/out")', the server said '$(cat "$work/reference.txt")'"
ok "run with an image path prints the server's answer for the image"

# a broken image file named in the prompt is refused by the server with its reason
head -c 100 "$work/src/square.png" >"$work/src/broken.png"
if (cd "$work/src" && "$corral" run gemma3v "./broken.png Describe.") >"$work/out" 2>&1 </dev/null; then
    fail "run with a truncated image succeeded: $(cat "$work/out")"
fi
grep -q "image 0" "$work/out" || fail "run with a truncated image: $(cat "$work/out")"
ok "run with a truncated image fails with the server's 400"

# minicpm-v: a qwen2 text model and a "resampler" projector on two FROM lines; a 40 x 20
# image, which the projector cuts into an overview and two slices, through `corral run`
# (the server's own answer) and `corral infer` (llama.cpp's greedy ids for its prompt)
cp "$vision/minicpmv-wide.png" "$work/src/wide.png"
cat > "$work/src/Modelfile.minicpmv" <<EOF
FROM $vision/minicpmv-text.gguf
FROM $vision/minicpmv-mmproj.gguf
PARAMETER temperature 0
PARAMETER num_predict 16
TEMPLATE "{{ range .Messages }}{{ .Content }}{{ end }}"
EOF
"$corral" create minicpmv -f "$work/src/Modelfile.minicpmv" >"$work/out" 2>&1 ||
    fail "create minicpmv: $(cat "$work/out")"
python3 - "$work/src/wide.png" >"$work/request.json" <<'EOF'
import base64, json, sys
image = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": "minicpmv", "stream": False,
                  "messages": [{"role": "user", "content": "Describe.", "images": [image]}]}))
EOF
curl -fs "http://127.0.0.1:$port/api/chat" -d @"$work/request.json" >"$work/reference.json" ||
    fail "the server's /api/chat with the minicpm-v image"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["message"]["content"]; sys.stdout.write(r if r.endswith("\n") else r+"\n")' \
    "$work/reference.json" >"$work/reference.txt"
(cd "$work/src" && "$corral" run minicpmv "./wide.png Describe.") >"$work/out" 2>"$work/err" </dev/null ||
    fail "run minicpmv: $(cat "$work/err")"
cmp -s "$work/out" "$work/reference.txt" || fail "run minicpmv printed '$(cat "$work/out")', the server said '$(cat "$work/reference.txt")'"
ok "minicpm-v from a Modelfile: run with a sliced image prints the server's answer"
"$corral" infer "$vision/minicpmv-text.gguf" --mmproj "$vision/minicpmv-mmproj.gguf" \
    --image "$work/src/wide.png" -n 16 --temperature 0 --ids --ignore-eos \
    "Describe <__media__> now" >"$work/out" 2>"$work/err" || fail "infer minicpmv: $(cat "$work/err")"
want=$(sed -n 's/^greedy_ids //p' "$vision/minicpmv.wide.ref.txt")
got=$(sed -n 's/^generated_ids: //p' "$work/out")
[ "$got" = "$want" ] || fail "infer minicpmv generated '$got', llama.cpp '$want'"
ok "infer with the sliced image gives llama.cpp's greedy ids"
