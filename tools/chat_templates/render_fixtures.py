#!/usr/bin/env python3
"""Renders the chat-template fixture corpus with Python's jinja2, configured exactly as
transformers' _compile_jinja_template does, and writes the expected outputs that the C++
test (tests/server/chat_template_fixture_test.cc) compares byte for byte.

    python3 tools/chat_templates/render_fixtures.py

Inputs:  tests/data/chat_templates/templates/*.jinja, tests/data/chat_templates/contexts/*.json
Output:  tests/data/chat_templates/expected/<template>.json
         {"<context>": {"output": "..."} | {"error": "...", "raised": true|false}}
         tests/data/chat_templates/expected/invalid.json: templates jinja2 refuses

Every template is rendered with every context, so a template's error paths (raise_exception
on a bad role order, undefined values) are fixtures too. Needs only python3-jinja2 (3.1.x).
"""
import json
import pathlib
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "chat_templates"


class GenerationTag(Extension):
    """transformers' AssistantTracker without the tracking: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    # Mirrors transformers.utils.chat_template_utils._compile_jinja_template.
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# Templates jinja2 refuses (at compile or render time with an empty context); the C++
# engine must refuse them too, with a line number.
INVALID = [
    "{% if x %}no endif",
    "{% for x in y %}no endfor",
    "{% endif %}",
    "{% if x %}{% endfor %}",
    "{{ 'unterminated }}",
    "{{ x + }}",
    "{{ }}",
    "{% set %}",
    "{% for in y %}{% endfor %}",
    "{% for x y %}{% endfor %}",
    "{% macro m( %}{% endmacro %}",
    "{% macro m(a=1, b) %}{% endmacro %}",
    "{{ f(a=1, 2) }}",
    "{{ x | }}",
    "{{ [1, 2 }}",
    "{{ {'a' 1} }}",
    "{% break %}",
    "{% unknown_tag %}",
    "{# unterminated comment",
    "{{ 1 }",
    "{% if x %}{% else %}{% else %}{% endif %}",
    "line\n{{ 'a' ~ }}",
    "{{ x is }}",
    "{{ x.1a }}",
    "{{ a.b.c }}",
    "{{ undefined_fn() }}",
    "{{ 1 | no_such_filter }}",
    "{{ 1 is no_such_test }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ none.attr.deeper }}",
    "{{ [1, 2] | join(1) | int + 'x' }}",
    "{{ raise_exception('custom message') }}",
    "{% for x in 5 %}{% endfor %}",
    "{% for x in none %}{% endfor %}",
    "{{ {}|tojson(indent=none) ~ (x|tojson) }}",
    "{{ 'abc'[::0] }}",
    "{{ 1 < 'a' }}",
    "{{ -'a' }}",
    "{{ 'abc'.nosuchmethod() }}",
    "{{ {[1]: 2} }}",
    "{{ {(1, 2): 'a'} | tojson }}",
    "{{ {1: 'a', 'b': 2} | tojson(sort_keys=true) }}",
    "{{ [1, 2] | select | length }}",
    "{{ ([1, 2] | select) | last }}",
    "{{ [1, 2] | select | tojson }}",
    "{{ 5 | select | list }}",
    "{{ '{}'.format() }}",
    "{{ '{:d}'.format('a') }}",
    "{{ '{'.format(1) }}",
    "{{ '{0}{}'.format(1, 2) }}",
    "{{ '{:s}'.format(none) }}",
    "{{ '%d' % 'x' }}",
    "{{ '%s %s' % ('a',) }}",
    "{{ '%s' % ('a', 'b') }}",
    "{{ '%s' | format('a', 'b') }}",
    "{{ '%q' % 1 }}",
    "{{ ('<b>' | safe) + 1 }}",
    "{% macro m(a) %}{% endmacro %}{{ m(*1) }}",
    "{{ f(**x, y) }}",
]


def render_invalid(env):
    results = []
    for source in INVALID:
        try:
            env.from_string(source).render()
        except Exception as e:  # noqa: BLE001 - any refusal is what we record
            results.append({"template": source, "error": f"{type(e).__name__}: {e}"})
            continue
        sys.exit(f"jinja2 accepted a template listed as invalid: {source!r}")
    (ROOT / "expected" / "invalid.json").write_text(
        json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main():
    env = make_environment()
    contexts = {}
    for path in sorted((ROOT / "contexts").glob("*.json")):
        contexts[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    out_dir = ROOT / "expected"
    out_dir.mkdir(exist_ok=True)
    total = 0
    for path in sorted((ROOT / "templates").glob("*.jinja")):
        try:
            template = env.from_string(path.read_text(encoding="utf-8"))
        except jinja2.exceptions.TemplateSyntaxError as e:
            sys.exit(f"{path.name}: {e} (line {e.lineno})")
        results = {}
        for name, ctx in contexts.items():
            try:
                results[name] = {"output": template.render(**ctx)}
            except jinja2.exceptions.TemplateError as e:
                # Exactly TemplateError means raise_exception; subclasses are jinja2's own.
                results[name] = {"error": str(e), "raised": type(e) is jinja2.exceptions.TemplateError}
            except Exception as e:  # TypeError etc. from Python operators
                results[name] = {"error": f"{type(e).__name__}: {e}", "raised": False}
            total += 1
        (out_dir / f"{path.stem}.json").write_text(
            json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    render_invalid(env)
    print(f"jinja2 {jinja2.__version__}: wrote {total} renderings and {len(INVALID)} refusals "
          f"to {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
