# Sourced by the shell integration tests (*.test.sh): a free loopback port, a passed check's
# line, waiting for a server to answer, stopping the servers and runners a client started
# detached, and (serve_in_scratch) one `corral serve` in a scratch directory with its cleanup
# and failure report. Other tests keep their own server, cleanup and failure report.

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ok WHAT: the line of a check that passed.
ok() { echo "ok   $*"; }

# wait_for_url URL: whether URL answers with success within 10 s (100 tries, 0.1 s apart).
wait_for_url() {
    for _ in $(seq 100); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

# detached_pids ENTRY ROLE: the processes whose environment holds ENTRY (NAME=VALUE, unique to
# the test) and whose command is `corral ROLE`. Always succeeds: a process may end while read.
detached_pids() {
    for env in /proc/[0-9]*/environ; do
        grep -qzxF -- "$1" "$env" 2>/dev/null || continue
        p=${env#/proc/}
        p=${p%/environ}
        if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "^corral $2 "; then echo "$p"; fi
    done
    return 0
}

# stop_detached ENTRY: SIGTERM to the servers and runners detached_pids finds, SIGKILL to those
# still alive after 5 s.
stop_detached() {
    pids="$(detached_pids "$1" serve) $(detached_pids "$1" runner)"
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=""
        for p in $pids; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
}

# serve_in_scratch NAME: $work, a scratch directory (corral-NAME.XXXXXX) holding the models
# (CORRAL_MODELS) and HOME; $port, a free port the server listens on (CORRAL_HOST, OLLAMA_HOST
# unset); $corral, CORRAL_BIN; $server, that `corral serve` (its output in $work/server.log),
# stopped and $work removed when the script exits; fail WHAT, the failure line and the log's
# last 20 lines, exiting 1. Returns once the server answers (or after wait_for_url's 10 s).
serve_in_scratch() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/corral-$1.XXXXXX")
    port=$(free_port)
    export CORRAL_HOST="127.0.0.1:$port" CORRAL_MODELS="$work/models" HOME="$work/home"
    unset OLLAMA_HOST
    mkdir -p "$HOME"
    corral=$CORRAL_BIN
    "$corral" serve >"$work/server.log" 2>&1 &
    server=$!
    cleanup() {
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
        rm -rf "$work"
    }
    trap cleanup EXIT
    fail() { echo "FAIL: $*"; tail -20 "$work/server.log"; exit 1; }
    wait_for_url "http://127.0.0.1:$port/" || true
}
