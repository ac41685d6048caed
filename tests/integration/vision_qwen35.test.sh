#!/bin/sh
# Qwen 3.5's images end to end through a real `corral serve`: the tiny qwen35 and qwen35moe
# text models each with llama.cpp's qwen3vl_merger projector on two FROM lines, and each with
# the tower inside its GGUF as ollama's library lays it out (CORRAL_QWEN35_SINGLE,
# CORRAL_QWEN35MOE_SINGLE, written by CTest's vision_qwen35_files); an image through
# /api/generate giving llama.cpp's prompt count and 16 greedy ids for each, the same answer on
# /api/chat, a chat's next turn reading only what is new, and Qwen3-VL's projector (deepstack rows qwen35 cannot take) refused at create
# with a 400 saying why; named to ollama's qwen3.8 renderer, an image in a system or
# developer message refused with a 400 before rendering.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_QWEN35_SINGLE, CORRAL_QWEN35MOE_SINGLE. Exits
# non-zero on the first failed check.
set -eu
. "$(dirname "$0")/vision_lib.sh"
vision_serve vision-qwen35
vision_prompt='"<|im_start|>user\n[img]What is this?<|im_end|>\n<|im_start|>assistant\n"'
vision_ctx=256
image="$vision/qwen3vl-wide.png"

vision_create q35pair "$vision/qwen35v-text.gguf" "$vision/qwen35v-mmproj.gguf"
vision_create q35moepair "$vision/qwen35moev-text.gguf" "$vision/qwen35v-mmproj.gguf"
ok "create qwen35 and qwen35moe from the text GGUF and llama.cpp's projector; show lists vision"
vision_create q35one "$CORRAL_QWEN35_SINGLE"
vision_create q35moeone "$CORRAL_QWEN35MOE_SINGLE"
ok "create both from ollama's single GGUF carrying the tower; show lists vision"

# generate's prompt tokens (6 of text, 12 image tokens, 20 of text: 38) and greedy ids as the
# reference's
vision_check q35pair "$image" "$vision/qwen35v.wide.ref.txt" 38
vision_check q35moepair "$image" "$vision/qwen35moev.wide.ref.txt" 38
ok "the pairs: 6 + 12 + 20 prompt tokens and llama.cpp's 16 greedy ids (dense and MoE)"
vision_check q35one "$image" "$vision/qwen35v.wide.ref.txt" 38
vision_check q35moeone "$image" "$vision/qwen35moev.wide.ref.txt" 38
ok "the single files: the pairs' prompt counts and greedy ids"

# the same prompt and image on /api/chat answers as generate does
for model in q35pair q35one q35moeone; do vision_same_on_chat $model "$image"; done
ok "/api/chat answers as /api/generate, for both layouts"

# a chat's next turn after the image reads only what is new (the recurrent state kept near
# the last prompt's end, never inside the image) and answers as the whole chat read anew does
turn() {
    python3 - "$1" "$2" "$vision/qwen3vl-wide.png" "$work/reply" <<'PY'
import base64, json, sys
keep, which, path, reply = sys.argv[1:5]
image = base64.b64encode(open(path, "rb").read()).decode()
messages = [{"role": "user", "content": "<|im_start|>user\n[img]What is this?<|im_end|>\n"
             "<|im_start|>assistant\n", "images": [image]}]
if which == "second":
    messages += [{"role": "assistant", "content": open(reply).read().rstrip("\n")},
                 {"role": "user", "content": "<|im_end|>\n<|im_start|>user\nAnd?<|im_end|>\n"
                  "<|im_start|>assistant\n"}]
print(json.dumps({"model": "q35pair", "stream": False, "messages": messages,
                  "options": {"temperature": 0, "num_predict": 8, "num_ctx": 256},
                  "keep_alive": 0 if keep == "unload" else "5m"}))
PY
}
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
turn keep first >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat1.json" || fail "first turn"
field "$work/chat1.json" 'r["message"]["content"]' >"$work/reply"
turn unload second >"$work/request.json"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/warm.json" || fail "second turn"
curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/cold.json" || fail "second turn anew"
warm=$(field "$work/warm.json" 'r["prompt_eval_count"]')
cold=$(field "$work/cold.json" 'r["prompt_eval_count"]')
[ "$warm" -lt "$cold" ] || fail "the next turn read $warm prompt tokens, the whole chat $cold"
[ "$(field "$work/warm.json" 'r["message"]["content"]')" = \
  "$(field "$work/cold.json" 'r["message"]["content"]')" ] ||
    fail "the next turn answered '$(field "$work/warm.json" 'r["message"]["content"]')', the whole chat '$(field "$work/cold.json" 'r["message"]["content"]')'"
ok "a chat's next turn after the image reads $warm of $cold prompt tokens and answers as the whole chat does"

# a projector that does not fit is a 400 at create, saying why
vision_create_refused q35bad "$vision/qwen35v-text.gguf" "$vision/qwen3vl-mmproj.gguf" deepstack
ok "Qwen3-VL's projector (deepstack rows) with qwen35 is a 400 at create saying why"

# named to ollama's qwen3.8 renderer, whose system turn is text only: an image in a system or
# developer message is a 400 saying so, before anything is rendered; a user's image renders
printf 'FROM %s\nFROM %s\nRENDERER qwen3.8\nPARSER qwen3.5\n' "$vision/qwen35v-text.gguf" \
    "$vision/qwen35v-mmproj.gguf" >"$work/Modelfile"
"$corral" create q38 -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create q38: $(cat "$work/out")"
for role in system developer user; do
    python3 - "$image" "$role" >"$work/request.json" <<'PY'
import base64, json, sys
image = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": "q38", "stream": False, "_debug_render_only": True, "messages": [
    {"role": sys.argv[2], "content": "Look.", "images": [image]},
    {"role": "user", "content": "What is this?"}]}))
PY
    status=$(curl -s -o "$work/answer.json" -w '%{http_code}' "$base/api/chat" -d @"$work/request.json")
    if [ "$role" = user ]; then
        [ "$status" = 200 ] || fail "q38: a user's image answered $status: $(cat "$work/answer.json")"
    else
        [ "$status" = 400 ] || fail "q38: a $role image answered $status, not 400"
        grep -q "$role message cannot contain images" "$work/answer.json" ||
            fail "q38: the $role image's error does not say why: $(cat "$work/answer.json")"
    fi
done
ok "qwen3.8: an image in a system or developer message is a 400 saying so; a user's renders"
