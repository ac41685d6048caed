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
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-glm4v
vision_prompt='"[gMASK]<sop><|user|>\n[img]What is this?<|assistant|>\n"'
vision_ctx=256
image="$vision/qwen3vl-wide.png"

vision_create glmpair "$vision/glm4v-text.gguf" "$vision/glm4v-mmproj.gguf"
ok "create from the text GGUF and its glm4v projector; show lists vision"
vision_create glmone "$CORRAL_GLM4V_SINGLE"
ok "create from ollama's single GGUF carrying the tower; show lists vision"

# generate's prompt tokens (5 of text with <|begin_of_image|>, 12 image tokens, 12 of text
# from <|end_of_image|>: 29) and greedy ids as the reference's
vision_check glmpair "$image" "$vision/glm4v.wide.ref.txt" 29
ok "the pair: 5 + 12 + 12 prompt tokens and llama.cpp's 16 greedy ids"
vision_check glmone "$image" "$vision/glm4v.wide.ref.txt" 29
ok "the single file: the pair's prompt count and greedy ids"

# the same prompt and image on /api/chat answers as generate does
for model in glmpair glmone; do vision_same_on_chat $model "$image"; done
ok "/api/chat answers as /api/generate, for both layouts"

# a broken projector is a 400 at create, naming what is wrong
vision_create_refused glmbad "$vision/glm4v-text.gguf" "$CORRAL_GLM4V_BROKEN" mm.patch_merger.bias
ok "a projector without mm.patch_merger.bias is a 400 at create naming it"
