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
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-deepseekocr
vision_prompt='"[img]Free OCR."'
vision_ctx=1024

vision_create pair "$CORRAL_FIXTURES/arch/deepseek2-ocr.gguf" "$vision/deepseekocr-mmproj.gguf"
vision_write_single "$CORRAL_DEEPSEEKOCR_WRITER" "$work/deepseekocr-single.gguf"
vision_create single "$work/deepseekocr-single.gguf"
ok "create from the text GGUF and its deepseekocr projector, and from ollama's single file; show lists vision"

# generate's prompt tokens and greedy ids as the reference's
short=${CORRAL_TEST_SHORT:-0}
for model in pair single; do
    vision_check $model "$vision/deepseekocr-small.png" "$vision/deepseekocr.small.ref.txt"
    if [ "$short" != 1 ]; then
        vision_check $model "$vision/deepseekocr-wide.png" "$vision/deepseekocr.wide.ref.txt"
        ok "$model: the global view alone (273 + 9 tokens), two tiles and the global view (483 + 9): llama.cpp's greedy ids"
    else
        ok "$model: the global view alone (273 + 9 tokens): llama.cpp's greedy ids"
    fi
done
chat_image=wide
if [ "$short" = 1 ]; then chat_image=small; fi

# the same prompt and image on /api/chat answers as generate does
vision_same_on_chat pair "$vision/deepseekocr-$chat_image.png"
ok "/api/chat answers as /api/generate"

# a projector whose 3 SAM heads do not split its width of 8 is refused at create
vision_patch_u32 "$vision/deepseekocr-mmproj.gguf" "$work/bad-mmproj.gguf" \
    clip.vision.sam.head_count 2 3
vision_cli_create_refused "$CORRAL_FIXTURES/arch/deepseek2-ocr.gguf" "$work/bad-mmproj.gguf" \
    "inconsistent SAM encoder"
ok "a projector whose SAM heads do not split its width is refused at create, naming it"
