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
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-llama4
vision_prompt='"Look: [img] What is it?"'
vision_ctx=256

vision_create pair "$vision/llama4-text.gguf" "$vision/llama4-mmproj.gguf"
vision_write_single "$CORRAL_LLAMA4_WRITER" "$work/llama4-single.gguf"
vision_create single "$work/llama4-single.gguf"
ok "create from the text GGUF and its llama4 projector, and from ollama's single file; show lists vision"

# generate's prompt tokens and greedy ids as the reference's
for model in pair single; do
    for image in square wide odd; do
        vision_check $model "$vision/llama4-$image.png" "$vision/llama4.$image.ref.txt"
    done
    ok "$model: a square (7 + 4 + 10 tokens), two tiles and the overview (12), six and the overview (28): llama.cpp's greedy ids"
done

# the same prompt and image on /api/chat answers as generate does
vision_same_on_chat pair "$vision/llama4-wide.png"
ok "/api/chat answers as /api/generate"

# a projector whose 3 x 3 pixel shuffle does not fit its 4 x 4 patch grid is refused at create
vision_patch_u32 "$vision/llama4-mmproj.gguf" "$work/bad-mmproj.gguf" \
    clip.vision.projector.scale_factor 2 3
vision_cli_create_refused "$vision/llama4-text.gguf" "$work/bad-mmproj.gguf" "pixel shuffle of 3 x 3"
ok "a projector whose pixel shuffle does not fit is refused at create, naming it"
