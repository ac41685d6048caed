#!/bin/sh
# What a hostile web page or client meets at `corral serve` (issue 39), with curl and raw
# sockets: cross-site requests refused before their handler runs (Origin policy), errors
# found while a body arrives answered with a status once the body is read, a full disk as
# 507 and as the CLI's message, /api/create refusing server-side paths alike whether they
# exist or not, 1,100 idle sockets that do not lock out a new client, the
# connection cap's 503, and API keys (Bearer and x-api-key, the key file reloaded on
# SIGHUP, the CLI sending CORRAL_API_KEY, keys never logged).
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-security.XXXXXX")
pids=""
mounted=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ -z "$mounted" ] || umount "$mounted" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
# start NAME [VAR=value...]: a server with its own store; sets $base and $server
start() {
    name=$1
    shift
    port=$(free_port)
    base="http://127.0.0.1:$port"
    env CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/$name-models" "$@" \
        "$CORRAL_BIN" serve 2>"$work/$name.log" &
    server=$!
    pids="$pids $server"
    wait_for_url "$base/" && return
    fail "server $name did not start"
}
# check NAME EXPECTED_STATUS CURL_ARGS... : the status, body in $work/body, headers in $work/head
check() {
    name=$1 want=$2
    shift 2
    got=$(curl -s -o "$work/body" -D "$work/head" -w '%{http_code}' "$@") || true
    [ "$got" = "$want" ] || fail "$name: status $got, expected $want: $(head -c 300 "$work/body")"
    echo "ok   $name"
}
body_has() { grep -q "$1" "$work/body" || fail "body lacks '$1': $(head -c 300 "$work/body")"; }
json_error() { python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"]' "$work/body" ||
    fail "not a JSON error: $(head -c 300 "$work/body")"; }

# ---- Origin policy ----
start origins CORRAL_MAX_REQUEST_MB=1 CORRAL_ORIGINS="http://trusted.example, https://*.corp.example"
check "pull the demo model" 200 "$base/api/pull" -d '{"model":"tiny-tolstoy","stream":false}'
for path in /api/copy /api/create /api/pull /api/generate /api/delete /v1/chat/completions; do
    check "cross-site text/plain POST $path is 403" 403 -X POST -H "Origin: http://evil.example" \
        -H "Content-Type: text/plain" "$base$path" \
        -d '{"source":"tiny-tolstoy","destination":"stolen","model":"tiny-tolstoy","prompt":"x"}'
    json_error
done
check "cross-site GET is 403" 403 -H "Origin: http://evil.example" "$base/api/tags"
check "cross-site DELETE is 403" 403 -X DELETE -H "Origin: null" "$base/api/delete" \
    -d '{"model":"tiny-tolstoy"}'
check "the refused copy did not run" 404 "$base/api/show" -d '{"model":"stolen"}'
check "the refused delete did not run" 200 "$base/api/show" -d '{"model":"tiny-tolstoy"}'
check "cross-site preflight is 403" 403 -X OPTIONS -H "Origin: http://evil.example" \
    -H "Access-Control-Request-Method: POST" "$base/api/chat"
for origin in "http://localhost:5173" "https://127.0.0.1" "http://0.0.0.0:8080" "app://obsidian.md" \
    "file://" "tauri://localhost" "vscode-webview://abc" "http://trusted.example" \
    "https://ai.corp.example" "http://127.0.0.1:$port"; do
    check "origin $origin is allowed" 200 -H "Origin: $origin" "$base/api/tags"
    grep -qi "^Access-Control-Allow-Origin: $origin" "$work/head" || fail "no CORS header for $origin"
done
check "an allowed origin copies" 200 -H "Origin: http://localhost:3000" "$base/api/copy" \
    -d '{"source":"tiny-tolstoy","destination":"copied"}'
check "no Origin (not a browser) is allowed" 200 "$base/api/show" -d '{"model":"copied"}'

# ---- /api/create reads no server-side path, so it is no file-existence oracle ----
for from in /dev/random /etc/passwd /nonexistent/model.gguf ./model.gguf; do
    check "create from the path $from is 400" 400 "$base/api/create" -d "{\"model\":\"m\",\"from\":\"$from\"}"
    if grep -qi "does not exist\|no such file\|permission denied" "$work/body"; then fail "the error says whether $from exists"; fi
done
check "a files entry that is a path is 400" 400 "$base/api/create" \
    -d '{"model":"m","files":{"a.gguf":"/dev/random"}}'
check "a files name that climbs out is 400" 400 "$base/api/create" \
    -d '{"model":"m","files":{"../../a.gguf":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}}'

# ---- errors found while the body arrives: a status and a JSON body, never an empty reply ----
head -c 3000000 /dev/zero | tr '\0' 'a' > "$work/big"
check "upload to a bad digest is 400" 400 --data-binary @"$work/big" -H "Expect:" \
    "$base/api/blobs/sha256:1234"
json_error
check "upload to a path-like digest is 400" 400 --data-binary @"$work/big" -H "Expect:" \
    "$base/api/blobs/sha256:..%2F..%2Fx"
check "chunked body over the cap is 413" 413 -H "Transfer-Encoding: chunked" \
    --data-binary @"$work/big" "$base/api/chat"
body_has "larger than"
check "unannounced body over the cap is 413" 413 -H "Expect:" --data-binary @"$work/big" \
    "$base/api/generate"
check "announced body over the cap is 413" 413 -H "Expect: 100-continue" \
    --data-binary @"$work/big" "$base/api/generate"
check "the server still answers" 200 "$base/api/version"

# ---- 1,100 idle sockets do not lock out a new client ----
python3 - "$port" "$base" <<'EOF' || fail "idle sockets locked out a client"
import socket, sys, urllib.request, resource
port, base = int(sys.argv[1]), sys.argv[2]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
idle = []
for _ in range(1100):
    s = socket.create_connection(("127.0.0.1", port))
    idle.append(s)
half = [s for s in idle[:550]]
for s in half:  # half start a request and never finish its headers
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
with urllib.request.urlopen(base + "/api/version", timeout=10) as r:
    assert r.status == 200, r.status
print("ok   a new client is served while 1,100 idle sockets are open")
EOF

# ---- the connection cap: past it, 503 with a JSON error ----
start capped CORRAL_MAX_CONNECTIONS=8
python3 - "$port" "$base" <<'EOF' || fail "connection cap"
import json, socket, sys, urllib.error, urllib.request
port, base = int(sys.argv[1]), sys.argv[2]
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
try:
    urllib.request.urlopen(base + "/api/version", timeout=10)
    raise SystemExit("a ninth connection was served")
except urllib.error.HTTPError as e:
    assert e.code == 503, e.code
    assert "open connections" in json.load(e)["error"]
for s in idle:
    s.close()
import time
for _ in range(50):
    try:
        with urllib.request.urlopen(base + "/api/version", timeout=10) as r:
            assert r.status == 200
            break
    except urllib.error.HTTPError:
        time.sleep(0.1)
else:
    raise SystemExit("still refused after the idle sockets closed")
print("ok   past 8 connections a new one is told 503, and served once they close")
EOF

# ---- API keys ----
printf '# the file'"'"'s keys\nfile-key-3\n' > "$work/keys"
start keys CORRAL_API_KEYS="list-key-1, list-key-2" CORRAL_API_KEY_FILE="$work/keys"
check "GET / needs no key" 200 "$base/"
check "HEAD / needs no key" 200 -I "$base/"
check "version needs no key" 200 "$base/api/version"
check "tags without a key is 401" 401 "$base/api/tags"
json_error
grep -qi "^WWW-Authenticate: Bearer" "$work/head" || fail "no WWW-Authenticate"
check "a wrong key is 401" 401 -H "Authorization: Bearer list-key-9" "$base/api/tags"
check "a key's prefix is 401" 401 -H "Authorization: Bearer list-key" "$base/api/tags"
check "Bearer list key" 200 -H "Authorization: Bearer list-key-1" "$base/api/tags"
check "x-api-key (Anthropic's header)" 200 -H "x-api-key: list-key-2" "$base/api/tags"
check "a file key" 200 -H "Authorization: bearer file-key-3" "$base/api/tags"
check "POST needs the key too" 401 "$base/api/pull" -d '{"model":"tiny-tolstoy"}'
check "OpenAI routes need it" 401 "$base/v1/models"
check "/metrics needs it" 401 "$base/metrics"
check "/metrics with a key" 200 -H "Authorization: Bearer list-key-1" "$base/metrics"
body_has "corral_http_requests_total"
check "a preflight needs no key" 204 -X OPTIONS -H "Origin: http://localhost:3000" "$base/api/chat"
printf 'file-key-4\n' > "$work/keys"
kill -HUP "$server"
for _ in $(seq 50); do grep -q "reloaded" "$work/keys.log" && break; sleep 0.1; done
check "after SIGHUP the new file key works" 200 -H "Authorization: Bearer file-key-4" "$base/api/tags"
check "after SIGHUP the old file key is refused" 401 -H "Authorization: Bearer file-key-3" "$base/api/tags"
check "the list keys stay" 200 -H "Authorization: Bearer list-key-1" "$base/api/tags"
printf 'bad key with spaces\n' > "$work/keys"
kill -HUP "$server"
for _ in $(seq 50); do grep -q "not reloaded" "$work/keys.log" && break; sleep 0.1; done
check "a bad file keeps the old keys" 200 -H "Authorization: Bearer file-key-4" "$base/api/tags"
CORRAL_HOST="127.0.0.1:$port" CORRAL_API_KEY=list-key-2 "$CORRAL_BIN" list >"$work/list.out" 2>&1 ||
    fail "corral list with CORRAL_API_KEY: $(cat "$work/list.out")"
echo "ok   the CLI sends CORRAL_API_KEY"
if CORRAL_HOST="127.0.0.1:$port" "$CORRAL_BIN" list >"$work/list.out" 2>&1; then
    fail "corral list without a key succeeded"
fi
grep -q "API key" "$work/list.out" || fail "the CLI does not say a key is needed: $(cat "$work/list.out")"
echo "ok   the CLI without a key says one is needed"
if grep -q "list-key\|file-key" "$work/keys.log"; then fail "a key appears in the server log"; fi
echo "ok   no key in the server log"
if env CORRAL_HOST="127.0.0.1:$(free_port)" CORRAL_MODELS="$work/x" CORRAL_API_KEY_FILE="$work/none" \
    "$CORRAL_BIN" serve 2>"$work/nokeys.out"; then fail "started with a missing key file"; fi
grep -q "CORRAL_API_KEY_FILE" "$work/nokeys.out" || fail "missing key file message"
echo "ok   a missing key file stops the server with a message"

# ---- a full disk: 507 with the reason, and the CLI shows it ----
mkdir -p "$work/small"
if mount -t tmpfs -o size=2m tmpfs "$work/small" 2>/dev/null; then
    mounted="$work/small"
    start full CORRAL_MODELS="$work/small/models"
    model="$CORRAL_FIXTURES/tiny-tolstoy-f16.gguf"
    digest="sha256:$(sha256sum "$model" | cut -d' ' -f1)"
    check "upload onto a full disk is 507" 507 -H "Expect:" --data-binary @"$model" \
        "$base/api/blobs/$digest"
    body_has "No space left on device"
    printf 'FROM %s\n' "$model" > "$work/Modelfile"
    if CORRAL_HOST="127.0.0.1:$port" "$CORRAL_BIN" create big -f "$work/Modelfile" \
        >"$work/create.out" 2>&1; then fail "create onto a full disk succeeded"; fi
    grep -q "No space left on device" "$work/create.out" ||
        fail "the CLI does not show the reason: $(tail -c 300 "$work/create.out")"
    echo "ok   the CLI says no space left on device"
    [ -z "$(ls "$work/small/models/blobs" 2>/dev/null | grep -v '^$' || true)" ] ||
        fail "temp files left on the full disk: $(ls "$work/small/models/blobs")"
    echo "ok   nothing left behind on the full disk"
else
    echo "skip full-disk checks: cannot mount a tmpfs here"
fi
echo "security checks passed"
