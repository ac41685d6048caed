# Sourced by the image integration tests (vision_*.test.sh) in place of lib.sh, which it
# sources: the steps they share to hold a model with a projector, through a real `corral
# serve`, against llama.cpp's references in tests/fixtures/vision. vision_serve starts the
# server; vision_create makes a model and sees `show` list vision; vision_request,
# vision_check and vision_same_on_chat send an image and compare the answer; vision_upload,
# vision_create_refused, vision_cli_create_refused and vision_patch_u32 make and check the
# refusals; vision_write_single runs a unit test's writer of ollama's single file. Each
# failed check ends the script through lib.sh's fail.
. "$(dirname "$0")/lib.sh"

# A template that passes the prompt as it is, for generate and chat alike.
vision_template='TEMPLATE "{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}"'

# vision_serve NAME: serve_in_scratch NAME, then $vision (the vision fixtures' folder) and
# $base (the server's URL).
vision_serve() {
    serve_in_scratch "$1"
    vision="$CORRAL_FIXTURES/vision"
    base="http://127.0.0.1:$port"
}

# vision_create NAME FROM...: a model of the files (a FROM line each, in order), the prompt
# given as it is; `corral show` must list vision.
vision_create() {
    name=$1
    shift
    : > "$work/Modelfile"
    for from in "$@"; do echo "FROM $from" >> "$work/Modelfile"; done
    echo "$vision_template" >> "$work/Modelfile"
    "$corral" create "$name" -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create $name: $(cat "$work/out")"
    "$corral" show "$name" >"$work/out" 2>&1
    grep -q "vision" "$work/out" || fail "show $name does not list vision: $(cat "$work/out")"
}

# vision_write_single WRITER OUT: ollama's single file of a pair, written to OUT by the
# family's unit test (WRITER --write-single OUT).
vision_write_single() {
    CORRAL_FIXTURES="$CORRAL_FIXTURES" "$1" --write-single "$2" >"$work/out" 2>&1 ||
        fail "writing ollama's layout: $(cat "$work/out")"
}

# vision_request API MODEL IMAGE: the body of a request of $vision_prompt (a JSON string) with
# IMAGE (a path) where its [img] stands: temperature 0, 16 tokens, a context of $vision_ctx. API:
# generate (the model unloaded after the answer), chat, chat-parts (the text before the
# image, the image, the text after as three messages, as ollama makes OpenAI's content
# parts) or openai (/v1/chat/completions with those parts).
vision_request() {
    python3 - "$1" "$2" "$3" "$vision_prompt" "$vision_ctx" <<'EOF'
import base64, json, sys
api, model, path, num_ctx = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5]
prompt = json.loads(sys.argv[4])
image = base64.b64encode(open(path, "rb").read()).decode()
options = {"temperature": 0, "num_predict": 16, "num_ctx": int(num_ctx)}
before, after = prompt.split("[img]")
if api == "generate":
    # unloaded after each answer: no cached prefix, so every prompt token is counted
    body = {"model": model, "prompt": prompt, "images": [image], "stream": False,
            "options": options, "keep_alive": 0}
elif api == "chat":
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": prompt, "images": [image]}]}
elif api == "chat-parts":
    body = {"model": model, "stream": False, "options": options,
            "messages": [{"role": "user", "content": before},
                         {"role": "user", "content": "", "images": [image]},
                         {"role": "user", "content": after}]}
else:
    body = {"model": model, "temperature": 0, "max_tokens": 16, "seed": 1,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": before},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}},
                {"type": "text", "text": after}]}]}
print(json.dumps(body))
EOF
}

# vision_check MODEL IMAGE REF [COUNT]: /api/generate of MODEL with IMAGE (a path) counts
# COUNT prompt tokens (without COUNT: REF's n_past_after_prompt) and, unless REF (a ref.txt's
# path) is -, ends its context with REF's 16 greedy ids.
vision_check() {
    vision_request generate "$1" "$2" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" >"$work/generate.json" ||
        fail "$1: /api/generate with $(basename "$2")"
    python3 - "$work/generate.json" "$3" "${4:-}" <<'EOF' || fail "$1 with $(basename "$2"): $(cat "$work/generate.json")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ref = open(sys.argv[2]).read() if sys.argv[2] != "-" else ""
if sys.argv[3]:
    n_past = int(sys.argv[3])
else:
    n_past = int(re.search(r"^n_past_after_prompt (\d+)$", ref, re.M).group(1))
assert r["prompt_eval_count"] == n_past, (r["prompt_eval_count"], n_past)
if ref:
    want = [int(t) for t in re.search(r"^greedy_ids (.*)$", ref, re.M).group(1).split()]
    assert r["context"][-16:] == want, (r["context"][-16:], want)
EOF
}

# vision_same_on_chat MODEL IMAGE: /api/chat answers the request with IMAGE as /api/generate
# does.
vision_same_on_chat() {
    vision_request generate "$1" "$2" >"$work/request.json"
    curl -fs "$base/api/generate" -d @"$work/request.json" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["response"])' >"$work/want"
    vision_request chat "$1" "$2" >"$work/request.json"
    curl -fs "$base/api/chat" -d @"$work/request.json" >"$work/chat.json" || fail "$1: /api/chat"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"]["content"])' \
        "$work/chat.json" >"$work/got"
    cmp -s "$work/got" "$work/want" ||
        fail "$1: /api/chat said '$(cat "$work/got")', generate '$(cat "$work/want")'"
}

# vision_upload FILE: FILE as the server's blob; prints its digest.
vision_upload() {
    digest="sha256:$(sha256sum "$1" | cut -d' ' -f1)"
    curl -fs -T "$1" -X POST "$base/api/blobs/$digest" >/dev/null || fail "blob upload of $1"
    echo "$digest"
}

# vision_create_refused NAME TEXT MMPROJ WHAT: /api/create of NAME from the text GGUF and the
# projector (paths, uploaded first) is a 400 whose message names WHAT.
vision_create_refused() {
    text=$(vision_upload "$2")
    mmproj=$(vision_upload "$3")
    code=$(curl -s -o "$work/create.json" -w '%{http_code}' "$base/api/create" \
        -d "{\"model\":\"$1\",\"stream\":false,\"files\":{\"model.gguf\":\"$text\",\"mmproj.gguf\":\"$mmproj\"}}")
    [ "$code" = 400 ] || fail "create $1 with $(basename "$3"): HTTP $code $(cat "$work/create.json")"
    grep -q "$4" "$work/create.json" || fail "the 400 does not name $4: $(cat "$work/create.json")"
}

# vision_cli_create_refused TEXT MMPROJ WHAT: `corral create` from the two files fails, its
# error naming WHAT.
vision_cli_create_refused() {
    printf 'FROM %s\nFROM %s\n' "$1" "$2" > "$work/Modelfile"
    if "$corral" create bad -f "$work/Modelfile" >"$work/out" 2>&1; then fail "a bad projector was created"; fi
    grep -q "$3" "$work/out" || fail "create's error does not name the cause: $(cat "$work/out")"
}

# vision_patch_u32 SRC DST KEY OLD NEW: the GGUF file SRC with its one u32 KEY, OLD there,
# set to NEW, written to DST.
vision_patch_u32() {
    python3 - "$@" <<'EOF' || fail "$3 in $1 is not the one u32 $4"
import struct, sys
src, dst, key, old, new = sys.argv[1:6]
data = bytearray(open(src, "rb").read())
key = key.encode()
at = data.index(key) + len(key)  # then the value's type (4: uint32) and the value
assert data.count(key) == 1 and struct.unpack_from("<II", data, at) == (4, int(old))
struct.pack_into("<I", data, at + 4, int(new))
open(dst, "wb").write(data)
EOF
}
