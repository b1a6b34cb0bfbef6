#!/usr/bin/env python3
"""Renders every chat template in a directory with Python's jinja2 (configured as transformers
configures it, the environment of render_fixtures.py) and with tandem's own engine
(`tandem render-template`), over a set of conversations, and reports per template which
renderings are byte-identical, where the first difference is, and which side failed.

    python3 tools/chat_templates/check_published.py DIR [--tandem build/release/tandem] [-v]

DIR holds *.jinja files, e.g. published templates collected from model repositories (do not
commit those: they are third-party text). The contexts are this script's own; like
transformers' apply_chat_template they always define `tools` and `documents` (None when
absent) and pass the special tokens and extra kwargs as variables. A case counts as agreeing
when both outputs are byte-identical or both renderers refuse it. Exit status 1 when any
case disagrees.
"""
import argparse
import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import jinja2

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from render_fixtures import make_environment  # noqa: E402  (transformers' jinja2 setup)

REPO = pathlib.Path(__file__).resolve().parents[2]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit", "default": "celsius"},
                "days": {"type": "integer", "description": "Days ahead", "minimum": 0},
            },
            "required": ["city"],
        },
    },
}, {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for."}},
            "required": ["query"]},
    },
}]

SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer in one line."}
TURNS = [
    {"role": "user", "content": "Hello! What's 2 + 2?"},
    {"role": "assistant", "content": "It is 4."},
    {"role": "user", "content": "  And <b>\"quoted\"</b> & 'single' \u00e9\u4e2d\U0001F600?\n"},
]
CALL = {"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}
TOOL_TURNS = [
    {"role": "user", "content": "What is the weather in Paris tomorrow?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
     "content": "{\"temperature\": 21, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "Clear and 21 degrees."},
    {"role": "user", "content": "Thanks. And Lyon?"},
]
DOCUMENTS = [
    {"doc_id": 1, "title": "Tides", "text": "The moon raises the tides twice a day."},
    {"doc_id": 2, "title": "Orbits", "text": "The moon orbits the earth in 27 days."},
]


def contexts():
    base = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
            "add_generation_prompt": True, "tools": None, "documents": None}

    def ctx(**kw):
        c = copy.deepcopy(base)
        c.update(copy.deepcopy(kw))
        return c

    # OpenAI-style: no content beside the calls, arguments as a JSON string.
    string_call = copy.deepcopy(TOOL_TURNS)
    string_call[1]["content"] = None
    string_call[1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        CALL["function"]["arguments"])
    return {
        "plain": ctx(messages=[{"role": "user", "content": "Tell me a story."}]),
        "system_multi_turn": ctx(messages=[SYSTEM] + TURNS),
        "no_generation_prompt": ctx(messages=[SYSTEM] + TURNS[:2], add_generation_prompt=False),
        "tools": ctx(messages=[SYSTEM, TURNS[0]], tools=TOOLS),
        "tool_calls": ctx(messages=TOOL_TURNS, tools=TOOLS),
        "tool_calls_string_args": ctx(messages=string_call, tools=TOOLS),
        "documents": ctx(messages=[{"role": "user", "content": "How often are there tides?"}],
                         documents=DOCUMENTS),
        "kwargs_no_thinking": ctx(messages=[SYSTEM, TURNS[0]], enable_thinking=False),
    }


def render_jinja2(env, source, ctx):
    try:
        template = env.from_string(source)
    except Exception as e:  # noqa: BLE001 - a refusal is a result
        return None, f"{type(e).__name__}: {e}"
    try:
        return template.render(**ctx).encode("utf-8"), None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"


def render_tandem(tandem, template_path, ctx):
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:
        json.dump(ctx, f, ensure_ascii=False)
        f.flush()
        r = subprocess.run([tandem, "render-template", "--template", str(template_path),
                            "--context", f.name], capture_output=True, timeout=60)
    if r.returncode == 0:
        return r.stdout, None
    return None, r.stderr.decode("utf-8", "replace").strip() or f"exit {r.returncode}"


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def snippet(data, at):
    return data[max(0, at - 20):at + 20].decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("--tandem", default=str(REPO / "build" / "release" / "tandem"))
    parser.add_argument("-v", "--verbose", action="store_true", help="show every case")
    args = parser.parse_args()
    env = make_environment()
    paths = sorted(args.dir.glob("*.jinja"))
    if not paths:
        sys.exit(f"no *.jinja files in {args.dir}")
    cases = contexts()
    agree_cases = total_cases = identical_templates = 0
    for path in paths:
        source = path.read_text(encoding="utf-8")
        lines, agree = [], 0
        for name, ctx in cases.items():
            theirs, their_error = render_jinja2(env, source, ctx)
            ours, our_error = render_tandem(args.tandem, path, ctx)
            if theirs is not None and ours == theirs:
                agree += 1
                if args.verbose:
                    lines.append(f"  {name}: identical ({len(ours)} bytes)")
            elif theirs is None and ours is None:
                agree += 1
                if args.verbose:
                    lines.append(f"  {name}: both refuse (jinja2: {their_error} | ours: "
                                 f"{our_error})")
            elif theirs is None:
                lines.append(f"  {name}: jinja2 refuses ({their_error}), ours renders")
            elif ours is None:
                lines.append(f"  {name}: ours refuses ({our_error}), jinja2 renders")
            else:
                at = first_difference(ours, theirs)
                lines.append(f"  {name}: differs at byte {at}: ours {snippet(ours, at)!r} vs "
                             f"jinja2 {snippet(theirs, at)!r}")
        total_cases += len(cases)
        agree_cases += agree
        identical_templates += agree == len(cases)
        print(f"{path.name}: {agree}/{len(cases)} agree")
        for line in lines:
            print(line)
    print(f"\njinja2 {jinja2.__version__}: {identical_templates}/{len(paths)} templates agree "
          f"on every context; {agree_cases}/{total_cases} cases agree "
          f"({len(cases)} contexts each)")
    return 0 if agree_cases == total_cases else 1


if __name__ == "__main__":
    sys.exit(main())
