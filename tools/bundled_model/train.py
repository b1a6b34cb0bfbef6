#!/usr/bin/env python3
"""Trains tandem's bundled model, bundled/tandem-tiny-chat: a small JambaForCausalLM on Jane
Austen's six novels, with its own SentencePiece tokenizer and a ChatML-style chat template.

Steps (all deterministic for a given seed, thread count and torch build):
  1. corpus   the novels from Debian's r-cran-janeaustenr package (an R lazy-load database,
              read here by a small R-serialization reader; R itself is not needed)
  2. tokenizer  SentencePiece unigram, byte fallback, <|im_start|> <|im_end|> and "\n" as
              single pieces
  3. data     paragraphs grouped into documents; some become one user/assistant chat turn
  4. model    JambaForCausalLM (Mamba-1 + attention, dense MLPs), trained with AdamW
  5. export   config.json, model.safetensors, generation_config.json, tokenizer files

See README.md beside this file for the commands and the measured wall time.
"""

import argparse
import glob
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey",
          "persuasion"]

# --------------------------------------------------------------------------------------------
# 1. Corpus: R's XDR serialization, just enough for a data package's character vectors.
# --------------------------------------------------------------------------------------------


class RUnserializer:
    """Reads R's binary XDR serialization (formats 2 and 3): character vectors, generic
    vectors with names, pairlists, symbols and references. Raises on anything else."""

    def __init__(self, data):
        self.buf, self.pos, self.refs = data, 0, []

    def _int(self):
        (v,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return v

    def _bytes(self, n):
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def read(self):
        if self._bytes(2) != b"X\n":
            raise ValueError("not XDR-serialized R data")
        version = self._int()
        self._int()  # writer R version
        self._int()  # minimal reader R version
        if version == 3:
            self._bytes(self._int())  # native encoding name
        return self._item()

    def _item(self):
        flags = self._int()
        kind = flags & 0xFF
        has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if kind in (254, 253, 252, 251, 250, 242, 241):  # NULL and the special environments
            return None
        if kind == 255:  # reference to an earlier symbol or environment
            index = flags >> 8
            return self.refs[(index or self._int()) - 1]
        if kind == 1:  # symbol: its name follows as a CHARSXP
            name = self._item()
            self.refs.append(name)
            return name
        if kind == 9:  # CHARSXP
            n = self._int()
            return None if n == -1 else self._bytes(n).decode("utf-8")
        if kind in (2, 6):  # pairlist / language cell: [attr] [tag] car cdr
            if has_attr:
                self._item()
            tag = self._item() if has_tag else None
            car = self._item()
            cdr = self._item()
            return [(tag, car)] + (cdr or [])
        if kind in (16, 19, 20):  # character vector, list, expression vector
            values = [self._item() for _ in range(self._int())]
        elif kind in (10, 13):  # logical, integer
            n = self._int()
            values = list(struct.unpack_from(">%di" % n, self.buf, self.pos))
            self.pos += 4 * n
        elif kind == 14:  # double
            n = self._int()
            values = list(struct.unpack_from(">%dd" % n, self.buf, self.pos))
            self.pos += 8 * n
        else:
            raise ValueError("unsupported R object type %d" % kind)
        if has_attr:
            attrs = dict(self._item())
            if kind == 19 and "names" in attrs:
                return dict(zip(attrs["names"], values))
        return values


def r_lazyload(data_dir):
    """{name: object} of an R package's lazy-load data (data/Rdata.rdx + data/Rdata.rdb)."""
    index = RUnserializer(zlib.decompress(open(os.path.join(data_dir, "Rdata.rdx"), "rb").read(),
                                          zlib.MAX_WBITS | 32)).read()
    rdb = open(os.path.join(data_dir, "Rdata.rdb"), "rb").read()
    out = {}
    for name, (offset, size) in index["variables"].items():
        blob = rdb[offset:offset + size]
        # 4-byte big-endian uncompressed length, then a zlib stream (compression type 1).
        out[name] = RUnserializer(zlib.decompress(blob[4:])).read()
    return out


def locate_janeaustenr(deb_arg, work_dir):
    """The janeaustenr package directory: installed, from --deb, or fetched with apt-get."""
    installed = "/usr/lib/R/site-library/janeaustenr"
    if not deb_arg and os.path.isdir(os.path.join(installed, "data")):
        return installed, "installed r-cran-janeaustenr"
    deb = deb_arg
    if not deb:
        found = sorted(glob.glob(os.path.join(work_dir, "r-cran-janeaustenr_*.deb")))
        if not found:
            print("fetching r-cran-janeaustenr with apt-get download ...", flush=True)
            subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=work_dir, check=True)
            found = sorted(glob.glob(os.path.join(work_dir, "r-cran-janeaustenr_*.deb")))
        deb = found[-1]
    target = os.path.join(work_dir, "janeaustenr-deb")
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", deb, target], check=True)
    sha = hashlib.sha256(open(deb, "rb").read()).hexdigest()
    return (os.path.join(target, "usr/lib/R/site-library/janeaustenr"),
            "%s (sha256 %s)" % (os.path.basename(deb), sha))


HEADING = re.compile(r"^(chapter|volume|the end|finis|end of)\b", re.IGNORECASE)


def novel_paragraphs(lines):
    """Lines of one novel -> cleaned prose paragraphs (title page and headings dropped)."""
    paragraphs, current = [], []
    for line in lines + [""]:
        line = (line or "").strip()
        if line:
            current.append(line)
            continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
    # The story starts at the first chapter heading.
    start = next(i for i, p in enumerate(paragraphs) if HEADING.match(p))
    out = []
    for p in paragraphs[start:]:
        p = p.replace("_", "")  # Gutenberg's _italics_
        p = re.sub(r"\s+", " ", p).strip()
        if not p or HEADING.match(p) or not re.search(r"[a-z]", p):
            continue  # headings, all-caps lines, numbers
        out.append(p)
    return out


# --------------------------------------------------------------------------------------------
# 3. Documents: runs of paragraphs, some framed as one chat turn.
# --------------------------------------------------------------------------------------------

CHARACTERS = [
    "Elizabeth", "Darcy", "Jane", "Bingley", "Wickham", "Lydia", "Collins", "Charlotte",
    "Emma", "Harriet", "Knightley", "Elton", "Weston", "Frank", "Jane Fairfax", "Miss Bates",
    "Fanny", "Edmund", "Crawford", "Maria", "Julia", "Mrs. Norris", "Sir Thomas",
    "Catherine", "Tilney", "Thorpe", "Isabella", "Eleanor",
    "Anne", "Wentworth", "Sir Walter", "Elizabeth Elliot", "Lady Russell", "Louisa", "Mary",
    "Elinor", "Marianne", "Willoughby", "Colonel Brandon", "Edward", "Lucy", "Mrs. Jennings",
]
NAMED_PROMPTS = [
    "Tell me a story about {name}.", "What happened to {name}?", "Tell me about {name}.",
    "Write a short scene with {name}.", "What did {name} say?", "Tell me more about {name}.",
]
PLAIN_PROMPTS = [
    "Tell me a story.", "Write a paragraph in the style of Jane Austen.", "Continue the story.",
    "Tell me something.", "Write a short scene.", "What happened next?",
]


def chat_prompt(text, rng):
    names = [n for n in CHARACTERS if re.search(r"\b%s\b" % re.escape(n), text)]
    if names and rng.random() < 0.8:
        return rng.choice(NAMED_PROMPTS).format(name=rng.choice(names))
    return rng.choice(PLAIN_PROMPTS)


def render_chat(user, assistant):
    return "%suser\n%s%s\n%sassistant\n%s%s\n" % (IM_START, user, IM_END, IM_START, assistant,
                                                  IM_END)


def build_documents(novels, rng, chat_fraction, val_every):
    """-> (train, val) lists of (kind, text). Documents are runs of consecutive paragraphs of
    300-1100 characters; every val_every-th one is held out."""
    train, val = [], []
    for name in NOVELS:
        paras, i = novels[name], 0
        while i < len(paras):
            target, run = rng.randint(300, 1100), []
            while i < len(paras) and (not run or sum(len(p) for p in run) < target):
                run.append(paras[i])
                i += 1
            text = "\n".join(run)
            if rng.random() < chat_fraction:
                doc = ("chat", render_chat(chat_prompt(text, rng), text))
            else:
                doc = ("plain", text)
            (val if (len(train) + len(val)) % val_every == val_every - 1 else train).append(doc)
    return train, val


def encode_documents(sp, docs):
    out = []
    for kind, text in docs:
        ids = sp.encode(text)
        # Plain text starts with <s> as `tandem generate --prompt` sends it; a chat starts
        # with <|im_start|> as the rendered template does (it holds no bos_token).
        out.append(([BOS_ID] if kind == "plain" else []) + ids + [EOS_ID])
    return out


# --------------------------------------------------------------------------------------------
# 4. Training: a selective-scan autograd function for transformers' Jamba mixer.
# --------------------------------------------------------------------------------------------


def install_training_scan(torch):
    """transformers 4.57.1's Jamba mixer (without mamba_ssm) runs the selective scan as a
    Python loop under autograd; its backward materialises a full-size gradient per time step
    and takes minutes per batch on a CPU. This replaces the mixer's forward in training mode
    (no cache) by the same arithmetic with a hand-written backward for the recurrence
    h_t = exp(dt_t A) h_{t-1} + dt_t u_t B_t. Inference and export use transformers' own code.
    Returns the original method."""
    from transformers.models.jamba import modeling_jamba

    class SelectiveScan(torch.autograd.Function):
        """y_t = C_t . h_t with h_t = exp(dt_t A) * h_{t-1} + dt_t u_t B_t, one time step at a
        time on [b, D, N] tiles. Only the states are kept for the backward; exp(dt A) and
        dt u B are recomputed per step, never stored as [T, b, D, N] tensors."""

        @staticmethod
        def forward(ctx, dt, u, A, B, C):  # dt, u: [T, b, D]; A: [D, N]; B, C: [T, b, N]
            T, b, D = dt.shape
            states = dt.new_empty(T, b, D, A.shape[1])
            y = dt.new_empty(T, b, D)
            dtu = dt * u
            h = dt.new_zeros(b, D, A.shape[1])
            for t in range(T):
                dA = torch.exp(dt[t, :, :, None] * A)
                h = torch.addcmul(dtu[t, :, :, None] * B[t, :, None, :], dA, h, out=states[t])
                torch.bmm(h, C[t, :, :, None], out=y[t, :, :, None])
            ctx.save_for_backward(dt, u, A, B, C, states)
            return y

        @staticmethod
        def backward(ctx, gy):
            dt, u, A, B, C, states = ctx.saved_tensors
            T, b, D = dt.shape
            gy = gy.contiguous()
            dtu = dt * u
            g_dt, g_dtu = torch.empty_like(dt), torch.empty_like(dt)
            g_B, g_C = torch.empty_like(B), torch.empty_like(C)
            g_A = torch.zeros_like(A)
            gh = torch.zeros_like(states[0])
            for t in range(T - 1, -1, -1):
                torch.bmm(gy[t, :, None, :], states[t], out=g_C[t, :, None, :])
                gh.addcmul_(gy[t, :, :, None], C[t, :, None, :])  # total gradient of h_t
                torch.bmm(gh, B[t, :, :, None], out=g_dtu[t, :, :, None])
                torch.bmm(dtu[t, :, None, :], gh, out=g_B[t, :, None, :])
                if t == 0:
                    g_dt[t].zero_()
                    break
                dA = torch.exp(dt[t, :, :, None] * A)
                g_dtA = gh * states[t - 1] * dA
                torch.sum(g_dtA * A, dim=-1, out=g_dt[t])
                g_A.add_((g_dtA * dt[t, :, :, None]).sum(0))
                gh.mul_(dA)
            g_dt.addcmul_(g_dtu, u)
            return g_dt, g_dtu * dt, g_A, g_B, g_C

    original = modeling_jamba.JambaMambaMixer.slow_forward

    def forward(self, input_states, cache_params=None, attention_mask=None):
        if cache_params is not None or not self.training:
            return original(self, input_states, cache_params, attention_mask)
        seq_len = input_states.shape[1]
        hidden, gate = self.in_proj(input_states).transpose(1, 2).chunk(2, dim=1)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(1)
        hidden = self.act(self.conv1d(hidden)[..., :seq_len])  # [b, D, T]
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(1)
        params = self.x_proj(hidden.transpose(1, 2))
        time_step, B, C = torch.split(
            params, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1)
        time_step = self.dt_layernorm(time_step)
        B, C = self.b_layernorm(B), self.c_layernorm(C)
        dt = torch.nn.functional.softplus(self.dt_proj(time_step))  # [b, T, D]
        A = -torch.exp(self.A_log.float())  # [D, N]
        y = SelectiveScan.apply(dt.transpose(0, 1).contiguous(),
                                hidden.permute(2, 0, 1).contiguous(), A,
                                B.transpose(0, 1).contiguous(), C.transpose(0, 1).contiguous())
        y = y.permute(1, 2, 0)  # [b, D, T]
        y = (y + hidden * self.D[None, :, None]) * self.act(gate)
        return self.out_proj(y.transpose(1, 2))

    modeling_jamba.JambaMambaMixer.slow_forward = forward
    return original


def model_config(args, vocab_size):
    from transformers import JambaConfig
    return JambaConfig(
        vocab_size=vocab_size, hidden_size=args.hidden, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, attn_layer_period=4, attn_layer_offset=2,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        num_experts=1, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
        mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=args.hidden // 16,
        mamba_conv_bias=True, mamba_proj_bias=False, use_mamba_kernels=False,
        tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=4096,
        pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, sliding_window=None,
        output_router_logits=False, attention_dropout=0.0)


def evaluate(torch, model, val_ids, seq_len, batch, device):
    model.eval()
    stream = np.concatenate([np.asarray(d, dtype=np.int64) for d in val_ids])
    n = (len(stream) - 1) // seq_len
    losses = []
    with torch.no_grad():
        for start in range(0, n, batch):
            rows = [stream[j * seq_len:(j + 1) * seq_len + 1] for j in range(start, min(n, start + batch))]
            x = torch.tensor(np.stack(rows), device=device)
            out = model(input_ids=x[:, :-1], use_cache=False)
            losses.append(torch.nn.functional.cross_entropy(
                out.logits.float().reshape(-1, out.logits.shape[-1]), x[:, 1:].reshape(-1)).item())
    model.train()
    return float(np.mean(losses))


# --------------------------------------------------------------------------------------------
# 5. Export
# --------------------------------------------------------------------------------------------


def write_tokenizer_files(out_dir, sp_model_path, sp):
    shutil.copy(sp_model_path, os.path.join(out_dir, "tokenizer.model"))
    added = {}
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if i in (PAD_ID, BOS_ID, EOS_ID, UNK_ID) or piece in (IM_START, IM_END):
            added[str(i)] = {"content": piece, "lstrip": False, "rstrip": False,
                             "normalized": False, "single_word": False, "special": True}
    config = {
        "tokenizer_class": "LlamaTokenizer",
        "add_bos_token": True, "add_eos_token": False, "legacy": True,
        "add_prefix_space": None, "sp_model_kwargs": {},
        "bos_token": sp.id_to_piece(BOS_ID), "eos_token": sp.id_to_piece(EOS_ID),
        "pad_token": sp.id_to_piece(PAD_ID), "unk_token": sp.id_to_piece(UNK_ID),
        "added_tokens_decoder": added,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")
    special = {"bos_token": sp.id_to_piece(BOS_ID), "eos_token": sp.id_to_piece(EOS_ID),
               "pad_token": sp.id_to_piece(PAD_ID), "unk_token": sp.id_to_piece(UNK_ID),
               "additional_special_tokens": [IM_START, IM_END]}
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bundled/tandem-tiny-chat", help="export directory")
    ap.add_argument("--work", default="/tmp/tandem-bundled-work", help="scratch directory")
    ap.add_argument("--deb", help="r-cran-janeaustenr .deb (default: installed package, or apt-get download)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=640)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--chat-fraction", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1 is fastest on a busy 2-core machine)")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop early (and still export) after this much training time; 0 = off")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="dtype of the exported weights")
    ap.add_argument("--eval-every", type=int, default=100)
    args = ap.parse_args()

    import sentencepiece as spm
    import torch
    import transformers
    from transformers import GenerationConfig, JambaForCausalLM

    t_start = time.time()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.work, exist_ok=True)

    # 1. corpus
    pkg_dir, source = locate_janeaustenr(args.deb, args.work)
    data = r_lazyload(os.path.join(pkg_dir, "data"))
    novels = {name: novel_paragraphs(data[name]) for name in NOVELS}
    n_chars = sum(len(p) for ps in novels.values() for p in ps)
    print("corpus: %s, %d paragraphs, %d characters" % (
        source, sum(len(v) for v in novels.values()), n_chars), flush=True)

    # 3a. documents (before the tokenizer, which also sees the chat prompts)
    rng = random.Random(args.seed)
    train_docs, val_docs = build_documents(novels, rng, args.chat_fraction, val_every=50)

    # 2. tokenizer
    sp_prefix = os.path.join(args.work, "tokenizer")
    sentences = [p for name in NOVELS for p in novels[name]]
    sentences += [text.split("\n")[1].replace(IM_END, "") for kind, text in train_docs if kind == "chat"]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=sp_prefix, model_type="unigram",
        vocab_size=args.vocab, character_coverage=1.0, byte_fallback=True, split_digits=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, user_defined_symbols=[IM_START, IM_END, "\n"],
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, unk_id=UNK_ID,
        pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", unk_piece="<unk>",
        max_sentence_length=1 << 16, shuffle_input_sentence=False, num_threads=1,
        minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=sp_prefix + ".model")
    assert sp.encode(IM_START + IM_END + "\n") [-3:] == [sp.piece_to_id(IM_START), sp.piece_to_id(IM_END), sp.piece_to_id("\n")]

    # 3b. token ids
    train_ids = encode_documents(sp, train_docs)
    val_ids = encode_documents(sp, val_docs)
    n_train = sum(len(d) for d in train_ids)
    print("documents: %d train (%d tokens), %d held out (%d tokens); %.2f chars/token" % (
        len(train_ids), n_train, len(val_ids), sum(len(d) for d in val_ids),
        n_chars / (n_train + sum(len(d) for d in val_ids))), flush=True)

    # 4. model and training
    config = model_config(args, sp.get_piece_size())
    model = JambaForCausalLM(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print("model: JambaForCausalLM, %d parameters (%.2fM), device %s, %d threads" % (
        n_params, n_params / 1e6, device, args.threads), flush=True)
    install_training_scan(torch)
    model.train()

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "A_log" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "A_log" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        progress = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    data_rng = np.random.default_rng(args.seed)
    windows, stream = [], None

    def next_batch():
        nonlocal windows, stream
        if len(windows) < args.batch:  # a new epoch: documents reshuffled, windows cut anew
            order = data_rng.permutation(len(train_ids))
            stream = np.concatenate([np.asarray(train_ids[i], dtype=np.int64) for i in order])
            offset = int(data_rng.integers(0, args.seq_len))
            count = (len(stream) - offset - 1) // args.seq_len
            windows = list(offset + args.seq_len * data_rng.permutation(count))
        rows = [stream[w:w + args.seq_len + 1] for w in windows[:args.batch]]
        windows = windows[args.batch:]
        return torch.tensor(np.stack(rows), device=device)

    log = []
    t_train = time.time()
    step, loss_ema = 0, None
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        batch = next_batch()
        out = model(input_ids=batch[:, :-1], use_cache=False)
        loss = torch.nn.functional.cross_entropy(
            out.logits.float().reshape(-1, out.logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        elapsed = time.time() - t_train
        if step % 10 == 0 or step == args.steps - 1:
            print("step %5d  loss %.4f  ema %.4f  lr %.2e  %.1f s  %.0f tok/s" % (
                step, loss.item(), loss_ema, lr_at(step), elapsed,
                (step + 1) * args.batch * args.seq_len / elapsed), flush=True)
        if (step + 1) % args.eval_every == 0:
            v = evaluate(torch, model, val_ids, args.seq_len, args.batch, device)
            log.append({"step": step + 1, "train_loss_ema": loss_ema, "val_loss": v,
                        "seconds": elapsed})
            print("step %5d  held-out loss %.4f" % (step + 1, v), flush=True)
        if args.max_minutes and elapsed > args.max_minutes * 60:
            print("stopping at step %d: --max-minutes reached" % (step + 1), flush=True)
            break
    steps_done = step + 1
    train_seconds = time.time() - t_train
    val_loss = evaluate(torch, model, val_ids, args.seq_len, args.batch, device)
    print("trained %d steps, %d tokens, %.0f s; final train loss (ema) %.4f, held-out %.4f" % (
        steps_done, steps_done * args.batch * args.seq_len, train_seconds, loss_ema, val_loss),
        flush=True)

    # 5. export
    model.eval()
    os.makedirs(args.out, exist_ok=True)
    for stale in glob.glob(os.path.join(args.out, "*.safetensors")):
        os.remove(stale)
    model = model.to("cpu").to(getattr(torch, args.dtype))
    model.config.use_cache = True
    model.save_pretrained(args.out, safe_serialization=True)
    generation = GenerationConfig(bos_token_id=BOS_ID, pad_token_id=PAD_ID,
                                  eos_token_id=[EOS_ID, sp.piece_to_id(IM_END)])
    generation.save_pretrained(args.out)
    write_tokenizer_files(args.out, sp_prefix + ".model", sp)
    stats = {
        "corpus": source, "paragraphs": sum(len(v) for v in novels.values()), "characters": n_chars,
        "train_documents": len(train_ids), "train_tokens_per_epoch": n_train,
        "val_documents": len(val_ids), "parameters": n_params, "steps": steps_done,
        "batch": args.batch, "seq_len": args.seq_len,
        "tokens_seen": steps_done * args.batch * args.seq_len,
        "train_seconds": round(train_seconds), "total_seconds": round(time.time() - t_start),
        "final_train_loss_ema": round(loss_ema, 4), "final_val_loss": round(val_loss, 4),
        "device": device, "threads": args.threads, "torch": torch.__version__,
        "transformers": transformers.__version__, "args": vars(args), "eval_log": log,
    }
    with open(os.path.join(args.work, "training_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps({k: v for k, v in stats.items() if k not in ("eval_log", "args")}, indent=2))
    print("wrote %s" % args.out, flush=True)


if __name__ == "__main__":
    main()
