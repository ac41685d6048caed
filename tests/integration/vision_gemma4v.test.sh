#!/bin/sh
# Gemma 4's images end to end through a real `corral serve`: the tiny gemma4 text model and its
# "gemma4v" projector on two FROM lines (llama.cpp's layout), and the same tower inside the
# text model's GGUF as ollama's converter writes it (CORRAL_GEMMA4V_SINGLE, written by CTest's
# vision_onefile_gemma4v_fixture); an image through /api/generate giving llama.cpp's prompt
# count and 16 greedy ids for each, the same answer on /api/chat, and a broken projector
# (CORRAL_GEMMA4V_BROKEN: its v.std_scale left out) refused at create with a 400 naming it.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_GEMMA4V_SINGLE, CORRAL_GEMMA4V_BROKEN. Exits
# non-zero on the first failed check.
set -eu
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-gemma4v
vision_prompt='"user\n[img]What is this?\nmodel\n"'
vision_ctx=256
image="$vision/gemma4v-wide.png"

vision_create g4pair "$vision/gemma4v-text.gguf" "$vision/gemma4v-mmproj.gguf"
ok "create from the text GGUF and its gemma4v projector; show lists vision"
vision_create g4one "$CORRAL_GEMMA4V_SINGLE"
ok "create from ollama's single GGUF carrying the tower; show lists vision"

# generate's prompt tokens (BOS, the text, <|image>, 48 image tokens, <image|> and the rest:
# 71) and greedy ids as the reference's
vision_check g4pair "$image" "$vision/gemma4v.wide.ref.txt" 71
ok "the pair: 6 + 48 + 17 prompt tokens and llama.cpp's 16 greedy ids"
vision_check g4one "$image" "$vision/gemma4v.wide.ref.txt" 71
ok "the single file: the pair's prompt count and greedy ids"

# the same prompt and image on /api/chat answers as generate does
for model in g4pair g4one; do vision_same_on_chat $model "$image"; done
ok "/api/chat answers as /api/generate, for both layouts"

# a broken projector is a 400 at create, naming what is wrong
vision_create_refused g4bad "$vision/gemma4v-text.gguf" "$CORRAL_GEMMA4V_BROKEN" v.std_scale
ok "a projector without v.std_scale is a 400 at create naming it"
