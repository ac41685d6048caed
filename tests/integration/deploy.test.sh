#!/bin/sh
# The deployment recipes of docs/DEPLOY.md, run: a shared registry (Debian's docker-registry),
# two `corral serve` backends and nginx in front with docs/deploy/nginx.conf as shipped (only
# its ports changed), all on loopback ports with their files in a temporary directory. A model
# is created and pushed through one backend, pulled on the other, and generations through
# nginx reach both, streamed (NDJSON and server-sent events) and whole. Also checks the
# systemd unit with systemd-analyze and the Dockerfile's package lists against
# scripts/install-deps.sh and the binary's libraries (docker itself is not needed).
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
corral=$CORRAL_BIN
work=$(mktemp -d "${TMPDIR:-/tmp}/corral-deploy.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL: $*"
    for log in "$work"/*.log "$work"/nginx/*.log; do
        [ -f "$log" ] && { echo "--- $log"; tail -15 "$log"; }
    done
    exit 1
}
wait_for() { # NAME URL
    for _ in $(seq 300); do curl -fs -o /dev/null "$2" && return 0; sleep 0.1; done
    fail "$1 did not answer at $2"
}

# ---- the systemd unit: systemd's own checker, with ExecStart pointing at the built binary
sed "s|/usr/local/bin/corral|$corral|" "$root/docs/deploy/corral.service" > "$work/corral.service"
systemd-analyze verify "$work/corral.service" > "$work/verify.out" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$work/verify.out")"
[ ! -s "$work/verify.out" ] || fail "systemd-analyze verify warned: $(cat "$work/verify.out")"
ok "the systemd unit verifies without warnings"

# ---- the Dockerfile: each stage's apt-get install list
stage_packages() { # STAGE: the packages the stage named STAGE installs
    python3 - "$root/Dockerfile" "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read().replace("\\\n", " ")
stage = re.search(r"^FROM \S+ AS %s$(.*?)(?=^FROM |\Z)" % sys.argv[2], text, re.M | re.S).group(1)
for m in re.finditer(r"apt-get install ([^&\n]*)", stage):
    print("\n".join(w for w in m.group(1).split() if not w.startswith("-")))
EOF
}
deps=$(sed -n '/^PACKAGES="/,/"$/p' "$root/scripts/install-deps.sh" | tr -d '"' | sed 's/^PACKAGES=//')
build_packages=$(stage_packages build)
[ -n "$build_packages" ] || fail "no packages found in the Dockerfile's build stage"
for p in $build_packages; do
    echo " $deps " | tr '\n' ' ' | grep -q " $p " || fail "the Dockerfile's build stage installs $p, which scripts/install-deps.sh does not"
done
ok "the Dockerfile's build packages are scripts/install-deps.sh's"
runtime_packages=" $(stage_packages runtime | tr '\n' ' ') "
# every library the binary links comes from a runtime package (libc6 is in the base image);
# a sanitizer build (the asan preset) also links its runtimes, which the image's release
# build does not
sanitized=""
readelf --dyn-syms "$corral" | grep -q "__asan_init" && sanitized=1
for lib in $(readelf -d "$corral" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    case "$lib" in libasan.so*|libubsan.so*|libgcc_s.so*|libstdc++.so*) [ -n "$sanitized" ] && continue ;; esac
    path=$(ldd "$corral" | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] || fail "ldd does not find $lib"
    package=$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null ||
              dpkg -S "$(readlink -f "$path")" 2>/dev/null) || fail "no Debian package has $path"
    package=${package%%:*}
    [ "$package" = libc6 ] && continue
    case "$runtime_packages" in *" $package "*) ;; *) fail "the binary needs $lib from $package, which the Dockerfile's runtime stage does not install" ;; esac
done
ok "the Dockerfile's runtime stage installs every library the binary links"

# ---- the shared registry
registry_port=$(free_port)
mkdir -p "$work/registry"
cat > "$work/registry/config.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $work/registry/data
http:
  addr: 127.0.0.1:$registry_port
EOF
/usr/bin/docker-registry serve "$work/registry/config.yml" > "$work/registry.log" 2>&1 &
pids="$pids $!"
wait_for registry "http://127.0.0.1:$registry_port/v2/"

# ---- two backends, each with its own store
start_backend() { # NAME PORT
    mkdir -p "$work/$1"
    CORRAL_HOST="127.0.0.1:$2" CORRAL_MODELS="$work/$1/models" HOME="$work/$1" \
        CORRAL_NUM_PARALLEL=1 "$corral" serve > "$work/$1.log" 2>&1 &
    pids="$pids $!"
    wait_for "backend $1" "http://127.0.0.1:$2/api/version"
}
port_a=$(free_port)
port_b=$(free_port)
start_backend a "$port_a"
start_backend b "$port_b"

# ---- nginx with the shipped site, its ports ours, run in the foreground with files here
nginx_port=$(free_port)
mkdir -p "$work/nginx/tmp"
sed -e "s|server 127.0.0.1:11434 |server 127.0.0.1:$port_a |" \
    -e "s|server 127.0.0.1:11435 |server 127.0.0.1:$port_b |" \
    -e "s|listen 80;|listen 127.0.0.1:$nginx_port;|" \
    "$root/docs/deploy/nginx.conf" > "$work/nginx/corral.conf"
grep -q "127.0.0.1:$port_a " "$work/nginx/corral.conf" && grep -q "127.0.0.1:$port_b " "$work/nginx/corral.conf" &&
    grep -q "listen 127.0.0.1:$nginx_port;" "$work/nginx/corral.conf" || fail "docs/deploy/nginx.conf changed its ports"
user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root;" # workers would drop to nobody otherwise
cat > "$work/nginx/nginx.conf" <<EOF
$user_line
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 64; }
http {
    log_format upstreams '\$request_method \$uri \$status \$upstream_addr';
    access_log $work/nginx/access.log upstreams;
    client_body_temp_path $work/nginx/tmp/body;
    proxy_temp_path $work/nginx/tmp/proxy;
    fastcgi_temp_path $work/nginx/tmp/fastcgi;
    uwsgi_temp_path $work/nginx/tmp/uwsgi;
    scgi_temp_path $work/nginx/tmp/scgi;
    include $work/nginx/corral.conf;
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" -g 'daemon off;' \
    > "$work/nginx.log" 2>&1 &
pids="$pids $!"
front="http://127.0.0.1:$nginx_port"
wait_for nginx "$front/api/version"

# ---- a model created on backend a, pushed to the registry, pulled on backend b
model="127.0.0.1:$registry_port/library/tolstoy"
cat > "$work/Modelfile" <<EOF
FROM $CORRAL_FIXTURES/tiny-tolstoy-f32.gguf
PARAMETER temperature 0
PARAMETER num_predict 24
EOF
CORRAL_HOST="127.0.0.1:$port_a" "$corral" create "$model" -f "$work/Modelfile" > "$work/out" 2>&1 ||
    fail "create on a: $(cat "$work/out")"
CORRAL_HOST="127.0.0.1:$port_a" "$corral" push "$model" --insecure > "$work/out" 2>&1 ||
    fail "push from a: $(cat "$work/out")"
ok "a pushes the model to the registry"
curl -fs "http://127.0.0.1:$port_b/api/tags" | grep -q tolstoy && fail "b has the model before pulling"
CORRAL_HOST="127.0.0.1:$port_b" "$corral" pull "$model" --insecure > "$work/out" 2>&1 ||
    fail "pull on b: $(cat "$work/out")"
digest() { curl -fs "http://127.0.0.1:$1/api/tags" | python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if "tolstoy" in m["name"]][0])'; }
[ "$(digest "$port_a")" = "$(digest "$port_b")" ] || fail "a and b hold different manifests"
ok "b pulls the same model from the registry"

# ---- the loopback Host guard: nginx's Host header is the one a backend accepts
status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: corral.example.com' "http://127.0.0.1:$port_a/api/version")
[ "$status" = 403 ] || fail "a backend on loopback answered $status to a foreign Host"
status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: corral.example.com' "$front/api/version")
[ "$status" = 200 ] || fail "nginx answered $status for a foreign Host"
ok "a foreign Host is refused by a backend and passes through nginx"

# ---- generations through nginx
generate='{"model": "'$model'", "prompt": "Prince Andrew", "stream": false}'
curl -fs "$front/api/generate" -d "$generate" > "$work/whole1.json" || fail "generate through nginx"
curl -fs "$front/api/generate" -d "$generate" > "$work/whole2.json" || fail "second generate through nginx"
answer() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["response"])' "$1"; }
[ -n "$(answer "$work/whole1.json")" ] || fail "empty answer"
[ "$(answer "$work/whole1.json")" = "$(answer "$work/whole2.json")" ] || fail "the two greedy answers differ"
ok "whole generations through nginx give the same greedy answer"

curl -fsN "$front/api/generate" -d '{"model": "'$model'", "prompt": "Prince Andrew"}' > "$work/stream.ndjson" ||
    fail "streamed generate through nginx"
python3 - "$work/stream.ndjson" "$(answer "$work/whole1.json")" <<'EOF' || fail "the NDJSON stream through nginx: $(cat "$work/stream.ndjson")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert lines[-1]["done"] and not any(l["done"] for l in lines[:-1])
assert "".join(l["response"] for l in lines) == sys.argv[2]
EOF
ok "a streamed generation through nginx arrives as NDJSON ending with done, the same text"

chat='{"model": "'$model'", "messages": [{"role": "user", "content": "Prince Andrew"}], "stream": true}'
curl -fsN "$front/v1/chat/completions" -d "$chat" > "$work/stream.sse" || fail "streamed chat completion through nginx"
python3 - "$work/stream.sse" <<'EOF' || fail "the event stream through nginx: $(cat "$work/stream.sse")"
import json, sys
data = [l[len("data: "):].strip() for l in open(sys.argv[1]) if l.startswith("data: ")]
assert data[-1] == "[DONE]", data[-1:]
chunks = [json.loads(d) for d in data[:-1]]
assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] == "length"
EOF
ok "a streamed OpenAI chat completion through nginx ends with [DONE]"

# (how many pieces a stream has depends on how fast the reader takes them: the server joins
# what has not been sent yet, so only their sum is checked)

# both backends served generations: nginx's log names them, and each has the model loaded
for port in "$port_a" "$port_b"; do
    grep -E "^POST /(api/generate|v1/chat/completions) 200 127.0.0.1:$port$" "$work/nginx/access.log" > /dev/null ||
        fail "nginx sent no generation to 127.0.0.1:$port: $(cat "$work/nginx/access.log")"
    curl -fs "http://127.0.0.1:$port/api/ps" | grep -q tolstoy || fail "127.0.0.1:$port has no model loaded"
done
ok "nginx spread the generations over both backends"

# ---- model management is not reachable through nginx
status=$(curl -s -o "$work/out" -w '%{http_code}' -X DELETE "$front/api/delete" -d '{"model": "'$model'"}')
[ "$status" = 403 ] || fail "DELETE /api/delete through nginx answered $status"
status=$(curl -s -o /dev/null -w '%{http_code}' "$front/api/pull" -d '{"model": "'$model'", "insecure": true}')
[ "$status" = 403 ] || fail "/api/pull through nginx answered $status"
for port in "$port_a" "$port_b"; do
    curl -fs "http://127.0.0.1:$port/api/tags" | grep -q tolstoy || fail "127.0.0.1:$port lost the model"
done
ok "pull and delete through nginx are refused"
echo "all deployment checks passed"
