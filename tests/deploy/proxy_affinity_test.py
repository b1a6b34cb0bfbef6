#!/usr/bin/env python3
"""deploy/proxy/haproxy.cfg, as shipped, in front of three real `tandem serve` replicas.

- gRPC streams pass through haproxy (HTTP/2 cleartext on both sides);
- every call of one `x-session-id` lands on one replica (read from each replica's
  tandem_requests_total), and different sessions use more than one replica;
- when a replica stops, haproxy's health check (its /metrics) takes it out, its sessions move,
  and, consistent hashing's promise, every other session stays where it was.

    tests/deploy/proxy_affinity_test.py --tandem build/release/tandem --model DIR

Exit codes: 0 pass, 1 fail, 77 skipped (no haproxy). Needs Debian's python3-grpcio and
python3-h2 (for the request encoder), like the other Python tests.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

import grpc  # noqa: E402
from h2_raw_client import generate_request  # noqa: E402
from tandem_serve import ServeProcess  # noqa: E402

GENERATE = "/tandem.v1.Tandem/Generate"
HAPROXY_CFG = os.path.join(REPO, "deploy", "proxy", "haproxy.cfg")
SESSIONS = [f"session-{i}" for i in range(12)]
CALLS_PER_SESSION = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate_calls_ok(metrics_port):
    """The replica's count of Generate calls that ended OK."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0
    for line in text.splitlines():
        if (line.startswith("tandem_requests_total{") and 'rpc="Generate"' in line
                and 'code="OK"' in line):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


class Failures:

    def __init__(self):
        self.items = []

    def check(self, condition, what):
        print(f"{'ok  ' if condition else 'FAIL'}  {what}", flush=True)
        if not condition:
            self.items.append(what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tandem", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--config", default=HAPROXY_CFG, help="haproxy configuration to test")
    args = parser.parse_args()
    if not shutil.which("haproxy"):
        print("skipped: haproxy is not installed (scripts/setup.sh installs it)")
        return 77

    failures = Failures()
    metrics_ports = [free_port() for _ in range(3)]
    proxy_port = free_port()
    channel = grpc.insecure_channel(f"127.0.0.1:{proxy_port}")
    generate = channel.unary_stream(GENERATE)
    # Started inside the try below, so that a failed start still stops what started before it.
    replicas, alive, proxy = [], [], None

    def call(session, timeout=30):
        """One Generate call through the proxy; the replica that served it, or None."""
        before = [generate_calls_ok(p) if up else 0 for p, up in zip(metrics_ports, alive)]
        try:
            list(generate(generate_request("Hello", 1), metadata=(("x-session-id", session),),
                          timeout=timeout))
        except grpc.RpcError:
            return None
        # The server counts a call as it ends, which may be just after the client saw the end.
        deadline = time.time() + 5
        while True:
            after = [generate_calls_ok(p) if up else 0 for p, up in zip(metrics_ports, alive)]
            served = [i for i in range(3) if after[i] > before[i]]
            if served or time.time() > deadline:
                return served[0] if len(served) == 1 else None
            time.sleep(0.02)

    try:
        for port in metrics_ports:
            replicas.append(ServeProcess(args.tandem, args.model, metrics_port=port))
            alive.append(True)
        env = dict(os.environ, TANDEM_PROXY_BIND=f"127.0.0.1:{proxy_port}",
                   TANDEM_PROXY_STATS_BIND=f"127.0.0.1:{free_port()}")
        for i, (replica, port) in enumerate(zip(replicas, metrics_ports), start=1):
            env[f"TANDEM_BACKEND{i}"] = replica.address
            env[f"TANDEM_BACKEND{i}_METRICS"] = str(port)
        proxy = subprocess.Popen(["haproxy", "-f", args.config], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while call("warm-up", timeout=5) is None:  # haproxy listening, a replica answering
            if time.time() > deadline:
                raise RuntimeError("no call went through haproxy within 20 s")
            time.sleep(0.2)

        home = {}
        for session in SESSIONS:
            served = [call(session) for _ in range(CALLS_PER_SESSION)]
            home[session] = served[0] if len(set(served)) == 1 else None
            failures.check(home[session] is not None,
                           f"every call of {session} went to one replica (replicas {served})")
        used = {r for r in home.values() if r is not None}
        failures.check(len(used) >= 2, f"the sessions spread over {len(used)} replicas")

        # Stop the replica holding the first session; haproxy's check (inter 2 s, fall 2) takes
        # it out within a few seconds, and until then its sessions' calls fail.
        gone = home[SESSIONS[0]]
        if gone is not None:
            replicas[gone].stop()
            alive[gone] = False
            deadline = time.time() + 20
            moved = None
            while moved is None and time.time() < deadline:
                moved = call(SESSIONS[0], timeout=5)
                if moved is None:
                    time.sleep(0.5)
            failures.check(moved is not None and moved != gone,
                           f"{SESSIONS[0]} moved off the stopped replica (to {moved})")
            for session in SESSIONS[1:]:
                if home[session] is not None and home[session] != gone:
                    now = call(session)
                    failures.check(now == home[session],
                                   f"{session} stayed on replica {home[session]} (now {now})")
    except Exception as error:  # pylint: disable=broad-except
        failures.check(False, f"setup: {type(error).__name__}: {error}")
    finally:
        channel.close()
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=10)
        for replica, up in zip(replicas, alive):
            if up:
                replica.stop()

    if failures.items:
        print("Failed:\n  " + "\n  ".join(failures.items))
        return 1
    print("proxy_affinity_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
