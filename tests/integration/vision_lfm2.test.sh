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
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-lfm2
vision_prompt='"Look: [img] What is it?"'
vision_ctx=2048

vision_create pair "$vision/lfm2v-text.gguf" "$vision/lfm2v-mmproj.gguf"
vision_create tiled "$vision/lfm2v-text.gguf" "$vision/lfm2v16-mmproj.gguf"
vision_write_single "$CORRAL_LFM2_WRITER" "$work/lfm2-single.gguf"
vision_create single "$work/lfm2-single.gguf"
ok "create from the text GGUF and its lfm2 projector, and from ollama's single file; show lists vision"

# generate's prompt tokens and greedy ids as the reference's
for model in pair single; do
    for image in square wide small; do
        vision_check $model "$vision/lfm2v-$image.png" "$vision/lfm2v.$image.ref.txt"
    done
    ok "$model: the square (8 + 64 + 10 tokens), the wide image (96) and a small one resized up (72): llama.cpp's greedy ids"
done
vision_check tiled "$vision/lfm2v-tiles.png" "$vision/lfm2v16.tiles.ref.txt"
ok "the tiled image: three tiles and the thumbnail with their marks, llama.cpp's 1032 prompt tokens and greedy ids"

# the same prompt and image on /api/chat answers as generate does
vision_same_on_chat pair "$vision/lfm2v-wide.png"
ok "/api/chat answers as /api/generate"
