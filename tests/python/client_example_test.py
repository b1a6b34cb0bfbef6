#!/usr/bin/env python3
"""The Python example client (examples/python) against a real `tandem serve` on loopback.

Run by CTest (tests/CMakeLists.txt) with the system python3, where Debian's python3-grpcio lives.
It generates the Python modules from proto/ with protoc and grpc_python_plugin, starts servers
on ports they pick (--port 0), and checks: the example script end to end; streaming Generate and
Chat; grpc.health.v1 SERVING; server reflection listing the services; TLS with a bearer token.

A missing python3-grpcio is a failure, not a skip: scripts/setup.sh installs it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tandem_serve import ServeProcess

try:
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as missing:
    print(f"FAIL: {missing}: the Python client needs Debian's python3-grpcio and python3-protobuf "
          "(scripts/setup.sh installs them)", file=sys.stderr)
    sys.exit(1)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_DIR = os.path.join(REPO, "examples", "python")
TLS_CERT = os.path.join(REPO, "tests", "data", "tls", "server.crt")
TLS_KEY = os.path.join(REPO, "tests", "data", "tls", "server.key")

OPTIONS = None  # the command line, set in main()
STUBS = None    # the folder of generated modules
SERVER = None   # the plaintext server every test shares

# A template that opens a reasoning block at the end of the prompt, as Qwen3's and
# DeepSeek-R1's do (tests/server/thinking_model.h holds the same).
THINKING_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{{ message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}")


def start_server(*extra):
    return ServeProcess(OPTIONS.tandem, OPTIONS.model, *extra)


def example_module():
    sys.path.insert(0, EXAMPLE_DIR)
    import tandem_client  # noqa: PLC0415
    return tandem_client


def reflection_messages():
    """The request and response messages of grpc.reflection.v1alpha, built at run time.

    python3-grpcio does not ship grpc_reflection, and Debian packages no .proto of it, so the
    few fields a service listing needs are declared here (field numbers from the reflection
    protocol).
    """
    f = descriptor_pb2.FieldDescriptorProto
    # proto2, so that list_services = "" is sent: in the real proto3 file it belongs to a oneof,
    # which gives it presence; a plain proto3 field would drop the empty string.
    file = descriptor_pb2.FileDescriptorProto(name="tandem_test/reflection_subset.proto",
                                              package="grpc.reflection.v1alpha", syntax="proto2")

    def message(name, fields):
        m = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            m.field.add(name=field_name, number=number, type=kind, label=label,
                        type_name=type_name)

    optional, repeated = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    message("ServerReflectionRequest", [("host", 1, f.TYPE_STRING, optional, None),
                                        ("list_services", 7, f.TYPE_STRING, optional, None)])
    message("ServiceResponse", [("name", 1, f.TYPE_STRING, optional, None)])
    message("ListServiceResponse", [("service", 1, f.TYPE_MESSAGE, repeated,
                                     ".grpc.reflection.v1alpha.ServiceResponse")])
    message("ErrorResponse", [("error_code", 1, f.TYPE_INT32, optional, None),
                              ("error_message", 2, f.TYPE_STRING, optional, None)])
    message("ServerReflectionResponse", [
        ("valid_host", 1, f.TYPE_STRING, optional, None),
        ("list_services_response", 6, f.TYPE_MESSAGE, optional,
         ".grpc.reflection.v1alpha.ListServiceResponse"),
        ("error_response", 7, f.TYPE_MESSAGE, optional, ".grpc.reflection.v1alpha.ErrorResponse"),
    ])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    factory = message_factory.MessageFactory(pool)

    def cls(name):
        descriptor = pool.FindMessageTypeByName("grpc.reflection.v1alpha." + name)
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(descriptor)
        return factory.GetPrototype(descriptor)

    return cls("ServerReflectionRequest"), cls("ServerReflectionResponse")


class ExampleClientTest(unittest.TestCase):

    def setUp(self):
        module = example_module()
        self.stubs = module.import_stubs(STUBS)
        self.client = module.TandemClient(SERVER.address, self.stubs)
        self.pb = self.client.pb

    def tearDown(self):
        self.client.close()

    def test_example_script_prints_model_text_and_usage(self):
        result = subprocess.run(
            [sys.executable, os.path.join(EXAMPLE_DIR, "tandem_client.py"), "--address",
             SERVER.address, "--stubs", STUBS, "--max-new-tokens", "8", "--temperature", "0",
             "--ignore-eos"], capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("model: ", result.stdout)
        self.assertIn(") on cpu, vocab ", result.stdout)
        self.assertIn("Zamba2ForCausalLM", result.stdout)
        usage_lines = [l for l in result.stdout.splitlines() if l.startswith("usage: prompt ")]
        self.assertEqual(len(usage_lines), 2, result.stdout)  # Generate and Chat
        for line in usage_lines:
            self.assertIn("8 generated; finish LENGTH", line)

    def test_a_reasoning_models_reasoning_streams_apart_from_its_answer(self):
        # The test model with a template that opens a <think> block, served split (think) and
        # whole (none): the split answer is the whole one cut at its first </think>.
        with tempfile.TemporaryDirectory(prefix="tandem_thinking_") as model:
            for name in os.listdir(OPTIONS.model):
                if name != "tokenizer_config.json":
                    os.symlink(os.path.join(OPTIONS.model, name), os.path.join(model, name))
            with open(os.path.join(OPTIONS.model, "tokenizer_config.json"),
                      encoding="utf-8") as f:
                config = json.load(f)
            config["chat_template"] = THINKING_TEMPLATE
            with open(os.path.join(model, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f)
            module = example_module()
            answers = {}
            for format_name in ("think", "none"):
                server = ServeProcess(OPTIONS.tandem, model, "--reasoning-format", format_name)
                client = module.TandemClient(server.address, self.stubs)
                try:
                    self.assertEqual(client.model_info().reasoning_format, format_name)
                    sampling = client.sampling(12, temperature=0, ignore_eos=True)
                    pieces = []
                    text, _, complete = client.chat([("user", "Why is the sky blue?")], sampling,
                                                    on_reasoning=pieces.append)
                    answers[format_name] = ("".join(pieces), text, complete.usage)
                finally:
                    client.close()
                    server.stop()
        reasoning, answer, usage = answers["think"]
        _, whole, plain_usage = answers["none"]
        self.assertNotEqual(reasoning, "")
        if "</think>" in whole:
            before, after = whole.split("</think>", 1)
            self.assertEqual((reasoning, answer), (before, after.lstrip()))
        else:  # cut off inside the block: all reasoning
            self.assertEqual((reasoning, answer), (whole, ""))
        # The fixture spells the markers in several tokens: not counted, so left out.
        self.assertFalse(usage.HasField("reasoning_tokens"))
        self.assertTrue(plain_usage.HasField("reasoning_tokens"))
        self.assertEqual(plain_usage.reasoning_tokens, 0)

    def test_generate_streams_chunks_then_usage(self):
        pieces = []
        sampling = self.client.sampling(6, temperature=0, ignore_eos=True)
        text, chunks, complete = self.client.generate("Hello world", sampling, pieces.append)
        self.assertGreaterEqual(chunks, 1)
        self.assertIsNotNone(complete)
        self.assertEqual(complete.usage.completion_tokens, 6)
        self.assertGreater(complete.usage.prompt_tokens, 0)
        self.assertEqual(complete.finish_reason, self.pb.LENGTH)
        self.assertEqual("".join(pieces), text)

    def test_chat_streams_and_the_follow_up_hits_the_cache(self):
        sampling = self.client.sampling(6, temperature=0, ignore_eos=True)
        conversation = [("system", "You are terse."), ("user", "Name a colour.")]
        answer, chunks, complete = self.client.chat(conversation, sampling)
        self.assertGreaterEqual(chunks, 1)
        self.assertEqual(complete.usage.completion_tokens, 6)
        conversation += [("assistant", answer), ("user", "Another?")]
        _, _, follow_up = self.client.chat(conversation, sampling)
        self.assertGreater(follow_up.usage.prompt_tokens, complete.usage.prompt_tokens)
        self.assertGreater(follow_up.usage.cached_tokens, 0)

    def test_choices_come_apart_by_index(self):
        sampling = self.client.sampling(6, temperature=1.0, seed=11, ignore_eos=True)
        choices = self.client.choices("Once upon a time", sampling, 3)
        self.assertEqual(len(choices), 3)
        for text, complete in choices:
            self.assertIsNotNone(complete)
            self.assertEqual(complete.usage.completion_tokens, 6)
            self.assertEqual(complete.finish_reason, self.pb.LENGTH)
        # Choice 0 samples with the request's own seed: a lone call's text.
        lone, _, _ = self.client.generate(
            "Once upon a time", self.client.sampling(6, temperature=1.0, seed=11, ignore_eos=True))
        self.assertEqual(choices[0][0], lone)

    def test_bad_request_is_invalid_argument(self):
        sampling = self.client.sampling(4, temperature=0)
        sampling.top_p = 1.5
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.generate("Hello", sampling)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("top_p", raised.exception.details())

    def test_health_is_serving(self):
        sys.path.insert(0, STUBS)
        import health_pb2  # noqa: PLC0415
        import health_pb2_grpc  # noqa: PLC0415
        health = health_pb2_grpc.HealthStub(self.client.channel)
        for service in ("", "tandem.v1.Tandem"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
            self.assertEqual(response.status, health_pb2.HealthCheckResponse.SERVING, service)

    def test_reflection_lists_the_services(self):
        request_class, response_class = reflection_messages()
        call = self.client.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString)
        responses = list(call(iter([request_class(list_services="")]), timeout=30))
        self.assertEqual(len(responses), 1)
        names = {s.name for s in responses[0].list_services_response.service}
        self.assertIn("tandem.v1.Tandem", names)
        self.assertIn("grpc.health.v1.Health", names)


class SecureServerTest(unittest.TestCase):
    """The example client's --tls-ca and --token against a server with TLS and a token."""

    @classmethod
    def setUpClass(cls):
        cls.server = start_server("--tls-cert", TLS_CERT, "--tls-key", TLS_KEY, "--auth-token",
                            "py-s3cret")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self, **security):
        module = example_module()
        return module.TandemClient(self.server.address, module.import_stubs(STUBS), **security)

    def test_tls_and_token_work(self):
        client = self.client(tls_ca=TLS_CERT, token="py-s3cret")
        try:
            self.assertTrue(client.model_info().vocab_size > 0)
            _, _, complete = client.generate("Hi", client.sampling(3, temperature=0,
                                                                   ignore_eos=True))
            self.assertEqual(complete.usage.completion_tokens, 3)
        finally:
            client.close()

    def test_example_script_with_tls_and_token_from_the_environment(self):
        result = subprocess.run(
            [sys.executable, os.path.join(EXAMPLE_DIR, "tandem_client.py"), "--address",
             self.server.address, "--stubs", STUBS, "--tls-ca", TLS_CERT, "--max-new-tokens",
             "3", "--ignore-eos"], capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "TANDEM_TOKEN": "py-s3cret"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.count("usage: prompt "), 2, result.stdout)

    def test_a_wrong_token_is_unauthenticated(self):
        client = self.client(tls_ca=TLS_CERT, token="wrong")
        try:
            with self.assertRaises(grpc.RpcError) as raised:
                client.model_info()
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        finally:
            client.close()


def main():
    global OPTIONS, STUBS, SERVER
    parser = argparse.ArgumentParser()
    parser.add_argument("--tandem", required=True, help="the tandem binary")
    parser.add_argument("--model", required=True, help="a checkpoint with a chat template")
    parser.add_argument("--protoc", default="protoc")
    parser.add_argument("--grpc-python-plugin", default="grpc_python_plugin")
    OPTIONS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="tandem_py_stubs_") as stubs:
        subprocess.run([os.path.join(EXAMPLE_DIR, "generate_stubs.sh"), stubs], check=True,
                       env={**os.environ, "PROTOC": OPTIONS.protoc,
                            "GRPC_PYTHON_PLUGIN": OPTIONS.grpc_python_plugin})
        STUBS = stubs
        SERVER = start_server()
        try:
            program = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
        finally:
            SERVER.stop()
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
