#!/usr/bin/env python3
"""What pinning a prefix is worth after a quiet spell: the time to first token of a question
about a long document, once the document's state was evicted by other traffic, against the
same once it was pinned (PinPrefix).

One `tandem serve` of the bundled model with a small memory budget, so that unrelated traffic
evicts the document. Each run, over real gRPC with token ids (the document is the same ids
every time, so a restore is exact):

  cold      the document and a question, nothing cached;
  evicted   unrelated prompts (the flood) go through, then the document and another question;
  pinned    the document is pinned, the same flood goes through, then a third question.

Prints one markdown row per run and the ratio evicted / pinned of each run's TTFT:

    bench/e2e/pinned_prefix.py --tandem build/release/tandem [--doc-tokens 4000]
        [--flood 64] [--runs 3] [-- extra serve flags]

Needs python3-grpcio and the generated modules (examples/python/generate_stubs.sh writes them
to a temporary folder here).
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

from tandem_serve import ServeProcess  # noqa: E402


def import_stubs(folder):
    subprocess.run([os.path.join(REPO, "examples", "python", "generate_stubs.sh"), folder],
                   check=True, stdout=subprocess.DEVNULL)
    sys.path.insert(0, folder)
    from tandem.v1 import tandem_pb2, tandem_pb2_grpc  # noqa: PLC0415
    return tandem_pb2, tandem_pb2_grpc


def ask(pb, stub, ids, new_tokens=4):
    """Generates from `ids`; returns (seconds to the first token, cached prompt tokens)."""
    request = pb.GenerateRequest()
    request.token_ids.ids.extend(ids)
    request.sampling.temperature = 0
    request.sampling.max_new_tokens = new_tokens
    request.sampling.ignore_eos = True
    start = time.perf_counter()
    first = None
    cached = None
    for response in stub.Generate(request):
        if response.HasField("chunk") and first is None and response.chunk.token_ids:
            first = time.perf_counter() - start
        if response.HasField("complete"):
            cached = response.complete.usage.cached_tokens
    return first, cached


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tandem", default=os.path.join(REPO, "build", "release", "tandem"))
    parser.add_argument("--model", default=os.path.join(REPO, "bundled", "tandem-tiny-chat"))
    parser.add_argument("--doc-tokens", type=int, default=4000)
    parser.add_argument("--flood", type=int, default=64, help="unrelated prompts between asks")
    parser.add_argument("--flood-tokens", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("serve_flags", nargs="*")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        pb, pb_grpc = import_stubs(folder)
        import grpc  # noqa: PLC0415
        server = ServeProcess(args.tandem, args.model, "--max-prompt-tokens", "8192",
                              *args.serve_flags)
        try:
            stub = pb_grpc.TandemStub(grpc.insecure_channel(server.address))
            vocab = stub.GetModelInfo(pb.GetModelInfoRequest()).vocab_size
            rng = random.Random(1)

            def tokens(n):
                return [rng.randrange(4, vocab) for _ in range(n)]

            def flood():
                for _ in range(args.flood):
                    ask(pb, stub, tokens(args.flood_tokens), new_tokens=1)

            print(f"model {os.path.basename(args.model)}; document {args.doc_tokens} tokens; "
                  f"flood {args.flood} × {args.flood_tokens} tokens; serve "
                  f"{' '.join(args.serve_flags) or '(test defaults: --memory-gib 0.05)'}")
            print()
            print("| run | cold TTFT | evicted TTFT (cached) | pinned TTFT (cached) | "
                  "evicted ÷ pinned |")
            print("|---|---|---|---|---|")
            for run in range(args.runs):
                doc = tokens(args.doc_tokens)
                cold, _ = ask(pb, stub, doc + tokens(16))
                flood()
                evicted, evicted_cached = ask(pb, stub, doc + tokens(16))
                pin = pb.PinPrefixRequest(name=f"doc-{run}")
                pin.token_ids.ids.extend(doc)
                stub.PinPrefix(pin)
                flood()
                pinned, pinned_cached = ask(pb, stub, doc + tokens(16))
                stub.UnpinPrefix(pb.UnpinPrefixRequest(name=f"doc-{run}"))
                print(f"| {run + 1} | {cold * 1000:.1f} ms | {evicted * 1000:.1f} ms "
                      f"({evicted_cached}) | {pinned * 1000:.1f} ms ({pinned_cached}) | "
                      f"{evicted / pinned:.1f} |")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
