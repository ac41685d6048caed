# Sourced by the shell integration tests (*.test.sh): a free loopback port, a passed check's
# line, and waiting for a server to answer. Each test keeps its own server, cleanup and
# failure report.

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ok WHAT: the line of a check that passed.
ok() { echo "ok   $*"; }

# wait_for_url URL: whether URL answers with success within 10 s (100 tries, 0.1 s apart).
wait_for_url() {
    for _ in $(seq 100); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}
