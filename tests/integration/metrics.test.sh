#!/bin/sh
# Metrics and the request log (issue 39): GET /metrics is valid Prometheus text (promtool), a
# real Prometheus scrapes it and sees the generation counters and the /api/generate 200s move,
# the KV cache and loaded-model gauges appear while a model is loaded; with
# CORRAL_LOG_FORMAT=json every stderr line is a JSON object, each request has one line with its
# method, path, model, status, token counts and duration (libmicrohttpd's messages are JSON
# lines too), and the prompt's text never appears
# unless CORRAL_DEBUG is on (where it does, so the check can fail); a bad CORRAL_LOG_FORMAT
# stops the server before it listens.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Needs prometheus and promtool (Debian package prometheus).
set -eu
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-metrics.XXXXXX")
server="" prom=""
stop() { [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true; }
cleanup() { stop "$server"; stop "$prom"; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$work/server.log" 2>/dev/null; exit 1; }
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
    fail "prometheus and promtool are needed (scripts/install-deps.sh installs them)"

# start_server LOG_FORMAT DEBUG: a server on a fresh port with the store in $work/models
start_server() {
    port=$(free_port)
    base="http://127.0.0.1:$port"
    CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" CORRAL_LOG_FORMAT=$1 \
        CORRAL_DEBUG=$2 "$CORRAL_BIN" serve 2>"$work/server.log" &
    server=$!
    wait_for_url "$base/" && return
    fail "the server did not start"
}

# a bad log format is refused before the server listens
port=$(free_port)
if CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" CORRAL_LOG_FORMAT=xml \
    "$CORRAL_BIN" serve 2>"$work/refused.log"; then
    fail "CORRAL_LOG_FORMAT=xml started a server"
fi
grep -q "CORRAL_LOG_FORMAT must be text or json, got 'xml'" "$work/refused.log" ||
    fail "the refusal says: $(cat "$work/refused.log")"
ok "CORRAL_LOG_FORMAT=xml refuses to start"

start_server json 0
curl -fs "$base/metrics" -o "$work/metrics.txt" -D "$work/head" || fail "GET /metrics"
grep -qi "^Content-Type: text/plain; version=0.0.4" "$work/head" || fail "content type: $(cat "$work/head")"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejects the exposition"
ok "/metrics of a fresh server passes promtool"

# a model and a generation
model="$CORRAL_FIXTURES/stories260K.gguf"
digest="sha256:$(sha256sum "$model" | cut -d' ' -f1)"
curl -fs -T "$model" -X POST "$base/api/blobs/$digest" >/dev/null || fail "blob upload"
curl -fs "$base/api/create" -d "{\"model\":\"stories\",\"files\":{\"m.gguf\":\"$digest\"},\"stream\":false}" \
    >/dev/null || fail "create"

# Prometheus scraping us every second, its storage in $work
prom_port=$(free_port)
cat > "$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: corral
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom=$!
# query PROMQL: the first sample's value, "" when there is none
query() {
    curl -fs "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
# wait_for PROMQL: until the query has a sample (Prometheus has scraped), up to 30 s
wait_for() {
    for _ in $(seq 60); do
        value=$(query "$1" 2>/dev/null || true)
        [ -n "$value" ] && return
        sleep 0.5
    done
    fail "Prometheus has no sample for $1: $(tail -5 "$work/prometheus.log")"
}
wait_for 'corral_generated_tokens_total{job="corral"}'
before=$value
[ "$before" = 0 ] || fail "generated tokens before any generation: $before"
ok "Prometheus scrapes /metrics (generated tokens: $before)"

secret="Zanzibar marmalade quibbles"
curl -fs "$base/api/generate" -o "$work/gen.json" \
    -d "{\"model\":\"stories\",\"prompt\":\"$secret\",\"stream\":false,\"options\":{\"num_predict\":8,\"temperature\":0}}" ||
    fail "generate"
curl -fs "$base/api/generate" -o "$work/gen.ndjson" \
    -d "{\"model\":\"stories\",\"prompt\":\"$secret\",\"options\":{\"num_predict\":8,\"temperature\":0}}" ||
    fail "streamed generate"
generated=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval_count"])' "$work/gen.json")

curl -fs "$base/metrics" -o "$work/metrics.txt"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejects the exposition after generations"
ok "/metrics with a loaded model passes promtool"
python3 - "$work/metrics.txt" <<'PY' || fail "series after two generations: $(cat "$work/metrics.txt")"
import re, sys
series = {}
for line in open(sys.argv[1]):
    if not line.startswith("#") and line.strip():
        name, value = line.rsplit(" ", 1)
        series[name] = float(value)
get = lambda name: series.get(name, 0)
assert get('corral_http_requests_total{method="POST",path="/api/generate",status="200"}') == 2
assert get('corral_http_request_duration_seconds_count{path="/api/generate"}') == 2
assert get("corral_time_to_first_token_seconds_count") == 2
assert get("corral_inter_token_latency_seconds_count") == get("corral_generated_tokens_total") - 2
assert get("corral_prompt_tokens_total") > 0 and get("corral_generated_tokens_total") > 0
assert get("corral_loaded_models") == 1
assert get('corral_model_memory_bytes{model="stories:latest"}') > 0
assert get('corral_kv_cache_cells{model="stories:latest"}') > 0
assert 0 < get('corral_kv_cache_cells_used{model="stories:latest"}') <= get('corral_kv_cache_cells{model="stories:latest"}')
assert get("corral_queue_depth") == 0 and get("corral_runner_restarts_total") == 0
PY
ok "the series count the generations, the loaded model and its KV cache"

# Prometheus sees the counters move: both generations' tokens (a scrape may have come between
# the two, so the first value that moved can be the first generation's alone)
want=$((before + 2 * generated))
for _ in $(seq 60); do
    after=$(query 'corral_generated_tokens_total{job="corral"}')
    [ "$after" = "$want" ] && break
    sleep 0.5
done
[ "$after" = "$want" ] ||
    fail "Prometheus: generated tokens $before -> $after, expected +$((2 * generated))"
ok "Prometheus: corral_generated_tokens_total $before -> $after"
wait_for 'corral_http_requests_total{job="corral",path="/api/generate",method="POST",status="200"}'
[ "$value" = 2 ] || fail "Prometheus: /api/generate 200s: $value"
ok "Prometheus: corral_http_requests_total for POST /api/generate 200 is 2"

# the request log: every line JSON, one per request with its facts, no prompt text;
# libmicrohttpd's own complaint about a malformed request goes through the log too
curl -s "$base/api/generate" -d '{"model":"nope","prompt":"x"}' >/dev/null
python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n")
s.recv(100)
PY
stop "$server"
server=""
python3 - "$work/server.log" "$secret" "$generated" <<'PY' || fail "the JSON log: $(cat "$work/server.log")"
import json, sys
log, secret, generated = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(log, encoding="utf-8").read()
assert secret not in text, "the prompt's text is in the log without debug"
lines = [json.loads(l) for l in text.splitlines()]
for l in lines:
    assert {"time", "level", "msg"} <= l.keys(), l
requests = [l for l in lines if l["msg"] == "request"]
gens = [l for l in requests if l["path"] == "/api/generate" and l["status"] == 200]
assert len(gens) == 2, requests
for g in gens:
    assert g["level"] == "INFO" and g["method"] == "POST" and g["model"] == "stories:latest", g
    assert g["generated_tokens"] == generated and g["prompt_tokens"] > 0, g
    assert isinstance(g["duration_ms"], (int, float)) and g["duration_ms"] > 0, g
missing = [l for l in requests if l["path"] == "/api/generate" and l["status"] == 404]
assert len(missing) == 1 and "model" not in missing[0], missing
scrapes = [l for l in requests if l["path"] == "/metrics"]
assert scrapes and all(l["method"] == "GET" and l["status"] == 200 for l in scrapes)
assert any(l["msg"].startswith("corral ") and "listening on" in l["msg"] for l in lines)
assert any(l.get("source") == "libmicrohttpd" and l["level"] == "WARN" for l in lines)
PY
ok "every log line is JSON; one per request with method, path, model, status, tokens, duration"
ok "the prompt's text is not logged"

# with debug on, the rendered prompt is logged (a debug line), so the check above can fail;
# debug spelled "t" and the load timeout 0 (no limit), values ollama takes
export OLLAMA_LOAD_TIMEOUT=0
start_server text t
curl -fs "$base/api/generate" -o /dev/null \
    -d "{\"model\":\"stories\",\"prompt\":\"$secret\",\"stream\":false,\"options\":{\"num_predict\":2}}" ||
    fail "generate with debug"
stop "$server"
server=""
grep -q "level=DEBUG msg=prompt model=stories:latest prompt=\"$secret\"" "$work/server.log" ||
    fail "no debug line with the prompt: $(cat "$work/server.log")"
grep -q 'level=INFO msg=request method=POST path=/api/generate status=200 model=stories:latest' \
    "$work/server.log" || fail "no text request line: $(cat "$work/server.log")"
ok "CORRAL_DEBUG=t logs the prompt, OLLAMA_LOAD_TIMEOUT=0 loads; text lines are logfmt"
