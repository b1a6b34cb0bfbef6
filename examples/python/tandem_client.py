#!/usr/bin/env python3
"""A small tandem client: model information, then a streamed Generate and a streamed Chat.

It uses Debian's python3-grpcio and python3-protobuf, and Python modules generated from proto/
(run ./generate_stubs.sh first; README.md explains). The text prints as it streams in, followed
by the usage the server reports (prompt tokens, how many of them came from the prefix cache,
generated tokens).

    ./tandem_client.py --address 127.0.0.1:50051 --prompt "Once upon a time"
    ./tandem_client.py --address host:50051 --tls-ca ca.pem --token "$TOKEN"
"""

import argparse
import os
import sys

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))


def import_stubs(stubs_dir):
    """Imports the generated modules from `stubs_dir` (or from sys.path when it is None)."""
    if stubs_dir:
        sys.path.insert(0, stubs_dir)
    try:
        from tandem.v1 import tandem_pb2, tandem_pb2_grpc  # noqa: PLC0415
    except ImportError as error:
        raise SystemExit(
            f"cannot import the generated tandem modules ({error}); run "
            f"{os.path.join(HERE, 'generate_stubs.sh')} first or pass --stubs DIR") from error
    return tandem_pb2, tandem_pb2_grpc


class TandemClient:
    """One channel to a tandem server, with TLS and a bearer token when asked for."""

    def __init__(self, address, stubs, tls_ca=None, tls_server_name=None, token=None):
        self.pb, pb_grpc = stubs
        if tls_ca:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            if token:
                # Access-token call credentials send "authorization: Bearer <token>".
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
            self.channel = grpc.secure_channel(address, credentials, options)
            self.metadata = ()
        else:
            # gRPC refuses call credentials on a plaintext channel, so the header goes with
            # each call instead.
            self.channel = grpc.insecure_channel(address)
            self.metadata = (("authorization", "Bearer " + token),) if token else ()
        self.stub = pb_grpc.TandemStub(self.channel)

    def close(self):
        self.channel.close()

    def model_info(self, timeout=30):
        return self.stub.GetModelInfo(self.pb.GetModelInfoRequest(), metadata=self.metadata,
                                      timeout=timeout)

    def sampling(self, max_new_tokens, temperature=0.7, seed=None, ignore_eos=False):
        params = self.pb.SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature,
                                        ignore_eos=ignore_eos)
        if seed is not None:
            params.seed = seed
        return params

    def generate(self, prompt, sampling, on_text=None, timeout=600):
        """Streams a Generate of `prompt` (text); returns (text, chunks, Complete)."""
        request = self.pb.GenerateRequest(text=prompt, sampling=sampling)
        return self._read(self.stub.Generate(request, metadata=self.metadata, timeout=timeout),
                          on_text)

    def chat(self, messages, sampling, on_text=None, timeout=600, on_reasoning=None):
        """Streams a Chat of `messages`, a list of (role, content); returns (text, chunks,
        Complete). A reasoning model's reasoning (ModelInfo.reasoning_format) comes apart from
        the answer: to `on_reasoning` as it streams, never in `text`."""
        request = self.pb.ChatRequest(
            messages=[self.pb.ChatMessage(role=r, content=c) for r, c in messages],
            sampling=sampling)
        return self._read(self.stub.Chat(request, metadata=self.metadata, timeout=timeout),
                          on_text, on_reasoning)

    def choices(self, prompt, sampling, n, timeout=600):
        """Generates `n` continuations of `prompt` (text) in one call (SamplingParams.n): the
        prompt is prefilled once. Messages of the choices interleave, each naming its `index`;
        returns [(text, Complete)] in choice order."""
        sampling.n = n
        request = self.pb.GenerateRequest(text=prompt, sampling=sampling)
        texts, completes = [""] * n, [None] * n
        for response in self.stub.Generate(request, metadata=self.metadata, timeout=timeout):
            kind = response.WhichOneof("response")
            if kind == "chunk":
                texts[response.index] += response.chunk.text
            elif kind == "complete":
                texts[response.index] += response.complete.text
                completes[response.index] = response.complete
        return list(zip(texts, completes))

    @staticmethod
    def _read(stream, on_text, on_reasoning=None):
        text, chunks, complete = "", 0, None
        for response in stream:  # raises grpc.RpcError when the call fails
            kind = response.WhichOneof("response")
            if kind == "chunk":
                chunks += 1
                piece, reasoning = response.chunk.text, response.chunk.reasoning
            elif kind == "complete":
                complete = response.complete
                # What was held back until the end, if any.
                piece, reasoning = complete.text, complete.reasoning
            else:
                continue
            if on_reasoning and reasoning:
                on_reasoning(reasoning)
            text += piece
            if on_text and piece:
                on_text(piece)
        return text, chunks, complete


def describe_usage(pb, complete):
    usage = complete.usage
    # Reported where the model's reasoning markers are single tokens (docs/OPENAI_API.md).
    reasoning = (f" ({usage.reasoning_tokens} reasoning)"
                 if usage.HasField("reasoning_tokens") and usage.reasoning_tokens else "")
    return (f"usage: prompt {usage.prompt_tokens} tokens, {usage.cached_tokens} cached, "
            f"{usage.completion_tokens} generated{reasoning}; finish "
            f"{pb.FinishReason.Name(complete.finish_reason)}; first token after "
            f"{complete.timings.first_token_seconds:.3f} s (server)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="server HOST:PORT")
    parser.add_argument("--tls-ca", help="PEM CA certificate of the server; enables TLS")
    parser.add_argument("--tls-server-name", help="name to check the certificate against")
    parser.add_argument("--token", default=os.environ.get("TANDEM_TOKEN"),
                        help="bearer token (default: $TANDEM_TOKEN)")
    parser.add_argument("--prompt", default="Once upon a time", help="Generate's prompt")
    parser.add_argument("--message", default="Tell me a short story.",
                        help="the user message for Chat")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--ignore-eos", action="store_true",
                        help="generate max-new-tokens even past end-of-sequence")
    parser.add_argument("--stubs", default=os.path.join(HERE, "generated"),
                        help="folder of the generated modules (default: ./generated)")
    args = parser.parse_args()

    stubs = import_stubs(args.stubs)
    client = TandemClient(args.address, stubs, args.tls_ca, args.tls_server_name, args.token)
    pb = client.pb
    sampling = client.sampling(args.max_new_tokens, args.temperature, args.seed, args.ignore_eos)

    def show(piece):
        print(piece, end="", flush=True)

    def show_reasoning(piece):  # on stderr, so that stdout holds the answers alone
        print(piece, end="", flush=True, file=sys.stderr)

    try:
        info = client.model_info()
        print(f"model: {info.model_path} ({info.architecture}) on {info.device}, "
              f"vocab {info.vocab_size}, "
              f"max prompt {info.max_prompt_tokens} tokens, "
              f"chat template {'yes' if info.has_chat_template else 'no'}")

        print(f"generate> {args.prompt}")
        _, _, complete = client.generate(args.prompt, sampling, on_text=show)
        print()
        print(describe_usage(pb, complete))

        if info.has_chat_template:
            print(f"chat> {args.message}")
            _, _, complete = client.chat([("user", args.message)], sampling, on_text=show,
                                         on_reasoning=show_reasoning)
            print()
            print(describe_usage(pb, complete))
        else:
            print("chat: skipped, the model has no chat template")
    except grpc.RpcError as error:
        print(f"\nerror: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
