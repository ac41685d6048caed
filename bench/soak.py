#!/usr/bin/env python3
"""Soak test of `corral serve` (not a timed test; run by hand, figures go in a commit message).

Starts a server on a free loopback port with a temporary store, pulls the demo model, then:
  1. CLIENTS concurrent streaming /api/generate clients for SECONDS, a quarter of whose
     requests hang up after the first chunk;
  2. IDLE idle sockets held open while a new client must still be served;
and reports errors among the requests that stayed, the server's RSS, thread count and open
files before and after, runner processes, and files left in the store's blob directory.

usage: bench/soak.py CORRAL_BIN [--clients 64] [--seconds 120] [--idle 1100]
"""
import argparse
import http.client
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_stats(pid):
    stats = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                stats[key] = int(value.split()[0])
    stats["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return stats


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def generate(port, hang_up, results, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"model": "tiny-tolstoy", "prompt": random.choice(
        ["Prince Andrew", "Natasha looked at him and", "The old prince", "Pierre"]),
        "options": {"num_predict": 48, "temperature": 0.8}})
    outcome = "ok"
    try:
        conn.request("POST", "/api/generate", body)
        resp = conn.getresponse()
        if resp.status != 200:
            outcome = f"status {resp.status}: {resp.read(200)!r}"
        elif hang_up:
            resp.readline()
            conn.sock.shutdown(socket.SHUT_RDWR)
            outcome = "hung up"
        else:
            done = False
            for line in resp:
                chunk = json.loads(line)
                if "error" in chunk:
                    outcome = f"error chunk: {chunk['error']}"
                    break
                done = chunk.get("done", False)
            if outcome == "ok" and not done:
                outcome = "stream ended without done"
    except Exception as e:  # a client that stays must see no failure of any kind
        outcome = f"exception: {e!r}"
    finally:
        conn.close()
    kind = outcome if outcome in ("ok", "hung up") else "errors"
    with lock:
        results[kind] = results.get(kind, 0) + 1
        if kind == "errors":
            results.setdefault("first_errors", []).append(outcome)


def client_loop(port, deadline, results, lock):
    while time.monotonic() < deadline:
        generate(port, random.random() < 0.25, results, lock)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--idle", type=int, default=1100)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.idle + 512)), hard))

    store = tempfile.mkdtemp(prefix="corral-soak-")
    port = free_port()
    env = dict(os.environ, CORRAL_HOST=f"127.0.0.1:{port}", CORRAL_MODELS=store)
    log = open(os.path.join(store, "server.log"), "w")
    server = subprocess.Popen([args.binary, "serve"], env=env, stderr=log)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("POST", "/api/pull", json.dumps({"model": "tiny-tolstoy", "stream": False}))
        assert conn.getresponse().status == 200
        conn.close()
        lock = threading.Lock()
        warm = {}
        generate(port, False, warm, lock)
        assert warm.get("ok") == 1, warm
        time.sleep(1)
        before = proc_stats(server.pid)
        runners_before = children(server.pid)

        results = {}
        deadline = time.monotonic() + args.seconds
        threads = [threading.Thread(target=client_loop, args=(port, deadline, results, lock))
                   for _ in range(args.clients)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start

        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.idle)]
        time.sleep(1)
        during_idle = proc_stats(server.pid)
        probe = {}
        generate(port, False, probe, lock)
        for s in idle:
            s.close()
        for _ in range(100):  # connection threads end once their sockets close
            after = proc_stats(server.pid)
            if after["Threads"] <= before["Threads"] and after["fds"] <= before["fds"]:
                break
            time.sleep(0.1)
        runners_after = children(server.pid)
        left = [f for f in os.listdir(os.path.join(store, "blobs"))
                if not f.startswith("sha256-")]
        report = {
            "clients": args.clients, "seconds": round(elapsed, 1),
            "requests_completed": results.get("ok", 0), "requests_hung_up": results.get("hung up", 0),
            "errors": results.get("errors", 0), "first_errors": results.get("first_errors", [])[:5],
            "new_client_with_idle_sockets": "ok" if probe.get("ok") == 1 else probe,
            "rss_kib": [before["VmRSS"], during_idle["VmRSS"], after["VmRSS"]],
            "threads": [before["Threads"], during_idle["Threads"], after["Threads"]],
            "fds": [before["fds"], during_idle["fds"], after["fds"]],
            "runners": [len(runners_before), len(runners_after)],
            "temp_files_left": left,
        }
        print(json.dumps(report, indent=1))
        ok = (report["errors"] == 0 and probe.get("ok") == 1 and
              after["Threads"] <= before["Threads"] and after["fds"] <= before["fds"] and
              runners_after == runners_before and not left)
    finally:
        server.terminate()
        server.wait()
        after_exit = subprocess.run(["pgrep", "-f", f"runner --model {store}"],
                                    capture_output=True, text=True).stdout.split()
        if after_exit:
            print(f"runner processes left after the server stopped: {after_exit}")
            ok = False
        subprocess.run(["rm", "-rf", store])
    print("soak: PASS" if ok else "soak: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
