#!/usr/bin/env python3
"""Prefix-cache hit rate across replicas behind a real proxy: session affinity vs round robin.

Starts 3 `tandem serve` replicas of the bundled model (fresh caches for every policy), puts
haproxy with deploy/proxy/haproxy.cfg in front of them (HTTP/2 cleartext, gRPC passes through),
and drives multi-turn sessions through it with `tandem bench --session-header x-session-id`. For each policy it prints the
token hit rate, TTFT and throughput that `tandem bench` measured, one line per policy:

    bench/e2e/session_affinity.py --tandem build/release/tandem [--sessions 48] [--turns 4]
        [--runs 1] [-- extra serve flags]

Policies:
  single       one replica, no proxy (the hit rate affinity should approach);
  affinity     deploy/proxy/haproxy.cfg as shipped (`balance hdr(x-session-id)` + `hash-type
               consistent`): each conversation stays on one replica, which holds its history;
  round-robin  the same file with `balance roundrobin`: a turn lands on the replica holding its
               history one time in three.

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
HAPROXY_CFG = os.path.join(REPO, "deploy", "proxy", "haproxy.cfg")
REPLICAS = 3  # the servers haproxy.cfg names


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def haproxy_config(policy):
    with open(HAPROXY_CFG, encoding="utf-8") as f:
        text = f.read()
    if policy == "round-robin":
        hashing = f"    balance hdr({SESSION_HEADER})\n"
        assert hashing in text, f"{HAPROXY_CFG} no longer hashes on {SESSION_HEADER}"
        text = text.replace(hashing, "    balance roundrobin\n")
    return text


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
    replicas = 1 if policy == "single" else REPLICAS
    model = args.model or os.path.join(REPO, "bundled", "tandem-tiny-chat")
    metrics_ports = [free_port() for _ in range(replicas)]  # haproxy's health checks read them
    servers = []
    proxy = None
    workdir = tempfile.mkdtemp(prefix="tandem-affinity-")
    try:
        for port in metrics_ports:
            servers.append(ServeProcess(args.tandem, model, *args.serve_flags, metrics_port=port))
        address = servers[0].address
        if policy != "single":
            port = free_port()
            config = os.path.join(workdir, "haproxy.cfg")
            with open(config, "w", encoding="utf-8") as f:
                f.write(haproxy_config(policy))
            env = dict(os.environ, TANDEM_PROXY_BIND=f"127.0.0.1:{port}",
                       TANDEM_PROXY_STATS_BIND=f"127.0.0.1:{free_port()}")
            for i, (server, metrics) in enumerate(zip(servers, metrics_ports), start=1):
                env[f"TANDEM_BACKEND{i}"] = server.address
                env[f"TANDEM_BACKEND{i}_METRICS"] = str(metrics)
            proxy = subprocess.Popen(["haproxy", "-f", config], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    print(f"{REPLICAS} replicas, {args.sessions} sessions x {args.turns} turns "
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
