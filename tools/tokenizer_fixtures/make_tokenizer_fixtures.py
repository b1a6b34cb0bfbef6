#!/usr/bin/env python3
"""Builds the tiny tokenizer checkpoints and the expected-ids fixtures in tests/data/tokenizers.

Developer tool; CI never runs it. See README.md next to this file for the environment.
Everything is deterministic: the same package versions give byte-identical outputs.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

import sentencepiece as spm
import tokenizers
from tokenizers import Tokenizer

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "data", "tokenizers")

# Debian's /usr/share/common-licenses (package base-files). The FSF licence texts allow verbatim
# copying; only the trained model, never the text, lands in the repo.
CORPUS_FILES = ["GPL-3", "GPL-2", "LGPL-2.1", "GFDL-1.3", "Apache-2.0", "MPL-2.0", "Artistic"]
CORPUS_DIR = "/usr/share/common-licenses"

PAD, BOS, EOS, UNK = "<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|unk|>"
USER_SPECIALS = ["<|im_start|>", "<|im_end|>"]
SPECIAL_STRINGS = [PAD, BOS, EOS, UNK] + USER_SPECIALS

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def read_corpus():
    lines = []
    for name in CORPUS_FILES:
        with open(os.path.join(CORPUS_DIR, name), encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.strip():
                    lines.append(line)
    return lines


def train_spm(workdir, lines):
    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    prefix = os.path.join(workdir, "tiny")
    # Llama/Jamba-style options: identity normalisation, no whitespace squashing, dummy prefix,
    # digits split, byte fallback. These make the HF tokenizer.json conversion exact.
    spm.SentencePieceTrainer.train(
        input=corpus,
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=1024,
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        normalization_rule_name="identity",
        pad_id=0,
        pad_piece=PAD,
        bos_id=1,
        bos_piece=BOS,
        eos_id=2,
        eos_piece=EOS,
        unk_id=3,
        unk_piece=UNK,
        user_defined_symbols=USER_SPECIALS,
        num_threads=1,
        shuffle_input_sentence=False,
        input_sentence_size=0,
        max_sentence_length=100000,
        minloglevel=2,
    )
    return prefix + ".model"


def tokenizer_config(legacy):
    added = {}
    for i, tok in enumerate([PAD, BOS, EOS, UNK]):
        added[str(i)] = {"content": tok, "lstrip": False, "rstrip": False, "normalized": False,
                         "single_word": False, "special": True}
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "legacy": legacy,
        "model_max_length": 4096,
        "tokenizer_class": "LlamaTokenizer",
    }


def convert_to_hf(model_path, sp):
    """tokenizer.json the way transformers' LlamaTokenizer(Fast) builds it from a .model."""
    from transformers.convert_slow_tokenizer import SentencePieceExtractor
    from transformers.tokenization_utils_base import generate_merges
    from tokenizers import AddedToken, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    ext = SentencePieceExtractor(model_path)
    vocab = {p.piece: i for i, p in enumerate(ext.proto.pieces)}
    merges = generate_merges(vocab, [(p.piece, p.score) for p in ext.proto.pieces])
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=UNK, fuse_unk=True,
                        byte_fallback=True, dropout=None))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(content=" ", left=1)])
    # Control pieces are special added tokens; user-defined pieces are added tokens too
    # (special, as chat markers usually are in shipped checkpoints).
    added = []
    for i, p in enumerate(ext.proto.pieces):
        if p.type in (2, 3, 4):  # UNKNOWN, CONTROL, USER_DEFINED
            added.append(AddedToken(p.piece, normalized=False, special=True))
    tok.add_special_tokens(added)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS}:0 $A:0", pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1", special_tokens=[(BOS, 1)])
    return json.loads(tok.to_str())


def make_legacy(hf):
    """The pre-Metaspace Llama conversion: Prepend+Replace normalizer, no pre-tokenizer.

    Also writes merges in the older "a b" string form so both merge encodings are covered."""
    hf = json.loads(json.dumps(hf))
    hf["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    hf["pre_tokenizer"] = None
    merges = hf["model"]["merges"]
    assert all(" " not in a and " " not in b for a, b in merges)
    hf["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return hf


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def write_checkpoints():
    lines = read_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        model = train_spm(tmp, lines)
        d = os.path.join(OUT, "tiny-spm")
        os.makedirs(d, exist_ok=True)
        shutil.copy(model, os.path.join(d, "tokenizer.model"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(OUT, "tiny-spm", "tokenizer.model"))
    hf = convert_to_hf(os.path.join(OUT, "tiny-spm", "tokenizer.model"), sp)
    write_json(os.path.join(OUT, "tiny-spm", "tokenizer.json"), hf)
    write_json(os.path.join(OUT, "tiny-spm", "tokenizer_config.json"), tokenizer_config(False))
    d = os.path.join(OUT, "tiny-spm-legacy")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "tokenizer.json"), make_legacy(hf))
    write_json(os.path.join(d, "tokenizer_config.json"), tokenizer_config(True))
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoints-only", action="store_true")
    args = ap.parse_args()
    lines = write_checkpoints()
