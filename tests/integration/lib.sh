# Sourced by the shell integration tests (*.test.sh): a free loopback port, a passed check's
# line, waiting for a server to answer, and stopping the servers and runners a client started
# detached. Each test keeps its own server, cleanup and failure report.

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
