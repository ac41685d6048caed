#!/bin/sh
# The `corral` client commands against a real `corral serve` (issue 8): the server starting by
# itself, a proxy in the environment left out for it, create from a Modelfile, list, show (a
# vision model's Projector too), run (argument and piped stdin, --format json or a schema,
# compared with the server's own /api/generate text; words after --), cp, rm, ps (and its
# columns from a canned /api/ps), stop, create --quantize, create from a safetensors checkpoint
# directory (a sentence-transformers one with its module folders too) and with a PEFT adapter
# directory, Modelfile errors naming the line,
# flags in the forms ollama reads (--verbose=false, -fPATH, --file=PATH, -q=LEVEL),
# help, unknown commands, and the REPL in a pseudo-terminal (repl_pty.py).
# Env: CORRAL_BIN, CORRAL_FIXTURES, CORRAL_CHECKPOINT_WRITER (test_convert). Exits non-zero on
# the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-cli.XXXXXX")
port=$(free_port)
export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
unset OLLAMA_HOST
mkdir -p "$HOME"
corral=$CORRAL_BIN

# the server was started by the client, detached: found by our unique store path
canned_pid=""
cleanup() {
    [ -z "$canned_pid" ] || kill "$canned_pid" 2>/dev/null || true
    stop_detached "CORRAL_MODELS=$work/models"
    rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; [ -f "$HOME/.corral/server.log" ] && tail -20 "$HOME/.corral/server.log"; exit 1; }
# expect NAME TEXT FILE: FILE contains TEXT
expect() { grep -qF -- "$2" "$3" || fail "$1: expected '$2' in: $(cat "$3")"; ok "$1"; }

"$corral" --version >"$work/out" 2>"$work/err"
expect "--version without a server warns" "could not connect" "$work/err"

"$corral" list >"$work/out" 2>&1 || fail "list starting the server: $(cat "$work/out")"
expect "list starts a server by itself" "NAME" "$work/out"
[ -s "$HOME/.corral/server.log" ] || fail "no ~/.corral/server.log"
"$corral" --version >"$work/out" 2>&1
expect "--version asks the server" "corral version is" "$work/out"
# a proxy set in the environment (port 9: nothing answers) is not used for the local server
http_proxy=http://127.0.0.1:9 ALL_PROXY=http://127.0.0.1:9 "$corral" list >"$work/out" 2>&1 ||
    fail "list with a proxy in the environment: $(cat "$work/out")"
expect "a proxy in the environment does not carry requests to the local server" "NAME" "$work/out"

# create: FROM a path relative to the Modelfile, every kind of value
mkdir -p "$work/src"
ln -s "$CORRAL_FIXTURES/tiny-tolstoy-f32.gguf" "$work/src/tolstoy.gguf"
cat > "$work/src/Modelfile" <<'EOF'
# tiny-tolstoy, greedy
FROM ./tolstoy.gguf
PARAMETER temperature 0
PARAMETER num_predict 16
PARAMETER stop "<end>"
PARAMETER stop ###
TEMPLATE """{{ if .System }}{{ .System }}
{{ end }}{{ .Prompt }}"""
SYSTEM "The war was over."
MESSAGE user Who is Pierre?
MESSAGE assistant A count.
LICENSE MIT
EOF
"$corral" create tolstoy -f "$work/src/Modelfile" >"$work/out" 2>&1 || fail "create: $(cat "$work/out")"
expect "create from a Modelfile" "success" "$work/out"
"$corral" list >"$work/out"
expect "list shows the model" "tolstoy:latest" "$work/out"
"$corral" show tolstoy --modelfile >"$work/out"
expect "show --modelfile has the parameter" "PARAMETER temperature 0" "$work/out"
expect "show --modelfile has the messages" "MESSAGE user Who is Pierre?" "$work/out"
"$corral" show tolstoy --parameters >"$work/out"
expect "show --parameters" "num_predict" "$work/out"
expect "show --parameters keeps both stops" '"###"' "$work/out"
"$corral" show tolstoy --system >"$work/out"
expect "show --system" "The war was over." "$work/out"
"$corral" show tolstoy --license >"$work/out"
expect "show --license" "MIT" "$work/out"
"$corral" show tolstoy >"$work/out"
expect "show has the Model section" "architecture" "$work/out"
"$corral" show tolstoy --license=1 --modelfile=false --verbose=False >"$work/out"
expect "show takes ollama's boolean values (--license=1 --modelfile=false)" "MIT" "$work/out"
if "$corral" show tolstoy --license=yes >"$work/out" 2>&1; then fail "show --license=yes succeeded"; fi
expect "show refuses a flag value that is no boolean" 'invalid value "yes" for --license' "$work/out"
if "$corral" run tolstoy --think=extreme "Pierre" >"$work/out" 2>&1 </dev/null; then fail "run --think=extreme succeeded"; fi
expect "run refuses a thinking level ollama refuses" 'invalid value for --think: "extreme"' "$work/out"
if "$corral" show nobody >"$work/out" 2>&1; then fail "show of a missing model succeeded"; fi
expect "show of a missing model fails" "not found" "$work/out"

# run: greedy output equals the server's own /api/generate text
curl -fs "http://127.0.0.1:$port/api/generate" \
    -d '{"model":"tolstoy","prompt":"Prince Andrew","stream":false}' > "$work/reference.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; sys.stdout.write(r if r.endswith("\n") else r+"\n")' \
    "$work/reference.json" > "$work/reference.txt"
[ -s "$work/reference.txt" ] || fail "empty reference answer"
"$corral" run tolstoy Prince Andrew >"$work/out" 2>"$work/err" </dev/null || fail "run: $(cat "$work/err")"
cmp -s "$work/out" "$work/reference.txt" || fail "run printed '$(cat "$work/out")', the server said '$(cat "$work/reference.txt")'"
ok "run with a prompt argument prints the server's answer"
printf 'Prince Andrew' | "$corral" run tolstoy >"$work/out" 2>"$work/err" || fail "piped run: $(cat "$work/err")"
cmp -s "$work/out" "$work/reference.txt" || fail "piped run printed '$(cat "$work/out")'"
ok "run with piped stdin prints the server's answer"
# --format with a JSON schema (as ollama's passes it on): the server's constrained answer
schema='{"type":"object","properties":{"age":{"type":"integer"}},"required":["age"]}'
curl -fs "http://127.0.0.1:$port/api/generate" \
    -d "{\"model\":\"tolstoy\",\"prompt\":\"Prince Andrew\",\"stream\":false,\"format\":$schema}" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["response"]; sys.stdout.write(r if r.endswith("\n") else r+"\n")' \
    >"$work/schema.txt"
"$corral" run tolstoy --format "$schema" Prince Andrew >"$work/out" 2>"$work/err" </dev/null || fail "run --format SCHEMA: $(cat "$work/err")"
head -c 1 "$work/out" | grep -q "{" && cmp -s "$work/out" "$work/schema.txt" ||
    fail "run --format SCHEMA printed '$(cat "$work/out")', the server said '$(cat "$work/schema.txt")'"
ok "run --format takes a JSON schema"
if "$corral" run tolstoy --format xml hi >"$work/out" 2>&1 </dev/null; then fail "run --format xml succeeded"; fi
expect "run --format refuses what is neither json nor a schema" "use json or a JSON schema object" "$work/out"
# no prompt, stdin a terminal, stdout a file: no chat nobody sees, a clear error
python3 - "$corral" "$work/out" <<'PY' || fail "run with stdout in a file: $(cat "$work/out")"
import os, pty, subprocess, sys
_, terminal = pty.openpty()
with open(sys.argv[2], "w") as out:
    done = subprocess.run([sys.argv[1], "run", "tolstoy"], stdin=terminal, stdout=out,
                          stderr=subprocess.STDOUT, timeout=60)
sys.exit(0 if done.returncode == 2 else 1)
PY
expect "run without a prompt and stdout in a file says why it stops" "needs a terminal on stdout" "$work/out"
"$corral" run tolstoy --verbose "Prince Andrew" >"$work/out" 2>"$work/err" </dev/null
expect "run --verbose prints statistics" "eval rate:" "$work/err"

# run shows a thinking model's thinking apart: its template's tags are "and" … "countess",
# words of the greedy answer to this prompt (see tools.test.mjs)
cat > "$work/src/Modelfile.think" <<'EOF'
FROM ./tolstoy.gguf
PARAMETER temperature 0
PARAMETER num_predict 48
TEMPLATE """{{ range .Messages }}{{ if eq .Role "assistant" }}{{ if .Thinking }}and {{ .Thinking }} countess{{ end }}{{ .Content }}{{ else }}{{ .Content }}{{ end }}{{ end }}"""
EOF
"$corral" create tolstoy-think -f"$work/src/Modelfile.think" >"$work/out" 2>&1 || fail "create tolstoy-think: $(cat "$work/out")"
"$corral" run tolstoy-think "Natasha looked at him and" >"$work/out" 2>"$work/err" </dev/null || fail "run thinking: $(cat "$work/err")"
printf 'Thinking...\nsaw that the\n...done thinking.\n\nwas not at the first time.\n' >"$work/want"
head -5 "$work/out" | cmp -s - "$work/want" || fail "run of a thinking model printed '$(cat "$work/out")'"
ok "run prints the thinking between Thinking... and ...done thinking."
"$corral" run tolstoy-think --hidethinking "Natasha looked at him and" >"$work/out" 2>"$work/err" </dev/null
head -1 "$work/out" | grep -qx "was not at the first time." || fail "--hidethinking printed '$(cat "$work/out")'"
ok "run --hidethinking prints only the answer"
"$corral" run tolstoy-think --think=false "Natasha looked at him and" >"$work/out" 2>"$work/err" </dev/null
head -1 "$work/out" | grep -qx " saw that the countess was not at the first time." || fail "--think=false printed '$(cat "$work/out")'"
ok "run --think=false prints the whole answer as it came"
if "$corral" run tolstoy --think "Prince Andrew" >"$work/out" 2>&1 </dev/null; then fail "--think on a plain model succeeded"; fi
expect "run --think on a model that cannot think fails" "does not support thinking" "$work/out"

# run with an embedding model prints the prompt's embedding, as ollama does
ln -s "$CORRAL_FIXTURES/arch/bert.gguf" "$work/src/bert.gguf"
printf 'FROM ./bert.gguf\n' >"$work/src/Modelfile.bert"
"$corral" create bert --file="$work/src/Modelfile.bert" >"$work/out" 2>&1 || fail "create bert: $(cat "$work/out")"
"$corral" run bert "The quick brown fox" >"$work/out" 2>"$work/err" </dev/null || fail "run bert: $(cat "$work/err")"
python3 -c 'import json,math,sys; v=json.load(open(sys.argv[1])); assert len(v)==64 and abs(math.hypot(*v)-1)<1e-5, v' "$work/out" \
    || fail "run of an embedding model printed '$(cat "$work/out")'"
ok "run of an embedding model prints a unit vector"
"$corral" run bert --dimensions 8 "The quick brown fox" >"$work/out" 2>"$work/err" </dev/null
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1])))==8' "$work/out" || fail "--dimensions 8 printed '$(cat "$work/out")'"
ok "run --dimensions cuts the embedding"
long_text=$(python3 -c 'print("The quick brown fox jumps over the lazy dog. " * 20)')
"$corral" run bert --truncate=1 --verbose=false "$long_text" >"$work/out" 2>"$work/err" </dev/null || fail "run --truncate=1: $(cat "$work/err")"
ok "run --truncate=1 embeds a text longer than the context"
if "$corral" run bert --truncate=false "$long_text" >"$work/out" 2>&1 </dev/null; then fail "run --truncate=false took a long text"; fi
expect "run --truncate=false refuses a text longer than the context" "exceeds the context length" "$work/out"
if "$corral" run bert >"$work/out" 2>&1 </dev/null; then fail "run of an embedding model without text succeeded"; fi
expect "run of an embedding model without text fails" "needs text to embed" "$work/out"

# word wrap on a 25-column terminal (20 to wrap at): wide CJK characters count two columns and
# a line may break between them; words of Latin text stay whole (a canned server's answer)
python3 - "$corral" <<'PY' || fail "word wrap"
import fcntl, http.server, json, os, pty, struct, subprocess, sys, termios, threading, unicodedata
corral = sys.argv[1]
text = "東京は日本の首都です。" * 3 + " The quick brown fox jumps over the lazy dog again and again."
class Canned(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, body, kind="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_HEAD(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/api/show":
            self.reply(json.dumps({"capabilities": ["completion"], "model_info": {}}).encode())
        else:
            chunks = [text[i:i + 3] for i in range(0, len(text), 3)]
            lines = [json.dumps({"response": c, "done": False}) for c in chunks]
            lines.append(json.dumps({"response": "", "done": True}))
            self.reply(("\n".join(lines) + "\n").encode(), "application/x-ndjson")
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
threading.Thread(target=server.serve_forever, daemon=True).start()
os.environ["CORRAL_HOST"] = "127.0.0.1:%d" % server.server_address[1]
master, terminal = pty.openpty()
fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 25, 0, 0))  # 20 to wrap at
child = subprocess.Popen([corral, "run", "canned", "hi"], stdin=terminal, stdout=terminal,
                         stderr=terminal, start_new_session=True)
os.close(terminal)
out = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
child.wait(timeout=60)
shown = out.decode()
width = lambda s: sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
lines = shown.replace("\r\n", "\n").rstrip("\n").split("\n")
whole = all(any(word in line for line in lines) for word in text.split(" ")[1:])
if not all(width(line) <= 20 for line in lines) or not whole or \
        "".join(shown.split()) != "".join(text.split()):
    sys.exit("wrapped at 20 columns as %r" % lines)
PY
ok "word wrap counts wide characters as two columns and breaks between them"

# cp, rm, ps, stop
"$corral" cp tolstoy tolstoy-copy >"$work/out"
expect "cp" "copied 'tolstoy' to 'tolstoy-copy'" "$work/out"
"$corral" list tolstoy-c >"$work/out"
expect "list with a prefix shows the copy" "tolstoy-copy:latest" "$work/out"
"$corral" rm tolstoy-copy >"$work/out"
expect "rm" "deleted 'tolstoy-copy'" "$work/out"
"$corral" list >"$work/out"
! grep -q "tolstoy-copy" "$work/out" || fail "the copy is still listed"
ok "rm removed the copy"
if "$corral" rm tolstoy-copy >"$work/out" 2>&1; then fail "rm of a missing model succeeded"; fi
ok "rm of a missing model fails"
"$corral" ps >"$work/out"
expect "ps shows the loaded model" "tolstoy:latest" "$work/out"
expect "ps shows the processor" "100% CPU" "$work/out"
"$corral" ps TOLSTOY >"$work/out"
expect "ps with a prefix ignores case" "tolstoy:latest" "$work/out"
"$corral" list TOLSTOY >"$work/out"
expect "list with a prefix ignores case" "tolstoy:latest" "$work/out"
"$corral" run tolstoy -- --verbose Andrew >"$work/out" 2>"$work/err" </dev/null || fail "run --: $(cat "$work/err")"
[ -s "$work/out" ] && ! grep -q "eval rate" "$work/err" || fail "run -- took a prompt word for a flag: $(cat "$work/err")"
ok "run: words after -- are the prompt"
"$corral" stop tolstoy
"$corral" ps >"$work/out"
! grep -q "tolstoy" "$work/out" || fail "stop: still loaded: $(cat "$work/out")"
ok "stop unloads the model"
if "$corral" stop nobody >"$work/out" 2>&1; then fail "stop of a missing model succeeded"; fi
expect "stop of a missing model fails" "couldn't find model" "$work/out"

# ps's columns from a server's figures that a CPU-only server never sends: a split between CPU
# and GPU (rounded as ollama rounds it), inconsistent sizes, a model kept forever, one stopping
canned_port=$(free_port)
python3 - "$canned_port" <<'PY' &
import http.server, json, sys
body = json.dumps({"models": [
    {"name": "split:latest", "digest": "0123456789abcdef", "size": 1000, "size_vram": 476,
     "context_length": 2048, "expires_at": "2999-01-01T00:00:00Z"},
    {"name": "odd:latest", "digest": "fedcba9876543210", "size": 100, "size_vram": 200,
     "context_length": 512, "expires_at": "2001-01-01T00:00:00Z"}]}).encode()
class Canned(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_HEAD(self):  # the client's "is a server there" check
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Canned).serve_forever()
PY
canned_pid=$!
wait_for_url "http://127.0.0.1:$canned_port/api/ps" || fail "the canned /api/ps server did not start"
CORRAL_HOST="127.0.0.1:$canned_port" "$corral" ps >"$work/out" || fail "ps against canned figures"
kill "$canned_pid"
canned_pid=""
expect "ps rounds a CPU/GPU split as ollama" "52%/48% CPU/GPU" "$work/out"
expect "ps says Unknown for more GPU memory than the model's size" "Unknown" "$work/out"
expect "ps shows a model kept forever" "Forever" "$work/out"
expect "ps shows an expired model stopping" "Stopping..." "$work/out"

# create --quantize: the engine rewrites the weights, show reports the level, run answers
"$corral" create tolstoy-q4 -q=q4_K_M -f "$work/src/Modelfile" >"$work/out" 2>&1 || fail "create -q: $(cat "$work/out")"
expect "create -q reports the quantization" "quantizing F32 model to Q4_K_M" "$work/out"
expect "create -q succeeds" "success" "$work/out"
"$corral" show tolstoy-q4 >"$work/out"
expect "show reports the quantization level" "Q4_K_M" "$work/out"
"$corral" run tolstoy-q4 Prince Andrew >"$work/out" 2>"$work/err" </dev/null || fail "run of the quantized model: $(cat "$work/err")"
[ -n "$(tr -d '[:space:]' < "$work/out")" ] || fail "the quantized model answered nothing"
ok "the quantized model answers"
"$corral" stop tolstoy-q4
if "$corral" create bad-q -q q3_K_M -f "$work/src/Modelfile" >"$work/out" 2>&1; then fail "create -q q3_K_M succeeded"; fi
expect "create -q refuses an unknown level" "unsupported quantization type q3_K_M" "$work/out"

# create FROM a Hugging Face checkpoint directory: the server converts it, then quantizes
"$CORRAL_CHECKPOINT_WRITER" --write-checkpoint "$work/src/qwen2-hf" >"$work/out" 2>&1 || fail "writing the checkpoint: $(cat "$work/out")"
echo "a model card the client does not upload" > "$work/src/qwen2-hf/README.md"
printf 'FROM ./qwen2-hf\n' > "$work/src/Modelfile.hf"
"$corral" create qwen2-hf -q q8_0 -f "$work/src/Modelfile.hf" >"$work/out" 2>&1 || fail "create from a checkpoint: $(cat "$work/out")"
expect "create from a checkpoint converts it" "converting model" "$work/out"
expect "create from a checkpoint quantizes the converted model" "quantizing F16 model to Q8_0" "$work/out"
"$corral" show qwen2-hf >"$work/out"
expect "show reports the converted architecture" "qwen2" "$work/out"
"$corral" run qwen2-hf hello >"$work/out" 2>"$work/err" </dev/null || fail "run of the converted model: $(cat "$work/err")"
ok "the converted model runs"
"$corral" stop qwen2-hf

# FROM a sentence-transformers checkpoint: its modules' files one folder down (the pooling
# module's config.json, EmbeddingGemma's Dense modules' config.json and model.safetensors) go
# up with it
"$CORRAL_CHECKPOINT_WRITER" --write-embedding-checkpoints "$work/src" >"$work/out" 2>&1 || fail "writing the embedding checkpoints: $(cat "$work/out")"
for m in bert-hf embeddinggemma-hf; do
    printf 'FROM ./%s\n' "$m" > "$work/src/Modelfile.$m"
    "$corral" create "$m" -f "$work/src/Modelfile.$m" >"$work/out" 2>&1 || fail "create from $m: $(cat "$work/out")"
    "$corral" show "$m" >"$work/out"
    expect "the converted $m is an embedding model" "embedding" "$work/out"
done

# ADAPTER of a PEFT directory: the server converts the LoRA adapter for the model
"$CORRAL_CHECKPOINT_WRITER" --write-adapter "$work/src/peft" >"$work/out" 2>&1 || fail "writing the adapter: $(cat "$work/out")"
ln -s "$CORRAL_FIXTURES/arch/llama-gqa.gguf" "$work/src/llama-gqa.gguf"
printf 'FROM ./llama-gqa.gguf\nADAPTER ./peft\n' > "$work/src/Modelfile.peft"
"$corral" create llama-peft -f "$work/src/Modelfile.peft" >"$work/out" 2>&1 || fail "create with a PEFT adapter: $(cat "$work/out")"
expect "create converts a PEFT adapter" "converting adapter" "$work/out"
"$corral" show llama-peft --modelfile >"$work/out"
expect "show --modelfile lists the converted adapter" "ADAPTER " "$work/out"
printf 'FROM ./llama-gqa.gguf\nADAPTER ./peft\nADAPTER ./peft\n' > "$work/src/Modelfile.peft2"
if "$corral" create llama-peft2 -f "$work/src/Modelfile.peft2" >"$work/out" 2>&1; then fail "create with two PEFT adapters succeeded"; fi
expect "a PEFT adapter must be the only ADAPTER" "line 3: a safetensors adapter must be the model's only ADAPTER" "$work/out"

# speculative decoding: a DRAFT model (the F16 copy) and prompt lookup give the tokens plain
# decoding gives (draft_num_predict 0 turns both off); the request log counts the guesses
ln -s "$CORRAL_FIXTURES/tiny-tolstoy-f16.gguf" "$work/src/tolstoy-f16.gguf"
printf 'FROM ./tolstoy.gguf\n' > "$work/src/Modelfile.plain"
printf 'FROM ./tolstoy.gguf\nDRAFT ./tolstoy-f16.gguf\n' > "$work/src/Modelfile.draft"
"$corral" create tolstoy-plain -f "$work/src/Modelfile.plain" >"$work/out" 2>&1 || fail "create: $(cat "$work/out")"
"$corral" create tolstoy-drafted -f "$work/src/Modelfile.draft" >"$work/out" 2>&1 || fail "create with DRAFT: $(cat "$work/out")"
"$corral" show tolstoy-drafted --modelfile >"$work/out"
expect "show --modelfile lists the draft" "DRAFT " "$work/out"
if "$corral" create bad-dq --draft-quantize q8_0 -f "$work/src/Modelfile.plain" >"$work/out" 2>&1; then fail "create --draft-quantize without DRAFT succeeded"; fi
expect "create --draft-quantize needs a DRAFT line, as ollama's" "requires a DRAFT model" "$work/out"
"$corral" create tolstoy-dq --draft-quantize=q8_0 -f "$work/src/Modelfile.draft" >"$work/out" 2>&1 || fail "create --draft-quantize: $(cat "$work/out")"
expect "create --draft-quantize quantizes the DRAFT model" "quantizing F16 draft model to Q8_0" "$work/out"
gen() { # MODEL DRAFT_NUM_PREDICT: the greedy context of 120 tokens
    curl -fs "http://$CORRAL_HOST/api/generate" -d "{\"model\":\"$1\",\"prompt\":\"Natasha looked at him and\",\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":120$2}}" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["context"])'
}
plain=$(gen tolstoy-plain ',"draft_num_predict":0') || fail "plain generate"
[ "$(gen tolstoy-drafted '')" = "$plain" ] || fail "the draft model changed the answer"
[ "$(gen tolstoy-plain '')" = "$plain" ] || fail "prompt lookup changed the answer"
[ "$(gen tolstoy-dq '')" = "$plain" ] || fail "the quantized draft model changed the answer"
grep "model=tolstoy-drafted" "$HOME/.corral/server.log" | grep -q "draft_accepted=[1-9]" ||
    fail "the request log shows no kept guess: $(grep tolstoy-drafted "$HOME/.corral/server.log")"
ok "speculative decoding (draft model, prompt lookup) gives plain decoding's tokens"
"$corral" stop tolstoy-drafted
"$corral" stop tolstoy-dq
"$corral" stop tolstoy-plain

# Modelfile errors name the line and create nothing
bad() { # bad NAME EXPECTED MODELFILE_TEXT
    printf '%b' "$3" > "$work/src/Bad"
    if "$corral" create bad -f "$work/src/Bad" >"$work/out" 2>&1; then fail "$1: create succeeded"; fi
    expect "$1" "$2" "$work/out"
}
bad "unknown parameter names its line" "line 3: unknown parameter 'tempature'" \
    'FROM tolstoy\n\nPARAMETER tempature 0.5\n'
bad "a parameter of the wrong type names its line" "line 2: invalid int value '1.5' for parameter num_ctx" \
    'FROM tolstoy\nPARAMETER num_ctx 1.5\n'
bad "an unknown instruction names its line" 'line 2: command must be one of' 'FROM tolstoy\nFORM x\n'
bad "an unterminated multi-line value names its line" 'line 2: unterminated """' \
    'FROM tolstoy\nSYSTEM """never\nclosed\n'
bad "a bad message role names its line" 'line 2: message role must be one of' \
    'FROM tolstoy\nMESSAGE robot hi\n'
bad "a missing FROM file names its line" 'line 1: ./missing.gguf' 'FROM ./missing.gguf\n'
bad "no FROM line" 'no FROM line' 'SYSTEM hello\n'
"$corral" list >"$work/out"
! grep -q "^bad" "$work/out" || fail "a failed create left a model"
ok "failed creates leave no model"

# help for each command
for c in run pull push list ps show rm cp create stop; do
    "$corral" "$c" --help >"$work/out" || fail "$c --help"
    expect "$c --help" "Usage: corral" "$work/out"
done
"$corral" help create >"$work/out"
expect "help create" "--quantize" "$work/out"
set +e
"$corral" lsit >"$work/out" 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "an unknown command exited with $code"
expect "an unknown command suggests the one meant" "Did you mean 'list'" "$work/out"
if "$corral" help lsit >"$work/out" 2>&1; then fail "help of an unknown command succeeded"; fi
expect "help of an unknown command names it" "unknown command 'lsit'" "$work/out"
"$corral" run --help >"$work/out"
expect "run --help names the variables it reads" "NOHISTORY" "$work/out"
"$corral" serve --help >"$work/out" || fail "serve --help"
expect "serve --help lists the server's settings" "NUM_PARALLEL" "$work/out"
expect "serve --help says the OLLAMA_ names work" "else OLLAMA_NAME" "$work/out"
"$corral" start --help >"$work/out" || fail "start --help"
expect "start is an alias of serve" "Usage: corral serve" "$work/out"
"$corral" create --help >"$work/out" || fail "create --help"
expect "create --help lists the checkpoints it converts" "...Model: Bert, NomicBert" "$work/out"

# the REPL, last: its Ctrl-C test cancels a generation mid-stream
vision="$CORRAL_FIXTURES/vision"
cp "$vision/square.png" "$work/src/square.png"
printf 'FROM %s/gemma3-text.gguf\nFROM %s/gemma3-mmproj.gguf\nPARAMETER temperature 0\nPARAMETER num_predict 4\n' \
    "$vision" "$vision" >"$work/src/Modelfile.vision"
"$corral" create gemma3v -f "$work/src/Modelfile.vision" >"$work/out" 2>&1 || fail "create gemma3v: $(cat "$work/out")"
"$corral" show gemma3v >"$work/out"
python3 -c 'import sys; assert "  Projector\n    architecture        clip\n    parameters          82K\n" in open(sys.argv[1]).read()' "$work/out" ||
    fail "show of a vision model has no Projector section: $(cat "$work/out")"
ok "show of a vision model has the Projector section"
# the editor Ctrl-G opens: it adds two lines to the prompt it is given
printf '#!/bin/sh\nprintf "%%s\\nfrom the editor\\nPierre\\n" "$(cat "$1")" >"$1"\n' >"$work/editor.sh"
chmod +x "$work/editor.sh"
OLLAMA_EDITOR="$work/editor.sh" python3 "$here/repl_pty.py" "$corral" tolstoy tolstoy-saved gemma3v "$work/src/square.png" ||
    fail "REPL"
"$corral" show tolstoy-saved-pasted --modelfile >"$work/out"
python3 -c 'import sys; assert "MESSAGE user \"/set nothing\nPierre\nNatasha\"" in open(sys.argv[1]).read()' "$work/out" ||
    fail "the pasted block was not one message: $(cat "$work/out")"
ok "a pasted block went as one message"
python3 -c 'import sys; assert "MESSAGE user \"Natasha\nfrom the editor\nPierre\"" in open(sys.argv[1]).read()' "$work/out" ||
    fail "the edited prompt was not one message: $(cat "$work/out")"
ok "the prompt from the editor went as one message"
"$corral" show tolstoy-saved --system >"$work/out"
expect "/save kept the session's system message" "Tolstoy." "$work/out"
[ -s "$HOME/.corral/history" ] || fail "no REPL history file"
expect "the REPL history file has the inputs" "Natasha" "$HOME/.corral/history"
echo "all CLI checks passed"
