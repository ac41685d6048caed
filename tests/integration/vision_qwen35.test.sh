#!/bin/sh
# Qwen 3.5's images end to end through a real `corral serve`: the tiny qwen35 and qwen35moe
# text models each with llama.cpp's qwen3vl_merger projector on two FROM lines, and each with
# the tower inside its GGUF as ollama's library lays it out (CORRAL_QWEN35_SINGLE,
# CORRAL_QWEN35MOE_SINGLE, written by CTest's vision_qwen35_files); an image through
# /api/generate giving llama.cpp's prompt count and 16 greedy ids for each, the same answer on
# /api/chat, a chat's next turn reading only what is new, and Qwen3-VL's projector (deepstack rows qwen35 cannot take) refused at create
# with a 400 saying why.
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_QWEN35_SINGLE, CORRAL_QWEN35MOE_SINGLE. Exits
# non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
serve_in_scratch vision-qwen35
vision="$CORRAL_FIXTURES/vision"
base="http://127.0.0.1:$port"

# name FROM...: a model of those files, the prompt given as it is
create() {
    name=$1
    shift
    : > "$work/Modelfile"
    for from in "$@"; do echo "FROM $from" >> "$work/Modelfile"; done
    echo 'TEMPLATE "{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}"' >> "$work/Modelfile"
    "$corral" create "$name" -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create $name: $(cat "$work/out")"
    "$corral" show "$name" >"$work/out" 2>&1
    grep -q "vision" "$work/out" || fail "show $name does not list vision: $(cat "$work/out")"
}
create q35pair "$vision/qwen35v-text.gguf" "$vision/qwen35v-mmproj.gguf"
create q35moepair "$vision/qwen35moev-text.gguf" "$vision/qwen35v-mmproj.gguf"
ok "create qwen35 and qwen35moe from the text GGUF and llama.cpp's projector; show lists vision"
create q35one "$CORRAL_QWEN35_SINGLE"
create q35moeone "$CORRAL_QWEN35MOE_SINGLE"
ok "create both from ollama's single GGUF carrying the tower; show lists vision"

# API MODEL: the reference prompt with the image where llama.cpp put it
request() {
    python3 - "$1" "$2" "$vision/qwen3vl-wide.png" <<'PY'
import base64, json, sys
api, model, path = sys.argv[1:4]
image = base64.b64encode(open(path, "rb").read()).decode()
prompt = "<|im_start|>user\n[img]What is this?<|im_end|>\n<|im_start|>assistant\n"
options = {"temperature": 0, "num_predict": 16, "num_ctx": 256}
if api == "generate":
    # unloaded after each answer: no cached prefix, so every prompt token is counted
    body = {"model": model, "prompt": prompt, "images": [image], "stream": False,
            "options": options, "keep_alive": 0}
else:
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": prompt, "images": [image]}]}
print(json.dumps(body))
PY
}

# check MODEL REF: generate's prompt tokens (6 of text, 12 image tokens, 20 of text: 38) and
# greedy ids as the reference's
check() {
    request generate "$1" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate"
    python3 - "$work/generate.json" "$vision/$2" <<'PY' || fail "$1: $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read()
assert r["prompt_eval_count"] == 38, r["prompt_eval_count"]
want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
assert r["context"][-16:] == want, (r["context"][-16:], want)
PY
}
check q35pair qwen35v.wide.ref.txt
check q35moepair qwen35moev.wide.ref.txt
ok "the pairs: 6 + 12 + 20 prompt tokens and llama.cpp's 16 greedy ids (dense and MoE)"
check q35one qwen35v.wide.ref.txt
check q35moeone qwen35moev.wide.ref.txt
ok "the single files: the pairs' prompt counts and greedy ids"

# the same prompt and image on /api/chat answers as generate does
for model in q35pair q35one q35moeone; do
    request generate $model >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
    request chat $model >"$work/request.json"
    curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "$model: /api/chat"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' \
        "$work/chat.json" >"$work/got"
    cmp -s "$work/got" "$work/want" ||
        fail "$model: /api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
done
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
upload() {
    digest="sha256:$(sha256sum "$1" | cut -d' ' -f1)"
    curl -fs -T "$1" -X POST "$base/api/blobs/$digest" >/dev/null || fail "blob upload of $1"
    echo "$digest"
}
text=$(upload "$vision/qwen35v-text.gguf")
other=$(upload "$vision/qwen3vl-mmproj.gguf")
code=$(curl -s -o "$work/create.json" -w '%{http_code}' "$base/api/create" \
    -d "{\"model\":\"q35bad\",\"stream\":false,\"files\":{\"model.gguf\":\"$text\",\"mmproj.gguf\":\"$other\"}}")
[ "$code" = 400 ] || fail "create with Qwen3-VL's projector: HTTP $code $(cat "$work/create.json")"
grep -q "deepstack" "$work/create.json" || fail "the 400 does not say why: $(cat "$work/create.json")"
ok "Qwen3-VL's projector (deepstack rows) with qwen35 is a 400 at create saying why"
