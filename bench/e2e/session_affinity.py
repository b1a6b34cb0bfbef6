#!/usr/bin/env python3
"""Prefix-cache hit rate across replicas behind a real proxy: session affinity vs round robin.

Starts R `tandem serve` replicas of the bundled model (fresh caches for every policy), puts
haproxy in front of them (HTTP/2 cleartext, gRPC passes through), and drives multi-turn sessions
through it with `tandem bench --session-header x-session-id`. For each policy it prints the
token hit rate, TTFT and throughput that `tandem bench` measured, one line per policy:

    bench/e2e/session_affinity.py --tandem build/release/tandem [--replicas 3] [--sessions 48]
        [--turns 4] [--runs 1] [-- extra serve flags]

Policies:
  single       one replica, no proxy (the hit rate affinity should approach);
  affinity     haproxy `balance hdr(x-session-id)` + `hash-type consistent`: each conversation
               stays on one replica, which holds its history;
  round-robin  haproxy `balance roundrobin`: a turn lands on the replica holding its history
               one time in R.

Needs haproxy (Debian's, 2.6) on PATH; scripts/setup.sh installs it.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

from tandem_serve import ServeProcess  # noqa: E402

SESSION_HEADER = "x-session-id"
BALANCE = {
    "affinity": f"balance hdr({SESSION_HEADER})\n  hash-type consistent",
    "round-robin": "balance roundrobin",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def haproxy_config(port, backends, policy):
    servers = "\n".join(f"  server r{i} {address} proto h2 check"
                        for i, address in enumerate(backends))
    return f"""global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 600s
  timeout server 600s
frontend grpc
  bind 127.0.0.1:{port} proto h2
  default_backend tandem
backend tandem
  {BALANCE[policy]}
{servers}
"""


def wait_for_port(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"haproxy did not listen on {port}")


def run_policy(args, policy):
    replicas = 1 if policy == "single" else args.replicas
    model = args.model or os.path.join(REPO, "bundled", "tandem-tiny-chat")
    servers = [ServeProcess(args.tandem, model, *args.serve_flags) for _ in range(replicas)]
    proxy = None
    workdir = tempfile.mkdtemp(prefix="tandem-affinity-")
    try:
        address = servers[0].address
        if policy != "single":
            port = free_port()
            config = os.path.join(workdir, "haproxy.cfg")
            with open(config, "w", encoding="ascii") as f:
                f.write(haproxy_config(port, [s.address for s in servers], policy))
            proxy = subprocess.Popen(["haproxy", "-f", config], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            wait_for_port(port)
            address = f"127.0.0.1:{port}"
        turns = args.sessions * args.turns
        bench = subprocess.run(
            [args.tandem, "bench", "--address", address, "--session-header", SESSION_HEADER,
             "--concurrency", str(args.concurrency), "--requests", str(turns),
             "--turns", str(args.turns), "--system-tokens", str(args.system_tokens),
             "--user-tokens", str(args.user_tokens), "--max-new-tokens",
             str(args.max_new_tokens), "--json"],
            capture_output=True, text=True, check=False)
        if bench.returncode != 0:
            raise RuntimeError(f"tandem bench failed ({policy}): {bench.stderr.strip()}")
        return json.loads(bench.stdout)
    finally:
        if proxy:
            proxy.terminate()
            proxy.wait(timeout=10)
        for server in servers:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tandem", required=True)
    parser.add_argument("--model", help="checkpoint directory (default: the bundled model)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=12)
    parser.add_argument("--system-tokens", type=int, default=256)
    parser.add_argument("--user-tokens", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--policies", default="single,affinity,round-robin")
    parser.add_argument("serve_flags", nargs="*", help="extra `tandem serve` flags, after --")
    args = parser.parse_args()
    if not shutil.which("haproxy"):
        sys.exit("haproxy is not on PATH (Debian: apt-get install haproxy)")
    print(f"{args.replicas} replicas, {args.sessions} sessions x {args.turns} turns "
          f"(system {args.system_tokens} + user {args.user_tokens}, output "
          f"{args.max_new_tokens}), {args.concurrency} in flight")
    for run in range(args.runs):
        for policy in args.policies.split(","):
            r = run_policy(args, policy)
            print(f"run {run + 1} {policy:12s} hit rate {r['token_hit_rate']:.3f}  "
                  f"cached {r['cached_tokens']}/{r['prompt_tokens']}  "
                  f"TTFT p50 {r['ttft_s']['p50'] * 1000:.1f} ms p95 "
                  f"{r['ttft_s']['p95'] * 1000:.1f} ms  {r['requests_per_s']:.1f} req/s  "
                  f"ok {r['ok']}/{r['requests']}", flush=True)


if __name__ == "__main__":
    main()
