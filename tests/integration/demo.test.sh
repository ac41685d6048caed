#!/bin/sh
# The README's demo on a fresh machine: with a new HOME (so an empty default store), no server
# running and no network, `corral run tiny-tolstoy "Prince Andrew"` starts a server by itself,
# imports the model shipped inside the binary and answers with the server's own greedy text.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-demo.XXXXXX")
port=$(free_port)
export HOME="$work/home" CORRAL_HOST="127.0.0.1:$port"
unset CORRAL_MODELS OLLAMA_MODELS OLLAMA_HOST
# No network: every proxy variable libcurl reads points at a closed port, loopback excepted,
# so a registry request would fail (and with it the run) instead of reaching the internet.
export https_proxy=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 \
    ALL_PROXY=http://127.0.0.1:9 all_proxy=http://127.0.0.1:9 no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
mkdir -p "$HOME"
corral=$CORRAL_BIN
store="$HOME/.corral/models"
log="$HOME/.corral/server.log"

cleanup() { stop_detached "HOME=$HOME"; rm -rf "$work"; }
trap cleanup EXIT

fail() { echo "FAIL: $*"; [ -f "$log" ] && tail -20 "$log"; exit 1; }
expect() { grep -qF -- "$2" "$3" || fail "$1: expected '$2' in: $(cat "$3")"; ok "$1"; }

# the starting point: nothing listens, nothing is stored, the network is unreachable
! curl -s -m 5 "http://127.0.0.1:$port/" >/dev/null 2>&1 || fail "a server already answers on $port"
[ ! -e "$HOME/.corral" ] || fail "HOME is not new"
! curl -s -m 10 https://registry.ollama.ai/v2/ >/dev/null 2>&1 || fail "the network is reachable"
ok "fresh machine: no server, no store, no network"

# the demo, as the README runs it
"$corral" run tiny-tolstoy "Prince Andrew" >"$work/answer" 2>"$work/err" </dev/null ||
    fail "corral run: $(cat "$work/err")"
[ -n "$(tr -d ' \n' < "$work/answer")" ] || fail "the answer is empty"
ok "corral run tiny-tolstoy answers: $(head -c 60 "$work/answer")..."

[ -n "$(detached_pids "HOME=$HOME" serve)" ] || fail "no 'corral serve' of ours is running"
expect "the server started by itself on CORRAL_HOST" "listening on 127.0.0.1:$port" "$log"
expect "its store is the default under HOME" "(models in $store)" "$log"
expect "the import reports pull statuses" "pulling manifest" "$work/err"
expect "the import ends in success" "success" "$work/err"

"$corral" list >"$work/out"
expect "list shows the imported model" "tiny-tolstoy:latest" "$work/out"
gguf="$CORRAL_FIXTURES/tiny-tolstoy-f16.gguf"
blob="$store/blobs/sha256-$(sha256sum "$gguf" | cut -d' ' -f1)"
cmp -s "$gguf" "$blob" || fail "the stored GGUF is not $gguf"
ok "the stored model is tiny-tolstoy-f16.gguf"
"$corral" show tiny-tolstoy --license >"$work/out"
expect "the model carries its license" "MIT License" "$work/out"

# the answer is the model's greedy text (temperature 0 is the demo's parameter)
curl -fs "http://127.0.0.1:$port/api/generate" \
    -d '{"model":"tiny-tolstoy","prompt":"Prince Andrew","stream":false}' > "$work/reference.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; sys.stdout.write(r if r.endswith("\n") else r+"\n")' \
    "$work/reference.json" > "$work/reference.txt"
cmp -s "$work/answer" "$work/reference.txt" ||
    fail "run printed '$(cat "$work/answer")', the server says '$(cat "$work/reference.txt")'"
ok "the answer equals the server's greedy text"

# the weights answer as the PyTorch reference does (case 2, greedy, no repeat penalty)
curl -fs "http://127.0.0.1:$port/api/generate" -d '{"model":"tiny-tolstoy","prompt":"Pierre",
    "stream":false,"options":{"repeat_penalty":1,"num_predict":48}}' > "$work/pierre.json"
python3 - "$work/pierre.json" "$CORRAL_FIXTURES/tiny-tolstoy-reference.txt" <<'EOF' ||
import json, sys
got = json.load(open(sys.argv[1]))["response"]
case = open(sys.argv[2]).read().split("[case 2]")[1]
want = json.loads(case.split("\ntext: ")[1].split("\n")[0])
if got != want:
    sys.exit(f"got {got!r}\nwant {want!r}")
EOF
    fail "'Pierre' does not continue as tiny-tolstoy-reference.txt case 2"
ok "'Pierre' continues as the reference says"

# a second run reuses the stored model and the running server
"$corral" run tiny-tolstoy "Prince Andrew" >"$work/again" 2>"$work/err" </dev/null ||
    fail "second run: $(cat "$work/err")"
cmp -s "$work/answer" "$work/again" || fail "the second answer differs: '$(cat "$work/again")'"
! grep -q "pulling" "$work/err" || fail "the second run pulled again: $(cat "$work/err")"
[ "$(detached_pids "HOME=$HOME" serve | wc -l)" -eq 1 ] || fail "more than one server: $(detached_pids "HOME=$HOME" serve)"
ok "a second run answers the same from the store"

# an explicit pull imports the same model again, still offline
"$corral" list >"$work/before"
"$corral" pull tiny-tolstoy >"$work/out" 2>&1 || fail "pull: $(cat "$work/out")"
expect "pull tiny-tolstoy succeeds offline" "success" "$work/out"
"$corral" list >"$work/after"
[ "$(awk '/^tiny-tolstoy/ {print $2}' "$work/before")" = "$(awk '/^tiny-tolstoy/ {print $2}' "$work/after")" ] ||
    fail "the pulled manifest differs: $(cat "$work/before" "$work/after")"
ok "the pulled model has the same ID"

stop_detached "HOME=$HOME"
[ -z "$(detached_pids "HOME=$HOME" serve)$(detached_pids "HOME=$HOME" runner)" ] || fail "processes left behind"
ok "the background server and its runner stopped"
echo "all demo checks passed"
