#!/usr/bin/env python3
"""What one misbehaving HTTP/2 client can take from a real `tandem serve`, tried with raw frames
(h2_raw_client.py, on Debian's python3-hyperframe and python3-hpack) as an attacker or a broken
client would send them, while a well-behaved gRPC client (Debian's python3-grpcio) checks that
the server still serves:

- clients that open streams and never read (a zero flow-control window) lose their stream slots
  after the stall timeout, and the server serves others again;
- one connection cannot open more streams than --max-streams-per-connection;
- a rapid-reset flood (HEADERS+DATA+RST_STREAM, over and over) neither starves others nor leaves
  the server's memory grown once it is over.

Run by CTest with the system python3.
"""

import argparse
import sys
import time
import unittest

try:
    import grpc
    from h2_raw_client import (REFUSED_STREAM, DataFrame, HeadersFrame, RawH2Connection,
                               RstStreamFrame, SettingsFrame, generate_request)
except ImportError as missing:
    print(f"FAIL: {missing}: needs Debian's python3-grpcio and python3-h2 "
          "(scripts/setup.sh installs them)", file=sys.stderr)
    sys.exit(1)

from tandem_serve import ServeProcess

OPTIONS = None
GENERATE = "/tandem.v1.Tandem/Generate"


def status_code_of(call):
    try:
        list(call)
        return grpc.StatusCode.OK
    except grpc.RpcError as error:
        return error.code()


class TransportLimitsTest(unittest.TestCase):

    def start(self, *extra):
        server = ServeProcess(OPTIONS.tandem, OPTIONS.model, *extra)
        self.addCleanup(server.stop)
        channel = grpc.insecure_channel(server.address)
        self.addCleanup(channel.close)
        return server, channel.unary_stream(GENERATE)

    def test_clients_that_never_read_lose_their_slots(self):
        server, generate = self.start("--max-streams", "3", "--stream-stall-seconds", "1")
        stalled = []
        for _ in range(3):
            connection = RawH2Connection(server.address, initial_window=0)
            self.addCleanup(connection.close)
            stream, frames = connection.request_frames(GENERATE, generate_request("Hello", 500))
            connection.send(*frames)
            stalled.append((connection, stream))
        # Each stalled client has its call cancelled once it has read nothing for a second: its
        # trailers (not flow-controlled) say CANCELLED, and the stream is reset.
        for connection, stream in stalled:
            trailers = connection.read_until(
                lambda f, s=stream: isinstance(f, HeadersFrame) and f.stream_id == s
                and "END_STREAM" in f.flags)
            self.assertIsNotNone(trailers, "the server closed the connection instead")
            self.assertIn(("grpc-status", "1"), trailers.decoded)
            reset = connection.read_until(
                lambda f, s=stream: isinstance(f, RstStreamFrame) and f.stream_id == s)
            self.assertIsNotNone(reset)
        # And a client that reads is served.
        self.assertEqual(status_code_of(generate(generate_request("Hello", 4), timeout=60)),
                         grpc.StatusCode.OK)

    def test_one_connection_cannot_take_every_stream(self):
        server, generate = self.start("--max-streams-per-connection", "2")
        connection = RawH2Connection(server.address)
        self.addCleanup(connection.close)
        settings = connection.read_until(lambda f: isinstance(f, SettingsFrame)
                                         and "ACK" not in f.flags)
        self.assertEqual(settings.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS), 2)
        # read_frame acknowledged those settings, and the acknowledgement reaches the server
        # before the streams below, so it enforces them. Open four long streams at once, as a
        # client ignoring the limit would.
        frames = []
        for _ in range(4):
            _, more = connection.request_frames(GENERATE, generate_request("Hello", 2000))
            frames += more
        connection.send(*frames)
        # The transport either refuses the streams beyond the limit (REFUSED_STREAM) or, as
        # gRPC 1.51 does, drops the whole connection for the protocol violation; either way no
        # more than two of its streams are ever served.
        served = set()
        while True:
            frame = connection.read_frame()
            if frame is None:
                break
            if isinstance(frame, DataFrame):
                served.add(frame.stream_id)
            if isinstance(frame, RstStreamFrame) and frame.error_code == REFUSED_STREAM:
                continue
            if len(served) >= 2 and isinstance(frame, DataFrame):
                break  # two streams are being served; the rest were refused or never started
        self.assertLessEqual(len(served), 2)
        # Other connections are served as usual.
        self.assertEqual(status_code_of(generate(generate_request("Hello", 4), timeout=60)),
                         grpc.StatusCode.OK)

    def test_a_rapid_reset_flood_starves_nobody_and_leaves_no_growth(self):
        server, generate = self.start("--max-resets-per-connection", "200")
        self.assertEqual(status_code_of(generate(generate_request("Hello", 4), timeout=60)),
                         grpc.StatusCode.OK)
        baseline = server.rss_bytes()
        connection = RawH2Connection(server.address)
        self.addCleanup(connection.close)
        message = generate_request("Once upon a time", 64)
        sent = 0
        for _ in range(OPTIONS.resets // 200):
            batch = []
            for _ in range(200):
                stream, frames = connection.request_frames(GENERATE, message)
                batch += frames + [connection.reset_frame(stream)]
            connection.send(*batch)
            sent += 200
        # The guard noticed: a fresh call on the flooding connection is refused at once.
        stream, frames = connection.request_frames(GENERATE, message)
        connection.send(*frames)
        trailers = connection.read_until(
            lambda f: isinstance(f, HeadersFrame) and f.stream_id == stream
            and "END_STREAM" in f.flags)
        self.assertIsNotNone(trailers)
        self.assertIn(("grpc-status", "8"), trailers.decoded)  # RESOURCE_EXHAUSTED
        connection.close()
        # A polite client on another connection is served...
        self.assertEqual(status_code_of(generate(generate_request("Hello", 4), timeout=120)),
                         grpc.StatusCode.OK)
        # ...and the server returns to about its size before the flood: what the flood made it
        # allocate is given back to the system.
        if OPTIONS.rss_slack_mb == 0:
            return
        deadline = time.time() + 60
        limit = baseline + OPTIONS.rss_slack_mb * 2**20
        while server.rss_bytes() > limit and time.time() < deadline:
            time.sleep(1)
        grown = (server.rss_bytes() - baseline) / 2**20
        self.assertLess(grown, OPTIONS.rss_slack_mb,
                        f"RSS grew {grown:.0f} MB after {sent} reset streams")


def main():
    global OPTIONS
    parser = argparse.ArgumentParser()
    parser.add_argument("--tandem", required=True, help="the tandem binary")
    parser.add_argument("--model", required=True, help="a small checkpoint")
    parser.add_argument("--resets", type=int, default=20000, help="streams in the flood")
    parser.add_argument("--rss-slack-mb", type=int, default=64,
                        help="RSS growth the flood may leave behind (0: not checked)")
    OPTIONS, rest = parser.parse_known_args()
    program = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
