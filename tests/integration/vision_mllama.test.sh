#!/bin/sh
# mllama (Llama 3.2 Vision) images end to end through a real `corral serve`: ollama's single
# file of the tiny model (vision/mllama.gguf, text and tower in one GGUF; show lists vision),
# an image through /api/generate placed between the reference prompt's words giving
# tools/archref/mllamavis.py's 16 greedy ids (the image one prompt token), the same answer on
# /api/chat; two images in a request, or in one chat message, refused in ollama's words (400);
# and ollama's retired pair (an mllama model with a projector beside it) refused as ollama
# refuses it (500), before any runner starts.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-mllama
vision_prompt='"The[img] dog and the fox"'
vision_ctx=64

vision_create single "$vision/mllama.gguf"
ok "create from ollama's single file; show lists vision"
vision_check single "$vision/mllama-wide.png" - 7
python3 - "$work/generate.json" "$vision/mllama.wide.ref.txt" <<'PY' ||
import json, re, sys
got = json.load(open(sys.argv[1]))["context"][-16:]
want = [int(t) for t in re.search(r"^greedy_ids 16 (.*)$", open(sys.argv[2]).read(), re.M).group(1).split()]
assert got == want, (got, want)
PY
    fail "the greedy ids are not the reference's: $(cat "$work/generate.json")"
ok "an image between the prompt's words: one prompt token, the reference's greedy ids"
vision_same_on_chat single "$vision/mllama-wide.png"
ok "/api/chat answers as /api/generate"

# two images: in a completion, and in one chat message
image=$(base64 -w0 "$vision/mllama-wide.png")
for path in /api/generate /api/chat; do
    if [ "$path" = /api/generate ]; then
        body="{\"model\":\"single\",\"prompt\":\"hi\",\"images\":[\"$image\",\"$image\"],\"stream\":false}"
    else
        body="{\"model\":\"single\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"$image\",\"$image\"]}]}"
    fi
    status=$(curl -s -o "$work/answer.json" -w '%{http_code}' "$base$path" -d "$body")
    [ "$status" = 400 ] || fail "$path with two images answered $status: $(cat "$work/answer.json")"
    grep -q "this model only supports one image while more than one image requested" \
        "$work/answer.json" || fail "$path's error is not ollama's: $(cat "$work/answer.json")"
done
ok "two images in a request or a message: 400 in ollama's words"

# ollama's retired pair: the text model with a projector beside it
printf 'FROM %s\nFROM %s\n' "$CORRAL_FIXTURES/arch/mllama.gguf" "$vision/llava-next-mmproj.gguf" \
    > "$work/Modelfile.pair"
"$corral" create vision-pair -f "$work/Modelfile.pair" >"$work/out" 2>&1 ||
    fail "create vision-pair: $(cat "$work/out")"
for path in /api/generate /api/chat; do
    if [ "$path" = /api/generate ]; then
        body='{"model":"vision-pair","prompt":"hi","stream":false}'
    else
        body='{"model":"vision-pair","stream":false,"messages":[{"role":"user","content":"hi"}]}'
    fi
    status=$(curl -s -o "$work/answer.json" -w '%{http_code}' "$base$path" -d "$body")
    [ "$status" = 500 ] || fail "$path answered $status, not 500: $(cat "$work/answer.json")"
    grep -q "'llama3.2-vision' is no longer compatible with your version of Ollama" \
        "$work/answer.json" || fail "$path's error is not ollama's: $(cat "$work/answer.json")"
done
ok "the retired llama3.2-vision pair is refused in ollama's words"
