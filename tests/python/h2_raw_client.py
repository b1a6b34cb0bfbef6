"""A raw HTTP/2 client that speaks gRPC's framing by hand, for tests that behave as a hostile or
broken client would: it sends exactly the frames it is told to (no client-side flow control, no
stream limits, no automatic WINDOW_UPDATE or PING answers) and reads only when asked.

Built on Debian's python3-hyperframe and python3-hpack (the frame and header codecs of python3-h2),
so that nothing here depends on a gRPC client library's good manners.
"""

import socket
import struct

from hpack import Decoder, Encoder
from hyperframe.frame import (DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CANCEL = 0x8
REFUSED_STREAM = 0x7


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire_type, payload):
    """One protobuf field: wire type 0 takes an int, 2 takes bytes."""
    key = varint((number << 3) | wire_type)
    if wire_type == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def generate_request(text, max_new_tokens, ignore_eos=True):
    """tandem.v1.GenerateRequest{text, sampling{max_new_tokens, ignore_eos}} as protobuf bytes."""
    sampling = field(9, 0, max_new_tokens) + (field(12, 0, 1) if ignore_eos else b"")
    return field(2, 2, text.encode()) + field(5, 2, sampling)


def grpc_message(payload):
    """gRPC's length-prefixed message: no compression, 4-byte big-endian length."""
    return struct.pack(">BI", 0, len(payload)) + payload


class RawH2Connection:
    def __init__(self, address, initial_window=65535, timeout=30):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.next_stream = 1
        self.buffer = b""
        self.peer_settings = {}
        settings = SettingsFrame(0)
        settings.settings[SettingsFrame.INITIAL_WINDOW_SIZE] = initial_window
        self.sock.sendall(PREFACE + settings.serialize())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def request_frames(self, path, message, authority="localhost", end_stream=True,
                       headers_only=False):
        """The HEADERS (and DATA) frames that open a unary-request gRPC call on a new stream;
        returns (stream_id, frames)."""
        stream_id = self.next_stream
        self.next_stream += 2
        headers = HeadersFrame(stream_id)
        headers.data = self.encoder.encode([
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority), ("content-type", "application/grpc"), ("te", "trailers"),
        ])
        headers.flags.add("END_HEADERS")
        if headers_only:
            return stream_id, [headers]
        data = DataFrame(stream_id)
        data.data = grpc_message(message)
        if end_stream:
            data.flags.add("END_STREAM")
        return stream_id, [headers, data]

    def reset_frame(self, stream_id, code=CANCEL):
        frame = RstStreamFrame(stream_id)
        frame.error_code = code
        return frame

    def read_frame(self):
        """The next frame, or None when the peer closed the connection. SETTINGS are
        acknowledged and remembered; PINGs are answered (a peer that does not answer them is
        a dead peer, which is not what most tests are about)."""
        while True:
            while len(self.buffer) < 9:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.buffer += chunk
            length = int.from_bytes(self.buffer[:3], "big")
            while len(self.buffer) < 9 + length:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.buffer += chunk
            frame, _ = Frame.parse_frame_header(memoryview(self.buffer[:9]))
            frame.parse_body(memoryview(self.buffer[9:9 + length]))
            self.buffer = self.buffer[9 + length:]
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                self.peer_settings.update(frame.settings)
                self.send(SettingsFrame(0, flags=["ACK"]))
            elif isinstance(frame, PingFrame) and "ACK" not in frame.flags:
                self.send(PingFrame(0, opaque_data=frame.opaque_data, flags=["ACK"]))
            elif isinstance(frame, HeadersFrame):
                frame.decoded = self.decoder.decode(frame.data)
            return frame

    def read_until(self, predicate):
        """Reads frames until one satisfies predicate (returned) or the connection closes
        (None)."""
        while True:
            frame = self.read_frame()
            if frame is None or predicate(frame):
                return frame


__all__ = ["RawH2Connection", "generate_request", "CANCEL", "REFUSED_STREAM", "GoAwayFrame",
           "RstStreamFrame", "SettingsFrame", "HeadersFrame", "DataFrame", "WindowUpdateFrame"]
