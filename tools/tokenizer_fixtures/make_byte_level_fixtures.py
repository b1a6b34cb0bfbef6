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
- tiny-bytelevel-neox/tokenizer.json: GPT-NeoX's (state-spaces' Mamba-2 checkpoints): an NFC
  normalizer before GPT-2's pipeline, and whitespace runs as normalized added tokens.
- bytelevel-fixtures.jsonl: for the test strings of make_tokenizer_fixtures.py (plus role-marker
  chats and Unicode normalization cases), each tokenizer's ids with and without special tokens
  and its decodes, and the text's NFC form where it differs; then random id sequences (partial
  and invalid UTF-8 among them) with their decodes.

Each tokenizer is a 1024-token BPE trained by `tokenizers` itself on the licence texts
make_tokenizer_fixtures.py reads. Same venv as that script (README.md); deterministic.
"""

import json
import os
import random

import tokenizers
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

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

# Where NFC does something: decomposed and out-of-order marks, singletons, composition
# exclusions, Hangul jamo, and marks newer than the tokenizers library's Unicode data.
NFC_CASES = [
    "e\u0301", "E\u0301\u0327", "a\u0327\u0301", "\u0344", "\u212B", "\u2126", "\uF900", "\u0958",
    "\u1E9B\u0323", "\u1100\u1161\u11A8", "\uAC00\u11A8", "\u1100\u1161 \u1100", "o\u0308\u0304",
    "\u00F6\u0304", "a\u0898\u0301", "\u0D4A", "\u0D46\u0D3E", "\u0B47\u0B3E", "\u1026\u102E",
    "q\u0307\u0323", "\u00C5\u0301x", "\u0301\u0301a", "\u0F73", "\U0001D15E", "\u2ADC", "\u05D9\u05B4",
]


def nfc_strings(rng, n):
    """Random letters and marks, so that reordering and (blocked) composition meet."""
    bases = "aeiouAEOnNcCsSzZ\u0391\u03b1\u0415\u0435\u05d0\u0627\u0915\u1100\u1161\u11a8\uac00 "
    marks = ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u0323", "\u0327", "\u0328", "\u0331",
             "\u0345", "\u05b4", "\u093c", "\u094d", "\u0334", "\u0898", "\u1ab0", "\u3099", "\u0f71"]
    out = []
    for _ in range(n):
        s = ""
        for _ in range(rng.randint(1, 8)):
            s += rng.choice(bases) if rng.random() < 0.45 else rng.choice(marks)
        out.append(s)
    return out


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
    "neox": dict(
        dir="tiny-bytelevel-neox",
        normalizer=normalizers.NFC(),
        pre=pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        specials=["<|endoftext|>", "<|padding|>"],
        # GPT-NeoX also lists whitespace runs as added tokens matched in normalized text.
        added=[AddedToken("   ", normalized=True), AddedToken("\t\t", normalized=True)],
        ignore_merges=False,
        post=processors.ByteLevel(trim_offsets=False),
    ),
}


def train(spec, lines):
    tok = Tokenizer(models.BPE(ignore_merges=spec["ignore_merges"]))
    if "normalizer" in spec:
        tok.normalizer = spec["normalizer"]
    tok.pre_tokenizer = spec["pre"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=spec["specials"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    if "added" in spec:
        tok.add_tokens(spec["added"])
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
    nfc = normalizers.NFC()
    rng = random.Random(23)
    for text in make_strings(lines, 3000) + ROLE_CHATS + NFC_CASES + nfc_strings(rng, 400):
        row = {"text": text}
        if nfc.normalize_str(text) != text:
            row["nfc"] = nfc.normalize_str(text)
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
