#!/usr/bin/env python3
"""Builds the byte-level BPE tokenizer fixtures under tests/data/tokenizers/:

- tiny-bytelevel-gpt2/tokenizer.json: GPT-2's pipeline (GPT-NeoX's too, less its NFC
  normalizer): a ByteLevel pre-tokenizer splitting with GPT-2's regex, ByteLevel decoder and
  post-processor, one special token.
- tiny-bytelevel-llama3/tokenizer.json: Llama 3's and Granite 4's pipeline: Split by the
  cl100k-style regex (digits in runs of up to 3), ByteLevel without its own regex,
  ignore_merges, a BOS template, role markers as special tokens.
- tiny-bytelevel-qwen/tokenizer.json: Qwen2's regex (single digits) written as Removed +
  invert, and a ByteLevel pre-tokenizer that adds a prefix space to every piece.
- bytelevel-fixtures.jsonl: for the test strings of make_tokenizer_fixtures.py (plus role-marker
  chats), each tokenizer's ids with and without special tokens and its decodes; then random id
  sequences (partial and invalid UTF-8 among them) with their decodes.

Each tokenizer is a 1024-token BPE trained by `tokenizers` itself on the licence texts
make_tokenizer_fixtures.py reads. Same venv as that script (README.md); deterministic.
"""

import json
import os
import random

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from make_tokenizer_fixtures import OUT, dump_jsonl, make_strings, read_corpus, write_json

GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")

ROLE_CHATS = [
    "<|start_of_role|>user<|end_of_role|>What is 2+2?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>4",
    "<|begin_of_text|><|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>",
    "<|im_start|>user\nIt's 12345 o'clock, isn'ſt it?<|im_end|>\n",
    "x<|end_of_text|>y", " <|start_of_role|> ", "<|end_of_role|><|end_of_role|>",
    "I'M SURE YOU'LL SEE THEY'RE HERE, WE'VE GOT IT'S 'D",
    "1234567 12 3\u0663\u0664\u0665\u0666 \u2167\u2168 \u00bd\u00bd",
    "a\r\n\r\nb  \n\n  c\t\n\t d \u3000\u3000e",
]

TOKENIZERS = {
    "gpt2": dict(
        dir="tiny-bytelevel-gpt2",
        pre=pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        specials=["<|endoftext|>"],
        ignore_merges=False,
        post=processors.ByteLevel(trim_offsets=False),
    ),
    "llama3": dict(
        dir="tiny-bytelevel-llama3",
        pre=pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
        specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"],
        ignore_merges=True,
        post=processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)]
        ),
    ),
    "qwen": dict(
        dir="tiny-bytelevel-qwen",
        pre=pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN_REGEX), behavior="removed", invert=True),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
            ]
        ),
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        ignore_merges=False,
        post=processors.ByteLevel(trim_offsets=False),
    ),
}


def train(spec, lines):
    tok = Tokenizer(models.BPE(ignore_merges=spec["ignore_merges"]))
    tok.pre_tokenizer = spec["pre"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=spec["specials"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = spec["post"]
    return tok


def random_ids(rng, vocab, specials, n):
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(rng.randint(0, 20)):
            r = rng.random()
            if r < 0.1:
                seq.append(rng.randrange(specials))
            elif r < 0.45:
                seq.append(specials + rng.randrange(256))  # single bytes: partial UTF-8
            else:
                seq.append(rng.randrange(vocab))
        seqs.append(seq)
    return seqs


def main():
    lines = read_corpus()
    toks = {}
    for name, spec in TOKENIZERS.items():
        tok = train(spec, lines)
        d = os.path.join(OUT, spec["dir"])
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        tok.save(path)
        # Re-read what was written, so the fixtures are what a loader of the file gets.
        toks[name] = Tokenizer.from_file(path)
        with open(path, encoding="utf-8") as f:
            write_json(path, json.load(f))
    rows = []
    for text in make_strings(lines, 3000) + ROLE_CHATS:
        row = {"text": text}
        for name, tok in toks.items():
            ids = tok.encode(text, add_special_tokens=False).ids
            row[name] = ids
            special = tok.encode(text, add_special_tokens=True).ids
            if special != ids:
                row[name + "_sp"] = special
            dec = tok.decode(ids, skip_special_tokens=False)
            if dec != text:
                row[name + "_dec"] = dec
            skip = tok.decode(ids, skip_special_tokens=True)
            if skip != dec:
                row[name + "_skip"] = skip
        rows.append(row)
    rng = random.Random(11)
    for name, tok in toks.items():
        specials = len(TOKENIZERS[name]["specials"])
        for seq in random_ids(rng, tok.get_vocab_size(), specials, 150):
            rows.append(
                {
                    "ids": seq,
                    "tokenizer": name,
                    "dec": tok.decode(seq, skip_special_tokens=False),
                    "skip": tok.decode(seq, skip_special_tokens=True),
                }
            )
    dump_jsonl(os.path.join(OUT, "bytelevel-fixtures.jsonl"), rows)
    print(f"{len(rows)} rows; tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
