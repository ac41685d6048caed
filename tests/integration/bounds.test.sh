#!/bin/sh
# What a hostile or careless client, a killed server or a stopped runner leave behind (issue
# 39): num_thread is clamped to the cores (the runner is not asked for 100000 threads), a
# keep_alive past what a clock can count is "forever" (no wrapped expiry, no overflow for the
# sanitizers to find), wrong JSON types are 400s naming the field in every API, context ids
# outside the vocabulary are a 400, leftover partial and temp files are swept while the
# server runs (not the ones a live pull holds), a runner that stops answering (SIGSTOP) fails
# its request within CORRAL_RUNNER_TIMEOUT and the next request loads the model afresh, the
# runner directory of a server killed with SIGKILL (under its TMPDIR) is removed by the next
# server, a TMPDIR too long for a socket falls back to /tmp, and unusable settings stop the
# server with a message naming the variable.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
unset CORRAL_KV_CACHE_TYPE OLLAMA_KV_CACHE_TYPE CORRAL_CONTEXT_LENGTH OLLAMA_CONTEXT_LENGTH \
      CORRAL_KEEP_ALIVE OLLAMA_KEEP_ALIVE CORRAL_NUM_PARALLEL OLLAMA_NUM_PARALLEL
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-bounds.XXXXXX")
server_tmp="$work/tmp" # the servers' TMPDIR: their runner directories, out of other servers' sight
mkdir "$server_tmp"
server=""
holder=""
cleanup() {
    [ -z "$holder" ] || kill "$holder" 2>/dev/null || true
    if [ -n "$server" ]; then kill -CONT $(children "$server") 2>/dev/null || true; kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$work/server.log"; exit 1; }
# children PID: the processes whose parent is PID (the server's runners)
children() { python3 -c '
import os, sys
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:].split()[1] == sys.argv[1]:
            print(p)' "$1"; }
start_server() { # start_server LOG: a server on a new port, $base set
    port=$(free_port)
    base="http://127.0.0.1:$port"
    TMPDIR="$server_tmp" CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" CORRAL_RUNNER_TIMEOUT=1s \
        CORRAL_SWEEP_INTERVAL=1s CORRAL_NUM_PARALLEL=2 "$CORRAL_BIN" serve 2>>"$1" &
    server=$!
    wait_for_url "$base/" && return 0
    fail "the server did not start"
}
# check NAME EXPECTED_STATUS CURL_ARGS... : the status, body in $work/body
check() {
    name=$1 want=$2
    shift 2
    got=$(curl -s -o "$work/body" -w '%{http_code}' --max-time 60 "$@") || true
    [ "$got" = "$want" ] || fail "$name: status $got, expected $want: $(cat "$work/body")"
    echo "ok   $name"
}
says() { grep -q "$1" "$work/body" || fail "expected '$1' in: $(cat "$work/body")"; }

start_server "$work/server.log"
model="$CORRAL_FIXTURES/stories260K.gguf"
digest="sha256:$(sha256sum "$model" | cut -d' ' -f1)"
check "blob upload" 201 -T "$model" -X POST "$base/api/blobs/$digest"
check "create" 200 "$base/api/create" \
    -d "{\"model\":\"stories\",\"files\":{\"m.gguf\":\"$digest\"},\"stream\":false}"

# num_thread: at most one thread per core
check "num_thread 100000 answers" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once","stream":false,"options":{"num_predict":2,"num_thread":100000}}'
runner=$(children "$server")
[ -n "$runner" ] || fail "no runner"
threads=$(tr '\0' ' ' < "/proc/$runner/cmdline" | sed -n 's/.*--threads \([0-9]*\).*/\1/p')
[ -n "$threads" ] && [ "$threads" -le "$(nproc)" ] || fail "runner asked for '$threads' threads on $(nproc) cores"
echo "ok   the runner got --threads $threads on $(nproc) cores"

# keep_alive past the clock's range: forever, and the server (sanitized or not) lives on
for keep in '"2500000h"' 7.5e9 '"99999999999999999999h"'; do
    check "keep_alive $keep answers" 200 "$base/api/generate" \
        -d '{"model":"stories","prompt":"Once","stream":false,"keep_alive":'"$keep"',"options":{"num_predict":1,"num_thread":100000}}'
    check "ps after keep_alive $keep" 200 "$base/api/ps"
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["models"]; y=int(m[0]["expires_at"][:4]); assert len(m)==1 and y>=9999, m' \
        "$work/body" || fail "expires_at after keep_alive $keep: $(cat "$work/body")"
done
echo "ok   a huge keep_alive expires never (year 9999), not in the past"

# wrong JSON types: 400 naming the field, in every API
check "generate prompt [1,2]" 400 "$base/api/generate" -d '{"model":"stories","prompt":[1,2]}'
says 'prompt must be a string'
check "chat messages \"hi\"" 400 "$base/api/chat" -d '{"model":"stories","messages":"hi"}'
says 'messages must be an array'
check "chat stream \"yes\"" 400 "$base/api/chat" -d '{"model":"stories","messages":[],"stream":"yes"}'
says 'stream must be a boolean'
check "embed truncate \"no\"" 400 "$base/api/embed" -d '{"model":"stories","input":"x","truncate":"no"}'
says 'truncate must be a boolean'
check "OpenAI max_tokens -5" 400 "$base/v1/chat/completions" \
    -d '{"model":"stories","messages":[{"role":"user","content":"hi"}],"max_tokens":-5}'
says 'max_tokens must be between 1'
check "OpenAI completions prompt [1]" 400 "$base/v1/completions" -d '{"model":"stories","prompt":[1]}'
says 'prompt must be a string'
check "OpenAI embeddings encoding_format 0" 400 "$base/v1/embeddings" -d '{"model":"stories","input":"x","encoding_format":0}'
says 'encoding_format must be a string'
check "OpenAI embeddings encoding_format bits" 400 "$base/v1/embeddings" -d '{"model":"stories","input":"x","encoding_format":"bits"}'
says "Invalid value for 'encoding_format' = bits. Supported values: .'float', 'base64'.."
# an empty encoding_format is float, as ollama reads it: the request reaches the model's check
check "OpenAI embeddings encoding_format \"\"" 400 "$base/v1/embeddings" -d '{"model":"stories","input":"x","encoding_format":""}'
says 'does not support embeddings'
check "Anthropic stream \"yes\"" 400 "$base/v1/messages" \
    -d '{"model":"stories","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":"yes"}'
says 'stream must be a boolean'
check "Responses input 5" 400 "$base/v1/responses" -d '{"model":"stories","input":5}'
says 'input must be a string or an array'
check "option num_ctx -1" 400 "$base/api/generate" \
    -d '{"model":"stories","prompt":"x","options":{"num_ctx":-1}}'
says 'option \\"num_ctx\\" must be between 0 and'
# context ids: the model's vocabulary only (a stream too: the status comes before any token)
for stream in false true; do
    check "context id past the vocabulary (stream $stream)" 400 "$base/api/generate" \
        -d '{"model":"stories","prompt":"x","stream":'$stream',"context":[1,999999999]}'
    says 'context\[1\] is not a token id of this model'
done
check "context id -1" 400 "$base/api/generate" -d '{"model":"stories","prompt":"x","context":[-1]}'
check "context id not a number" 400 "$base/api/generate" -d '{"model":"stories","prompt":"x","context":["a"]}'

# leftovers swept while the server runs: old partial and temp files, not fresh ones, not
# one a live pull holds locked
blobs="$work/models/blobs"
hex=$(printf 'old' | sha256sum | cut -d' ' -f1)
locked=$(printf 'locked' | sha256sum | cut -d' ' -f1)
fresh=$(printf 'fresh' | sha256sum | cut -d' ' -f1)
mkdir -p "$work/models/manifests/registry.ollama.ai"
printf x > "$blobs/sha256-$hex-partial"
printf '{}' > "$blobs/sha256-$hex-partial-0"
printf x > "$blobs/sha256-$locked-partial"
printf x > "$blobs/sha256-$fresh-partial"
printf x > "$work/models/manifests/registry.ollama.ai/.corral-tmp-x"
# the locked one is aged only once its holder has the lock, or the sweeper (every second)
# could take it first
python3 -c 'import fcntl,sys,time; f=open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(60)' \
    "$blobs/sha256-$locked-partial" "$work/locked" &
holder=$!
for _ in $(seq 100); do [ -e "$work/locked" ] && break; sleep 0.1; done
[ -e "$work/locked" ] || fail "the lock holder did not start"
touch -d '2 hours ago' "$blobs/sha256-$hex-partial" "$blobs/sha256-$hex-partial-0" \
    "$blobs/sha256-$locked-partial" "$work/models/manifests/registry.ollama.ai/.corral-tmp-x"
for _ in $(seq 50); do
    [ -e "$blobs/sha256-$hex-partial" ] || [ -e "$work/models/manifests/registry.ollama.ai/.corral-tmp-x" ] || break
    sleep 0.1
done
[ ! -e "$blobs/sha256-$hex-partial" ] && [ ! -e "$blobs/sha256-$hex-partial-0" ] ||
    fail "the old partial download was not swept"
[ ! -e "$work/models/manifests/registry.ollama.ai/.corral-tmp-x" ] || fail "the old temp file was not swept"
[ -e "$blobs/sha256-$locked-partial" ] || fail "the sweeper removed a download a pull holds"
[ -e "$blobs/sha256-$fresh-partial" ] || fail "the sweeper removed a fresh partial file"
kill "$holder"
holder=""
echo "ok   old partial and temp files swept while serving; live and fresh ones kept"

# a stopped runner: its request fails within the deadline, the next one reloads
check "a runner with the default options" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once","stream":false,"options":{"num_predict":1}}'
runner=$(children "$server")
kill -STOP "$runner"
start_s=$(date +%s)
check "a stopped runner fails its request" 500 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once","stream":false,"options":{"num_predict":4}}'
says 'the model runner stopped responding'
[ $(( $(date +%s) - start_s )) -le 10 ] || fail "the stopped runner took $(( $(date +%s) - start_s )) s to notice"
kill -CONT "$runner" 2>/dev/null || true
check "the next request loads it afresh" 200 "$base/api/generate" \
    -d '{"model":"stories","prompt":"Once","stream":false,"options":{"num_predict":4}}'
[ "$(children "$server")" != "$runner" ] || fail "the stopped runner is still the one serving"
echo "ok   the stopped runner was replaced"

# SIGKILL the server: the next server removes its runner directory
dir=$(grep -l "^$server " "$work"/tmp/corral-runners-*/owner 2>/dev/null | head -1 | xargs -r dirname)
[ -n "$dir" ] && [ -d "$dir" ] || fail "no runner directory under TMPDIR names server $server"
kill -9 "$server"
wait "$server" 2>/dev/null || true
server=""
sleep 0.5 # the runner notices within its 200 ms poll and leaves
[ -d "$dir" ] || fail "$dir vanished before the next start"
start_server "$work/server2.log"
[ ! -e "$dir" ] || fail "$dir of the killed server is still there"
echo "ok   the killed server's runner directory was removed at the next start"
kill "$server"
wait "$server" 2>/dev/null || true
server=""

# a TMPDIR too long for a socket's path: the runners' sockets go under /tmp, with a warning
long="$work/tmp/$(printf '%0100d' 0)"
mkdir "$long"
server_tmp="$long" start_server "$work/server-long.log"
server_tmp="$work/tmp"
kill "$server"
wait "$server" 2>/dev/null || true
server=""
grep -q "TMPDIR=$long is too long for a socket's path: runner sockets go under /tmp" \
    "$work/server-long.log" || fail "no warning for a TMPDIR too long: $(cat "$work/server-long.log")"
echo "ok   a TMPDIR too long for a socket's path falls back to /tmp with a warning"

# settings nobody could mean: the server refuses to start, naming the variable
refuse() { # refuse VAR VALUE
    env CORRAL_HOST="127.0.0.1:$(free_port)" CORRAL_MODELS="$work/models" "$1=$2" \
        "$CORRAL_BIN" serve 2>"$work/refused.log" &
    pid=$!
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fail "$1=$2: the server started"; fi
    wait "$pid" 2>/dev/null && fail "$1=$2: exit status 0"
    grep -q "$1" "$work/refused.log" || fail "$1=$2: the message does not name it: $(cat "$work/refused.log")"
    echo "ok   $1=$2 stops the server: $(cat "$work/refused.log")"
}
refuse CORRAL_MAX_REQUEST_MB 0
refuse CORRAL_NUM_PARALLEL lots
refuse CORRAL_KEEP_ALIVE 5minutes
refuse CORRAL_MAX_QUEUE 0
refuse OLLAMA_LOAD_TIMEOUT never
# (a HOST port past 65535 and a NOPRUNE of any text start the server as they start ollama's:
# the default port with a warning, pruning off; test_server_options checks both)

# OLLAMA_NOPRUNE keeps a blob no model uses at startup; without it the startup prune removes it
orphan="$work/models/blobs/sha256-$(printf orphan | sha256sum | cut -d' ' -f1)"
printf orphan >"$orphan"
touch -d '2 hours ago' "$orphan"
OLLAMA_NOPRUNE=1 start_server "$work/server3.log"
kill "$server"; wait "$server" 2>/dev/null || true; server=""
[ -e "$orphan" ] || fail "OLLAMA_NOPRUNE=1: the unused blob was pruned"
echo "ok   OLLAMA_NOPRUNE=1 keeps an unused blob at startup"
start_server "$work/server4.log"
kill "$server"; wait "$server" 2>/dev/null || true; server=""
[ ! -e "$orphan" ] || fail "the startup prune left the unused blob"
echo "ok   without it the startup prune removes the unused blob"
echo "all bounds checks passed"
