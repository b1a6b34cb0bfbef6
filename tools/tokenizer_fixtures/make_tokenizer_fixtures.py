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
    # Relative paths: the trainer records them in the model, which must not vary between runs.
    os.chdir(workdir)
    corpus = "corpus.txt"
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    prefix = "tiny"
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
    for i, tok in enumerate(SPECIAL_STRINGS):
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


def make_variant(hf):
    """Exercises the options the Llama conversions leave off: Metaspace prepend_scheme "always"
    with split, a Metaspace decoder, lstrip/rstrip special tokens, a normalized added token and a
    single_word added token (both beyond the model's vocabulary)."""
    hf = json.loads(json.dumps(hf))
    hf["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                           "split": True}
    hf["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}]}
    for t in hf["added_tokens"]:
        if t["content"] == "<|im_start|>":
            t["rstrip"] = True
        if t["content"] == "<|im_end|>":
            t["lstrip"] = True
    base = dict(single_word=False, lstrip=False, rstrip=False)
    hf["added_tokens"].append(dict(base, id=1024, content="<tool>", normalized=True, special=False))
    hf["added_tokens"].append(dict(base, id=1025, content="word", normalized=False, special=False,
                                   single_word=True))
    return hf


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def write_checkpoints():
    lines = read_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        model = os.path.join(tmp, train_spm(tmp, lines))
        os.chdir(cwd)
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
    d = os.path.join(OUT, "tiny-spm-variants")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "tokenizer.json"), make_variant(hf))
    return lines


WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \t ", " \n ", "\n  ",
              "\u00a0", "\u3000", "\u2003", "\u200b", "\ufeff", "\x0b", "\x0c"]
PUNCT = list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`") + ["...", "--", "->", "<|", "|>", "<0x41>", "▁", "▁▁", "\u2014"]
WORDS_INTL = ["café", "naïve", "résumé", "Straße", "façade", "e\u0301", "a\u0308o\u0308", "Ångström", "Tiếng Việt",
              "über", "ﬁnance", "Ⅻ", "½", "²", "ｆｕｌｌｗｉｄｔｈ", "Привет", "мир", "Καλημέρα", "שלום", "مرحبا",
              "नमस्ते", "สวัสดี", "ქართული", "Ελλάδα", "İstanbul", "ǅ", "ß", "ŉ"]
CJK = ["中文", "你好，世界", "日本語", "こんにちは", "カタカナ", "한국어", "안녕하세요", "漢字", "𠀋", "〜", "「引用」"]
EMOJI = ["😀", "👍", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "❤️", "✨", "🦀", "🤖", "☃", "©", "™", "€", "∑", "√", "∞"]
SPECIAL_LIKE = ["<|im_start", "im_end|>", "<|endoftext", "<|im_start|><|im_end|>", "<|IM_START|>", "< |pad|>",
                "<tool>", "word", "words", "sword", "word_", "<tool"]


def random_unicode(rng):
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x2000, 0x206F), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
              (0xAC00, 0xD7A3), (0xE000, 0xE0FF), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF),
              (0x1, 0x1F)]
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def make_strings(corpus_lines, n, seed=20261122):
    rng = random.Random(seed)
    words = sorted({w for line in corpus_lines for w in line.split()})
    out = ["", " ", "  ", "\n", "\t", "a", "▁", " a", "a ", "Hello world", "hello  world", "  leading", "trailing  ",
           "\n\nnewlines\n", "tab\tseparated\tvalues", "0", "42", "3.14159", "1,000,000", "2026-11-22",
           "<0xE4>", "<0xFF><0x00>"]
    out += SPECIAL_STRINGS + [s + "x" for s in SPECIAL_STRINGS] + ["x" + s for s in SPECIAL_STRINGS]
    out += [" " + s + " " for s in SPECIAL_STRINGS] + SPECIAL_LIKE
    out += ["<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
            "<|startoftext|><|im_start|>system\nBe brief.<|im_end|>", "<|endoftext|><|endoftext|>",
            "text<|pad|><|pad|><|pad|>"]
    out += WORDS_INTL + CJK + EMOJI + WHITESPACE
    # Word boundaries around the single_word token of tiny-spm-variants.
    out += ["word", "word²", "½word", "word\u0004a", "\ue094word", "𡎯word", "éword", "word中", "word😀",
            "—word", "word.", "aword", "word_", "❤\ufe0fword", "word\u200d", "Ⅻword", "①word", "\u00adword"]
    # Whole corpus lines (as the model saw them) and a few long paragraphs.
    out += rng.sample(corpus_lines, 300)
    for _ in range(12):
        start = rng.randrange(len(corpus_lines) - 40)
        out.append("\n".join(corpus_lines[start:start + rng.randint(10, 40)]))
    generators = [
        lambda: rng.choice(words),
        lambda: rng.choice(words).upper(),
        lambda: rng.choice(WHITESPACE),
        lambda: rng.choice(PUNCT),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))),
        lambda: rng.choice(WORDS_INTL),
        lambda: rng.choice(CJK),
        lambda: rng.choice(EMOJI),
        lambda: rng.choice(SPECIAL_STRINGS),
        lambda: rng.choice(SPECIAL_LIKE),
        lambda: "".join(random_unicode(rng) for _ in range(rng.randint(1, 6))),
    ]
    weights = [30, 3, 12, 8, 5, 5, 4, 4, 3, 1, 5]
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 14)):
            g = rng.choices(generators, weights)[0]
            parts.append(g())
            if rng.random() < 0.6:
                parts.append(" ")
        s = "".join(parts)
        if rng.random() < 0.15:
            s = " " + s
        if rng.random() < 0.1:
            s = s.rstrip(" ")
        out.append(s)
    return out[:n]


def random_id_sequences(rng, vocab_size, n):
    """Arbitrary id sequences for decode-only checks (partial UTF-8 from byte tokens, specials)."""
    seqs = []
    for _ in range(n):
        k = rng.randint(0, 20)
        seq = []
        for _ in range(k):
            r = rng.random()
            if r < 0.35:
                seq.append(rng.randint(6, 6 + 255))  # byte-fallback pieces
            elif r < 0.45:
                seq.append(rng.randint(0, 5))  # specials
            else:
                seq.append(rng.randint(0, vocab_size - 1))
        seqs.append(seq)
    return seqs


def dump_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_fixtures(corpus_lines, n):
    """One JSONL file; each row is either an encode case or a decode-only case.

    Encode rows: text; sp (sentencepiece ids) and sp_dec (its decode, when it differs from text);
    hf (tiny-spm/tokenizer.json ids without special tokens, when they differ from sp), hf_dec
    (decode keeping specials, when it differs from text); hf_sp / hf_skip only where the
    add_special_tokens=True ids differ from [BOS]+hf / the skip_special_tokens decode differs;
    then legacy* (tiny-spm-legacy) and var* (tiny-spm-variants) only where they differ from the
    hf value (null: "the default" where hf's is not).
    Decode rows: ids, then per tokenizer the decode keeping and skipping special tokens.
    SentencePiece "special" ids are the pieces of SPECIAL_STRINGS; skipping drops them before
    sentencepiece's own decode (which renders control pieces as nothing anyway).
    """
    strings = make_strings(corpus_lines, n)
    rng = random.Random(7)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(OUT, "tiny-spm", "tokenizer.model"))
    special = {i for i in range(sp.get_piece_size()) if sp.id_to_piece(i) in SPECIAL_STRINGS}
    hf = Tokenizer.from_file(os.path.join(OUT, "tiny-spm", "tokenizer.json"))
    legacy = Tokenizer.from_file(os.path.join(OUT, "tiny-spm-legacy", "tokenizer.json"))
    variant = Tokenizer.from_file(os.path.join(OUT, "tiny-spm-variants", "tokenizer.json"))
    bos = sp.bos_id()

    def hf_fields(tok, s):
        ids = tok.encode(s, add_special_tokens=False).ids
        with_special = tok.encode(s, add_special_tokens=True).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        skip = tok.decode(ids, skip_special_tokens=True)
        return ids, (None if with_special == [bos] + ids else with_special), dec, (None if skip == dec else skip)

    rows = []
    for s in strings:
        ids = sp.encode(s)
        row = {"text": s, "sp": ids}
        if sp.decode(ids) != s:
            row["sp_dec"] = sp.decode(ids)
        h = hf_fields(hf, s)
        if h[0] != ids:
            row["hf"] = h[0]
        if h[1] is not None:
            row["hf_sp"] = h[1]
        if h[2] != s:
            row["hf_dec"] = h[2]
        if h[3] is not None:
            row["hf_skip"] = h[3]
        for prefix, tok in [("legacy", legacy), ("var", variant)]:
            g = hf_fields(tok, s)
            for key, a, b in zip(["", "_sp", "_dec", "_skip"], g, h):
                if a != b:
                    row[prefix + key] = a
        rows.append(row)
    for seq in random_id_sequences(rng, sp.get_piece_size(), 400):
        rows.append({"ids": seq,
                     "sp_dec": sp.decode(seq), "sp_skip": sp.decode([i for i in seq if i not in special]),
                     "hf_dec": hf.decode(seq, skip_special_tokens=False),
                     "hf_skip": hf.decode(seq, skip_special_tokens=True),
                     "legacy_dec": legacy.decode(seq, skip_special_tokens=False),
                     "legacy_skip": legacy.decode(seq, skip_special_tokens=True),
                     "var_dec": variant.decode(seq, skip_special_tokens=False),
                     "var_skip": variant.decode(seq, skip_special_tokens=True)})
    dump_jsonl(os.path.join(OUT, "tiny-spm-fixtures.jsonl"), rows)
    with open(os.path.join(OUT, "VERSIONS.txt"), "w") as f:
        f.write(f"sentencepiece {spm.__version__}\ntokenizers {tokenizers.__version__}\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000, help="number of test strings")
    ap.add_argument("--fixtures-only", action="store_true", help="keep the checkpoints, redo fixtures")
    args = ap.parse_args()
    lines = read_corpus() if args.fixtures_only else write_checkpoints()
    write_fixtures(lines, args.count)
