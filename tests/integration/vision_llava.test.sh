#!/bin/sh
# LLaVA end to end through a real `corral serve`: the tiny LLaVA 1.5 and 1.6 fixtures (a text
# GGUF and an "mlp" projector on two FROM lines, as ollama's llava models are laid out), an
# image through /api/generate giving llama.cpp's 16 greedy ids, the same answer on /api/chat,
# OpenAI's /v1/chat/completions answering as the messages ollama makes of its content parts,
# 1.6's slices counted as llama.cpp counts them, and moondream's shape (the phi2 fixture and
# an "mlp" projector over a 378-pixel SigLIP tower) giving llama.cpp's greedy ids.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-llava
vision_prompt='"USER: [img]\nWhat is this? ASSISTANT:"'
vision_ctx=1024

vision_create llava15 "$vision/llava-text.gguf" "$vision/llava15-mmproj.gguf"
vision_create llava16 "$vision/llava-text.gguf" "$vision/llava16-mmproj.gguf"
# the runner caps the context at the trained length, which the phi2 fixture has at 256: its
# copy says 2048, real moondream's (phi2's RoPE does not read it), to hold 729 image tokens
vision_patch_u32 "$CORRAL_FIXTURES/arch/phi2.gguf" "$work/phi2.gguf" phi2.context_length 256 2048
vision_create moondream "$work/phi2.gguf" "$vision/moondream-mmproj.gguf"
ok "create from the text GGUF and its llava projector; show lists vision"

# generate's prompt tokens and greedy ids as the reference's
vision_check llava15 "$vision/llava-square.png" "$vision/llava15.square.ref.txt" 93
ok "LLaVA 1.5: 8 + 64 + 21 prompt tokens and llama.cpp's 16 greedy ids"
vision_check llava16 "$vision/llava-square.png" "$vision/llava16.square.ref.txt" 93
ok "LLaVA 1.6, an image within the square: the overview alone, llama.cpp's greedy ids"
vision_check llava16 "$vision/llava-wide.png" - 221
ok "LLaVA 1.6, a 64 x 32 image: the overview and two slices, 192 image tokens"
vision_check moondream "$vision/moondream-square.png" "$vision/moondream.square.ref.txt" 756
ok "moondream's shape over phi2: 6 + 729 + 21 prompt tokens and llama.cpp's 16 greedy ids"

# the same prompt and image on the chat APIs answer as generate does
vision_same_on_chat llava15 "$vision/llava-square.png"
ok "/api/chat answers as /api/generate"
# OpenAI's text, image_url, text parts are three messages, as ollama makes them
vision_request chat-parts llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "/api/chat in parts"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' "$work/chat.json" >"$work/want"
vision_request openai llava15 "$vision/llava-square.png" >"$work/request.json"
curl -fs "$base/v1/chat/completions" -d @"$work/request.json" >"$work/openai.json" || fail "/v1/chat/completions"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$work/openai.json" >"$work/got"
cmp -s "$work/got" "$work/want" || fail "/v1/chat/completions said '$(cat "$work/got")', /api/chat '$(cat "$work/want")'"
ok "/v1/chat/completions with an image_url part answers as /api/chat with those messages"
