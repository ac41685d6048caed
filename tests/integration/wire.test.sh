#!/bin/sh
# Raw wire checks of `corral serve` with curl (issue 7): content types and NDJSON framing,
# zstd-compressed request bodies (zstd, from the Debian package zstd),
# /metrics as Prometheus text (promtool, from the Debian package prometheus),
# status codes, CORS preflight, the Host-header guard, the request-size cap, option types,
# embeddings on a model without them, the server's own memory, the pending-request queue
# (one slot, one waiting request: the next is 503; a client that leaves frees its slot or its
# place in the queue, streamed or not, before any byte), and
# OLLAMA_KV_CACHE_TYPE (a q8_0 cache answers and /api/ps counts it smaller; a bad value stops
# the server).
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
unset CORRAL_KV_CACHE_TYPE OLLAMA_KV_CACHE_TYPE CORRAL_CONTEXT_LENGTH OLLAMA_CONTEXT_LENGTH
# Under the sanitizers a process that exits runs LeakSanitizer, which first stops every thread
# with ptrace; on these VMs that sometimes takes seconds (a runner caught after SIGTERM with
# its leak checker still waiting to stop its exiting main thread), past the shutdown bound
# below and the server's 5 s grace. The unit tests are where leaks are checked.
[ "${CORRAL_SANITIZED:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-wire.XXXXXX")
port=$(free_port)
base="http://127.0.0.1:$port"
CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" CORRAL_MAX_REQUEST_MB=1 \
    CORRAL_NUM_PARALLEL=1 CORRAL_MAX_QUEUE=1 \
    "$CORRAL_BIN" serve 2>"$work/server.log" &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_for_url "$base/" || true

fail() { echo "FAIL: $*"; cat "$work/server.log"; exit 1; }
# check NAME EXPECTED_STATUS CURL_ARGS... : the status, body in $work/body, headers in $work/head
check() {
    name=$1 want=$2
    shift 2
    got=$(curl -s -o "$work/body" -D "$work/head" -w '%{http_code}' "$@") || true
    [ "$got" = "$want" ] || fail "$name: status $got, expected $want: $(cat "$work/body")"
    echo "ok   $name"
}
header() { grep -qi "^$1" "$work/head" || fail "missing header '$1'"; }

check "GET / says the server runs" 200 "$base/"
grep -qx "Ollama is running" "$work/body" || fail "root body"
check "HEAD / answers" 200 -I "$base/"
check "version is JSON" 200 "$base/api/version"
header "Content-Type: application/json"
check "unknown path is 404 text" 404 "$base/api/nothing"
grep -q "404 page not found" "$work/body" || fail "404 body"
check "wrong method is 405" 405 -X DELETE "$base/api/generate"
check "missing body is 400" 400 -X POST "$base/api/generate"
grep -q '"error":"missing request body"' "$work/body" || fail "400 body"
check "bad JSON is 400" 400 "$base/api/chat" -d '{oops'
check "unknown model is 404" 404 "$base/api/generate" -d '{"model":"nope","prompt":"x"}'
grep -q "model 'nope' not found" "$work/body" || fail "404 model body"
check "invalid name is 400" 400 "$base/api/show" -d '{"model":"bad name!"}'
check "foreign Host header is 403" 403 -H "Host: evil.example.com" "$base/api/version"
check "localhost Host header is fine" 200 -H "Host: localhost:$port" "$base/api/version"
check "CORS preflight from localhost" 204 -X OPTIONS -H "Origin: http://localhost:3000" \
    -H "Access-Control-Request-Method: POST" "$base/api/chat"
header "Access-Control-Allow-Origin: http://localhost:3000"
# a browser sends only the headers a preflight allows: the Anthropic SDK's (its key, version
# and browser opt-in) and the SDKs' helper header are among them, beside OpenAI's
for h in x-api-key anthropic-version anthropic-beta anthropic-dangerous-direct-browser-access \
    x-stainless-helper OpenAI-Beta x-stainless-retry-count; do
    tr -d '\r' < "$work/head" | grep -i "^Access-Control-Allow-Headers:" | grep -qiE "[ ,]$h(,|$)" ||
        fail "preflight does not allow $h"
done
check "CORS refuses a foreign origin" 403 -X OPTIONS -H "Origin: http://evil.example.com" "$base/api/chat"
! grep -qi "^Access-Control-Allow-Origin" "$work/head" || fail "foreign origin allowed"
head -c 2000000 /dev/zero | tr '\0' 'a' > "$work/big"
check "oversized body is 413" 413 "$base/api/chat" --data-binary @"$work/big"

# a model, then NDJSON framing of a stream
model="$CORRAL_FIXTURES/stories260K.gguf"
digest="sha256:$(sha256sum "$model" | cut -d' ' -f1)"
check "blob upload is 201" 201 -T "$model" -X POST "$base/api/blobs/$digest"
check "blob digest mismatch is 400" 400 --data-binary "not the model" \
    -X POST "$base/api/blobs/sha256:$(printf x | sha256sum | cut -d' ' -f1)"
check "bad digest is 400" 400 -I "$base/api/blobs/sha256:XYZ"
check "create from the blob" 200 "$base/api/create" \
    -d "{\"model\":\"stories\",\"files\":{\"m.gguf\":\"$digest\"},\"stream\":false}"
check "generate streams NDJSON" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once upon a time","options":{"num_predict":12,"temperature":0}}'
header "Content-Type: application/x-ndjson"
lines=$(wc -l < "$work/body")
[ "$lines" -ge 2 ] || fail "expected several NDJSON lines, got $lines"
python3 - "$work/body" <<'PY' || fail "NDJSON framing"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "stream must end with a newline"
objs = [json.loads(l) for l in lines[:-1]]
assert all(not o["done"] for o in objs[:-1]) and objs[-1]["done"] is True
assert objs[-1]["done_reason"] in ("stop", "length") and objs[-1]["eval_count"] > 0
PY
echo "ok   NDJSON lines are whole JSON objects ending with done"
check "metrics are Prometheus text" 200 "$base/metrics"
header "Content-Type: text/plain; version=0.0.4"
promtool check metrics < "$work/body" || fail "promtool rejects /metrics"
grep -q '^corral_http_requests_total{method="POST",path="/api/generate",status="200"} 1$' "$work/body" ||
    fail "the generation is not counted: $(cat "$work/body")"
echo "ok   promtool accepts /metrics, which counts the generation"
check "stream:false is one JSON object" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once upon a time","stream":false,"options":{"num_predict":12}}'
header "Content-Type: application/json"

# zstd bodies (Codex compresses its /v1/responses requests): decoded under the same 1 MB cap
printf '%s' '{"model":"stories","input":"Once upon a time","max_output_tokens":4}' | zstd -q -c > "$work/req.zst"
check "a zstd body is decoded" 200 "$base/v1/responses" -H "Content-Encoding: zstd" --data-binary @"$work/req.zst"
grep -q '"object":"response"' "$work/body" || fail "zstd response: $(cat "$work/body")"
head -c 12 "$work/req.zst" > "$work/cut.zst"
check "a truncated zstd body is 400" 400 "$base/api/generate" -H "Content-Encoding: zstd" --data-binary @"$work/cut.zst"
python3 -c 'print("{\"model\":\"stories\",\"prompt\":\"" + "a" * 2000000 + "\"}")' | zstd -q -c > "$work/bomb.zst"
[ "$(wc -c < "$work/bomb.zst")" -lt 4096 ] || fail "the zstd bomb should be small"
check "a zstd body past the cap once decoded is 413" 413 "$base/api/generate" -H "Content-Encoding: zstd" \
    --data-binary @"$work/bomb.zst"
python3 -c 'print("{\"prompt\":\"" + "a" * 9000000 + "\"}")' | zstd -q --long=24 -c > "$work/window.zst"
check "a zstd frame asking for a window over 8 MiB is 400" 400 "$base/api/generate" \
    -H "Content-Encoding: zstd" --data-binary @"$work/window.zst"
grep -q "too much memory" "$work/body" || fail "window refusal: $(cat "$work/body")"
check "another Content-Encoding is 415" 415 "$base/api/generate" -H "Content-Encoding: br" --data-binary 'x'

check "a wrongly typed option is 400" 400 "$base/api/generate" \
    -d '{"model":"stories","prompt":"x","options":{"temperature":"hot"}}'
grep -q 'temperature' "$work/body" || fail "the error names the option: $(cat "$work/body")"
check "an unknown option is ignored" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"x","stream":false,"options":{"no_such_option":1,"num_predict":2}}'
check "_debug_render_only renders without inference" 200 "$base/api/chat" \
    -d '{"model":"stories","messages":[{"role":"user","content":"Hello there"}],"_debug_render_only":true}'
grep -q '"rendered_template":"[^"]*Hello there' "$work/body" || fail "render: $(cat "$work/body")"
# found by fuzz_options: a message without content met a Jinja template as undefined (500);
# ollama reads it as "". Messages of the wrong shape are the request's fault.
jinja="$CORRAL_FIXTURES/vocab-llama3-bpe.gguf"
jinja_digest="sha256:$(sha256sum "$jinja" | cut -d' ' -f1)"
check "blob upload (a GGUF with a Jinja chat template)" 201 -T "$jinja" -X POST "$base/api/blobs/$jinja_digest"
check "create it" 200 "$base/api/create" \
    -d "{\"model\":\"jinja\",\"files\":{\"m.gguf\":\"$jinja_digest\"},\"stream\":false}"
check "a message without content renders as empty" 200 "$base/api/chat" \
    -d '{"model":"jinja","messages":[{"role":"user"},{"role":"user","content":null}],"_debug_render_only":true}'
check "a message that is not an object is 400" 400 "$base/api/chat" \
    -d '{"model":"jinja","messages":["hello"],"_debug_render_only":true}'
grep -q 'messages\[0\] must be an object' "$work/body" || fail "message error: $(cat "$work/body")"
check "a content that is not a string is 400" 400 "$base/api/chat" \
    -d '{"model":"stories","messages":[{"role":"user","content":5}]}'
check "tool call arguments that are not an object (nor its JSON text) are 400" 400 "$base/api/chat" \
    -d '{"model":"stories","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}]}'
# found by fuzz_options: a JSON error echoing part of a UTF-8 sequence could not be sent (500)
printf '{"a":"\\\336\242"}' > "$work/cut-utf8"
for path in /api/chat /v1/chat/completions /v1/messages /v1/responses; do
    check "bad JSON echoing a cut UTF-8 sequence is 400 on $path" 400 "$base$path" --data-binary @"$work/cut-utf8"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/body" || fail "not JSON: $(cat "$work/body")"
done
check "embed on a model without embeddings is 400" 400 "$base/api/embed" \
    -d '{"model":"stories","input":"hi"}'
grep -q 'does not support embeddings' "$work/body" || fail "embed: $(cat "$work/body")"
check "legacy embeddings likewise" 400 "$base/api/embeddings" -d '{"model":"stories","prompt":"hi"}'

# the server process itself stays small: the model lives in its runner child. Under the
# sanitizers (CORRAL_SANITIZED=1) shadow memory and the freed-memory quarantine make the same
# server about three times as large (15 MB in release, 50 MB under ASan).
limit_mb=50
[ "${CORRAL_SANITIZED:-0}" = 1 ] && limit_mb=150
rss_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$server/status")
[ "$rss_kb" -lt $((limit_mb * 1024)) ] || fail "server RSS ${rss_kb} kB, over $limit_mb MB"
echo "ok   server RSS ${rss_kb} kB"

# one slot busy with an endless stream, one request waiting: the next is 503. The streaming
# client then leaves; its generation must stop so that the waiting request is served.
# (tiny-tolstoy: its greedy text never reaches end-of-sequence; context shifts keep it going)
tolstoy="$CORRAL_FIXTURES/tiny-tolstoy-f16.gguf"
tolstoy_digest="sha256:$(sha256sum "$tolstoy" | cut -d' ' -f1)"
check "blob upload (tiny-tolstoy)" 201 -T "$tolstoy" -X POST "$base/api/blobs/$tolstoy_digest"
check "create tiny-tolstoy" 200 "$base/api/create" \
    -d "{\"model\":\"tolstoy\",\"files\":{\"m.gguf\":\"$tolstoy_digest\"},\"stream\":false}"
long='{"model":"tolstoy","prompt":"Prince","options":{"num_predict":1000000,"temperature":0}}'
curl -s -N "$base/api/generate" -d "$long" > "$work/long" &
long_client=$!
for _ in $(seq 100); do [ -s "$work/long" ] && break; sleep 0.05; done
[ -s "$work/long" ] || fail "the endless stream did not start"
curl -s -o "$work/waiting" -w '%{http_code}' --max-time 60 "$base/api/generate" \
    -d '{"model":"tolstoy","prompt":"Prince","stream":false,"options":{"num_predict":3}}' \
    > "$work/waiting_status" &
waiting_client=$!
sleep 1
check "a request beyond the queue is 503" 503 --max-time 10 "$base/api/generate" \
    -d '{"model":"tolstoy","prompt":"Prince","stream":false,"options":{"num_predict":3}}'
grep -q 'maximum pending requests exceeded' "$work/body" || fail "503 body: $(cat "$work/body")"
kill "$long_client"
wait "$waiting_client" || true
[ "$(cat "$work/waiting_status")" = 200 ] || fail "the waiting request got $(cat "$work/waiting_status")"
echo "ok   a client that leaves frees its slot for the waiting request"

# A client that leaves while the server writes it nothing: a queued request leaves the queue,
# and a stream:false generation (no byte until its end) stops.
queue_depth() {
    curl -s "$base/metrics" | awk '$1 == "corral_queue_depth" {print $2}'
}
# the redirection below truncates in the background job: empty the file first, or the loop
# may see the last stream's text, start the next request first, and queue the long one instead
: > "$work/long"
curl -s -N "$base/api/generate" -d "$long" > "$work/long" &
long_client=$!
for _ in $(seq 400); do [ -s "$work/long" ] && break; sleep 0.05; done
[ -s "$work/long" ] || fail "the endless stream did not start"
curl -s -N "$base/api/generate" -d "$long" > /dev/null &
queued_client=$!
for _ in $(seq 400); do [ "$(queue_depth)" = 1 ] && break; sleep 0.05; done
[ "$(queue_depth)" = 1 ] || fail "the streamed request did not queue"
kill "$queued_client"
for _ in $(seq 400); do [ "$(queue_depth)" = 0 ] && break; sleep 0.05; done
[ "$(queue_depth)" = 0 ] || fail "a streamed request whose client left stays in the queue"
echo "ok   a queued request whose client leaves leaves the queue"
whole='{"model":"tolstoy","prompt":"Prince","stream":false,"options":{"num_predict":1000000,"temperature":0}}'
curl -s -o /dev/null -w '%{http_code}' "$base/api/generate" -d "$whole" > "$work/whole_status" &
whole_client=$!
for _ in $(seq 400); do [ "$(queue_depth)" = 1 ] && break; sleep 0.05; done
kill "$long_client"
for _ in $(seq 400); do [ "$(queue_depth)" = 0 ] && break; sleep 0.05; done
[ "$(queue_depth)" = 0 ] || fail "the stream:false request did not take the slot"
[ ! -s "$work/whole_status" ] || fail "the stream:false request got $(cat "$work/whole_status")"
curl -s -o "$work/waiting" -w '%{http_code}' --max-time 20 "$base/api/generate" \
    -d '{"model":"tolstoy","prompt":"Prince","stream":false,"options":{"num_predict":3}}' \
    > "$work/waiting_status" &
waiting_client=$!
sleep 0.2
kill "$whole_client"
wait "$waiting_client" || true
[ "$(cat "$work/waiting_status")" = 200 ] ||
    fail "the request after a stream:false one whose client left got $(cat "$work/waiting_status")"
grep -q 'msg="client left: its request stops" model=tolstoy:latest while=queued' \
    "$work/server.log" || fail "no log line for the queued request's client leaving"
grep -q 'msg="client left: its request stops" model=tolstoy:latest while=generating' \
    "$work/server.log" || fail "no log line for the stream:false request's client leaving"
echo "ok   a stream:false generation whose client leaves stops; the next request is served"

# /api/ps size of a loaded model (from $work/body), to compare with a q8_0 KV cache below
ps_size() {
    python3 -c 'import json, sys
print(next(m["size"] for m in json.load(open(sys.argv[1]))["models"] if m["name"] == sys.argv[2]))' \
        "$work/body" "$1" || fail "$1 is not in /api/ps: $(cat "$work/body")" >&2
}
check "ps lists the loaded models" 200 "$base/api/ps"
f16_tolstoy=$(ps_size tolstoy:latest)
f16_stories=$(ps_size stories:latest)

# SIGTERM stops the server and its runners promptly (a runner that cannot see SIGTERM is
# killed only after the 5 s grace period), leaving no runner behind
runners=$(pgrep -f "corral runner --model $work/models/" | wc -l)
[ "$runners" -ge 1 ] || fail "expected a loaded runner before shutdown"
start_ms=$(date +%s%3N)
kill "$server"
wait "$server" || true
elapsed_ms=$(( $(date +%s%3N) - start_ms ))
[ "$elapsed_ms" -lt 3000 ] || fail "shutdown took ${elapsed_ms} ms"
! pgrep -f "corral runner --model $work/models/" >/dev/null || fail "a runner outlived the server"
echo "ok   SIGTERM stops the server and its runner in ${elapsed_ms} ms"

# OLLAMA_KV_CACHE_TYPE=q8_0, the same store: tiny-tolstoy (head size 32) takes the quantized
# cache; stories260K (head size 8) cannot, so its runner falls back to f16.
port=$(free_port)
base="http://127.0.0.1:$port"
OLLAMA_KV_CACHE_TYPE=q8_0 CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" \
    CORRAL_NUM_PARALLEL=1 "$CORRAL_BIN" serve 2>"$work/server.log" &
server=$!
wait_for_url "$base/" || true
for model in tolstoy stories; do
    check "generate ($model) with OLLAMA_KV_CACHE_TYPE=q8_0" 200 "$base/api/generate" \
        -d '{"model":"'"$model"'","prompt":"Prince","stream":false,"options":{"num_predict":8,"temperature":0}}'
    python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["response"].strip()' \
        "$work/body" || fail "$model answered no text: $(cat "$work/body")"
done
pgrep -f "corral runner --model $work/models/.* --kv q8_0" >/dev/null || fail "no runner got --kv q8_0"
echo "ok   the runners get --kv q8_0"
check "ps lists the q8_0 models" 200 "$base/api/ps"
q8_tolstoy=$(ps_size tolstoy:latest)
q8_stories=$(ps_size stories:latest)
# 5 layers x 4 KV heads x (K + V) x 4096 cells, one 32-component row each: 34 bytes, not 64
[ $((f16_tolstoy - q8_tolstoy)) -eq $((5 * 4 * 2 * 4096 * (64 - 34))) ] ||
    fail "tolstoy's size is $q8_tolstoy with a q8_0 KV cache, $f16_tolstoy with f16"
echo "ok   /api/ps counts tolstoy's q8_0 KV cache: $q8_tolstoy bytes, $f16_tolstoy with f16"
[ "$q8_stories" -eq "$f16_stories" ] ||
    fail "stories' size is $q8_stories, $f16_stories with f16, though it falls back to f16"
echo "ok   /api/ps counts stories' fallback f16 KV cache"
# under the default 64 MB body cap: a message past the template's 8 MiB output is the request's
# fault (413, saying so), not a template fault (500)
python3 -c 'print("{\"model\":\"stories\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"" + "a" * 9000000 + "\"}]}")' > "$work/huge"
check "a 9 MB message is 413" 413 "$base/api/chat" --data-binary @"$work/huge"
grep -q 'the prompt renders to more than 8 MiB' "$work/body" || fail "413 body: $(cat "$work/body")"
# the runner says why in the server's log, with the model it runs
grep -q 'level=WARN msg="a q8_0 KV cache needs head dimensions.*using an F16 KV cache" model=stories:latest runner_pid=[0-9]' "$work/server.log" ||
    fail "the server's log lacks stories' runner's fallback line: $(cat "$work/server.log")"
echo "ok   the server's log carries the runner's own line on the fallback"
# a runner that crashes: the server's log says which, and how it ended. A request that meets
# it dying fails (500), and the next one loads the model again.
crashed=$(pgrep -f "corral runner --model $work/models/.* --kv q8_0" | head -1)
kill -ABRT "$crashed" # an assert; the sanitizers catch SIGSEGV and exit with a status instead
for attempt in 1 2; do
    got=$(curl -s -o "$work/body" -w '%{http_code}' "$base/api/generate" \
        -d '{"model":"tolstoy","prompt":"Prince","stream":false,"options":{"num_predict":2}}')
    [ "$got" = 200 ] && break
    [ "$got" = 500 ] && [ "$attempt" = 1 ] || fail "generate after a runner crashed: $got: $(cat "$work/body")"
done
for _ in $(seq 50); do # the line comes when the dead runner is collected, as a request starts
    grep -q "level=WARN msg=\"runner exited unexpectedly\" model=[a-z]*:latest runner_pid=$crashed signal=6" \
        "$work/server.log" && break
    sleep 0.1
done
grep -q "runner_pid=$crashed signal=6" "$work/server.log" ||
    fail "the server's log does not say runner $crashed ended on signal 6"
echo "ok   the server's log says a runner ended on signal 6; the next request is served"
kill "$server"
wait "$server" || true

status=0
OLLAMA_KV_CACHE_TYPE=bogus CORRAL_HOST="127.0.0.1:$(free_port)" CORRAL_MODELS="$work/models" \
    timeout 10 "$CORRAL_BIN" serve 2>"$work/bogus.log" || status=$?
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "serve with OLLAMA_KV_CACHE_TYPE=bogus: status $status: $(cat "$work/bogus.log")"
fi
grep -q "OLLAMA_KV_CACHE_TYPE.*q8_0" "$work/bogus.log" ||
    fail "the error names the variable and the types: $(cat "$work/bogus.log")"
echo "ok   OLLAMA_KV_CACHE_TYPE=bogus stops the server: $(cat "$work/bogus.log")"
echo "all wire checks passed"
