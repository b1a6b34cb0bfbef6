#!/usr/bin/env python3
"""Memory of `tandem serve` under an HTTP/2 rapid-reset flood, and after it.

Starts each given tandem binary (e.g. the previous build and this one, for a before/after in one
run) on the bundled model, sends N Generate calls on one raw HTTP/2 connection, each HEADERS +
DATA immediately followed by RST_STREAM(CANCEL), samples the server's RSS during the flood and
for 30 s after, checks that a polite gRPC client is still served, and prints one line per run:

    bench/e2e/reset_flood.py --tandem build/release/tandem [--tandem OTHER] [--calls 100000]
        [--runs 3] [--model DIR] [-- extra serve flags]

Needs Debian's python3-grpcio and python3-h2 (scripts/setup.sh installs them).
"""

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

import grpc  # noqa: E402
from h2_raw_client import RawH2Connection, generate_request  # noqa: E402
from tandem_serve import ServeProcess  # noqa: E402

GENERATE = "/tandem.v1.Tandem/Generate"


def flood(tandem, model, calls, extra):
    server = ServeProcess(tandem, model, *extra)
    try:
        generate = grpc.insecure_channel(server.address).unary_stream(GENERATE)
        list(generate(generate_request("Hello", 4), timeout=60))
        baseline = peak = server.rss_bytes()
        connection = RawH2Connection(server.address)
        message = generate_request("Once upon a time", 64)
        started = time.time()
        sent = 0
        try:
            while sent < calls:
                batch = []
                for _ in range(min(200, calls - sent)):
                    stream, frames = connection.request_frames(GENERATE, message)
                    batch += frames + [connection.reset_frame(stream)]
                connection.send(*batch)
                sent += len(batch) // 3
                peak = max(peak, server.rss_bytes())
        except OSError:
            pass  # the server closed the connection: the flood is over
        seconds = time.time() - started
        connection.close()
        for _ in range(30):
            time.sleep(1)
            peak = max(peak, server.rss_bytes())
        after = server.rss_bytes()
        polite = "served"
        try:
            list(generate(generate_request("Hello", 4), timeout=60))
        except grpc.RpcError as error:
            polite = error.code().name
        return baseline, peak, after, sent, seconds, polite
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tandem", action="append", required=True)
    parser.add_argument("--model", default=os.path.join(REPO, "bundled", "tandem-tiny-chat"))
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--runs", type=int, default=3)
    options, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    mib = 2**20
    for run in range(options.runs):
        for tandem in options.tandem:
            baseline, peak, after, sent, seconds, polite = flood(tandem, options.model,
                                                                 options.calls, extra)
            print(f"{tandem} run {run + 1}: {sent} resets in {seconds:.1f} s; RSS MiB before "
                  f"{baseline / mib:.0f}, peak {peak / mib:.0f}, 30 s after {after / mib:.0f}; "
                  f"polite client {polite}", flush=True)


if __name__ == "__main__":
    main()
