#!/usr/bin/env python3
"""Builds tandem's model fixtures: tiny random checkpoints and their reference outputs.

For every model in MODELS this script
  1. builds the model with transformers' own class (JambaForCausalLM, Zamba2ForCausalLM,
     Mamba2ForCausalLM) and overwrites every parameter with seeded values chosen so that no
     parameter sits at a default that would hide a wrong formula (norm weights != 1, D != 1,
     A_log / dt biases spread over slow and fast heads, non-zero conv and dt biases, non-zero
     LoRA adapters, weight scales that make every sub-layer matter);
  2. saves it with save_pretrained into tests/data/models/<name>/ and checks the files:
     reload gives bit-identical logits, nothing missing or unexpected, and (Zamba2) every
     shared block and every adapter of every hybrid position is stored;
  3. records reference outputs from the *reloaded* checkpoint, computed on CPU with transformers'
     torch paths in float64 (default; --compute-dtype float32 gives the old float32 references)
     and stored as float32 .npy: full-prefill logits [T, V] per prompt, and an 8-token greedy
     continuation where every step re-runs the full forward without any cache.

Everything is deterministic: parameter values come from numpy generators seeded per model,
prompts from one seeded generator. Run it with the pinned versions in requirements.txt
(see README.md next to this file).
"""

import argparse
import contextlib
import importlib
import hashlib
import json
import math
import os
import platform
import re
import shutil
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import (
    GenerationConfig,
    GraniteMoeHybridConfig,
    GraniteMoeHybridForCausalLM,
    JambaConfig,
    JambaForCausalLM,
    Mamba2Config,
    Mamba2ForCausalLM,
    Zamba2Config,
    Zamba2ForCausalLM,
)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS_DIR = os.path.join(REPO_ROOT, "tests", "data", "models")
REFERENCE_DIR = os.path.join(REPO_ROOT, "tests", "data", "reference")
TOKENIZER_DIR = os.path.join(REPO_ROOT, "tests", "data", "tokenizers", "tiny-spm")

VOCAB = 1024
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_PROMPT_ID = 3  # prompts never contain pad/bos/eos
GREEDY_STEPS = 8
# Max |logit| difference accepted between the prefill references and transformers' own
# token-by-token cached decode of the same prompt (float32 rounding only; logits are O(10)).
STEPWISE_TOLERANCE = 1e-3
PROMPT_SEED = 20260101
# Dtype the references are computed in (set from --compute-dtype in main()). They are always
# stored as float32 .npy files.
COMPUTE_DTYPE = torch.float64
# RoPE rotation angles of a float64 reference (zamba2-tiny is the only fixture with RoPE; set from
# --rope-angles): "float32" keeps transformers' definition, which builds inv_freq in float32 and
# rounds position * inv_freq to float32 whatever the model dtype (autocast disabled, "Force
# float32"), then takes cos/sin of those angles in float64; "exact" uses float64 inv_freq and angles.
ROPE_ANGLES = "float32"

# Prompt lengths. Mamba-2 chunk size is 32 in every fixture, so 33 crosses one chunk
# boundary, 80 spans two full chunks plus a partial one, 157 spans four plus a partial one.
FULL_PROMPTS = [1, 7, 33, 80, 157]
SHORT_PROMPTS = [1, 7, 70]
# --existing checkpoints (real vocabularies, larger .npy files): two prompts, ids from
# EXISTING_FIRST_PROMPT_ID up (the bundled model's ids 0-6 are pad/bos/eos/unk and chat markers).
EXISTING_PROMPTS = [33, 80]
EXISTING_FIRST_PROMPT_ID = 7


# --------------------------------------------------------------------------------------------
# Model definitions


def jamba_config(num_layers, proj_bias):
    return JambaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=4,
        attn_layer_offset=2,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=4,
        num_experts_per_tok=2,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=8,
        mamba_conv_bias=True,
        mamba_proj_bias=proj_bias,
        use_mamba_kernels=False,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
    )


def zamba2_config(layers_block_type, num_mem_blocks, adapters, rope, ngroups):
    return Zamba2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=len(layers_block_type),
        layers_block_type=layers_block_type,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_ngroups=ngroups,
        n_mamba_heads=8,
        chunk_size=32,
        intermediate_size=128,
        num_attention_heads=4,
        num_mem_blocks=num_mem_blocks,
        use_shared_attention_adapter=adapters,
        adapter_rank=8,
        use_mem_rope=rope,
        rope_theta=10000,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        use_mamba_kernels=False,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
    )


def mamba2_config():
    return Mamba2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=4,
        num_heads=8,
        head_dim=16,
        expand=2,
        n_groups=2,
        state_size=16,
        conv_kernel=4,
        chunk_size=32,
        residual_in_fp32=True,
        tie_word_embeddings=False,
        use_bias=False,
        use_conv_bias=True,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
    )


def granite_config(layer_types, experts, rope, ngroups, proj_bias, tied):
    """Granite-4.0-H shapes in miniature. Every multiplier is away from 1 and the attention
    scale away from 1/sqrt(head_dim), so that a loader which ignores one is caught."""
    return GraniteMoeHybridConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=experts,
        num_experts_per_tok=2,
        intermediate_size=32,
        shared_intermediate_size=48,
        hidden_act="silu",
        position_embedding_type="rope" if rope else None,
        rope_theta=10000,
        embedding_multiplier=3.0,
        residual_multiplier=0.6,
        attention_multiplier=0.125,
        logits_scaling=2.5,
        mamba_n_heads=8,
        mamba_d_head="auto",
        mamba_n_groups=ngroups,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=32,
        mamba_conv_bias=True,
        mamba_proj_bias=proj_bias,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tied,
        max_position_embeddings=4096,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
    )


MODELS = {
    "jamba-tiny": dict(
        cls=JambaForCausalLM,
        config=lambda: jamba_config(8, proj_bias=False),
        seed=101,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=FULL_PROMPTS,
        tokenizer_files=["tokenizer.model"],
    ),
    "jamba-tiny-projbias": dict(
        cls=JambaForCausalLM,
        config=lambda: jamba_config(4, proj_bias=True),
        seed=102,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=SHORT_PROMPTS,
        tokenizer_files=["tokenizer.model"],
    ),
    "zamba2-tiny": dict(
        cls=Zamba2ForCausalLM,
        config=lambda: zamba2_config(
            ["mamba", "hybrid"] * 3, num_mem_blocks=2, adapters=True, rope=True, ngroups=2
        ),
        seed=201,
        save_dtype=torch.float32,
        max_shard_size="1MB",
        prompts=FULL_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
    "zamba2-tiny-1block": dict(
        cls=Zamba2ForCausalLM,
        config=lambda: zamba2_config(
            ["mamba", "hybrid", "mamba", "hybrid"],
            num_mem_blocks=1,
            adapters=False,
            rope=False,
            ngroups=1,
        ),
        seed=202,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=SHORT_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
    "mamba2-tiny": dict(
        cls=Mamba2ForCausalLM,
        config=mamba2_config,
        seed=301,
        save_dtype=torch.bfloat16,
        max_shard_size=None,
        prompts=FULL_PROMPTS,
        tokenizer_files=["tokenizer.json"],
    ),
    "granite-tiny": dict(
        cls=GraniteMoeHybridForCausalLM,
        config=lambda: granite_config(
            ["mamba", "attention", "mamba", "mamba", "attention", "mamba"],
            experts=4,
            rope=False,
            ngroups=2,
            proj_bias=False,
            tied=True,
        ),
        seed=401,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=FULL_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
    "granite-tiny-dense": dict(
        cls=GraniteMoeHybridForCausalLM,
        config=lambda: granite_config(
            ["attention", "mamba", "mamba", "attention"],
            experts=0,
            rope=True,
            ngroups=1,
            proj_bias=True,
            tied=False,
        ),
        seed=402,
        save_dtype=torch.bfloat16,
        max_shard_size=None,
        prompts=SHORT_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
}


# --------------------------------------------------------------------------------------------
# Parameter values


def inverse_softplus(y):
    return y + np.log(-np.expm1(-y))


def parameter_values(name, shape, rng, config):
    """Returns a float64 array for parameter `name`; every parameter of every model goes here."""
    leaf = name.rsplit(".", 1)[-1]
    fan_in = shape[-1] if len(shape) >= 2 else None

    if leaf == "A_log":
        if len(shape) == 2:  # Mamba-1 (Jamba): [din, N], default log(1..N) per row
            base = np.log(np.arange(1, shape[1] + 1, dtype=np.float64))[None, :]
            return base + rng.normal(0.0, 0.3, size=shape)
        # Mamba-2: one scalar per head; spread decays from slow (A=-0.3) to fast (A=-8).
        return np.log(rng.uniform(0.3, 8.0, size=shape))
    if leaf == "D":
        return rng.normal(1.0, 0.5, size=shape)
    if leaf == "dt_bias":
        # dt = softplus(dt_raw + dt_bias): some heads well below time_step_min (1e-3) so the
        # Zamba2 dt clamp is exercised, others up to 0.2.
        dt = np.exp(rng.uniform(math.log(1e-4), math.log(0.2), size=shape))
        return inverse_softplus(dt)
    if name.endswith("dt_proj.bias"):
        dt = np.exp(rng.uniform(math.log(1e-3), math.log(0.1), size=shape))
        return inverse_softplus(dt)
    if name.endswith("conv1d.weight"):
        return rng.normal(0.0, 0.5, size=shape)
    if name.endswith("conv1d.bias"):
        return rng.normal(0.0, 0.3, size=shape)
    if len(shape) == 1 and ("norm" in name):
        # every RMSNorm / gated norm weight, including Jamba's dt/B/C norms
        return rng.uniform(0.5, 1.5, size=shape)
    if leaf == "bias":
        return rng.normal(0.0, 0.1, size=shape)
    if name.endswith("embed_tokens.weight") or name.endswith("embeddings.weight"):
        # Zamba2 ties lm_head to it: std 0.25 gives logits of std ~2 after the final norm.
        return rng.normal(0.0, 0.25, size=shape)
    if name.endswith("lm_head.weight"):
        return rng.normal(0.0, 2.0 / math.sqrt(fan_in), size=shape)
    if len(shape) == 2 or (len(shape) == 3 and leaf == "weight" and "_linear" in name):
        # every other Linear (projections, experts, router, adapters, Zamba2 `linear`; Granite's
        # experts, [E, out, in]): unit-variance outputs for unit-variance inputs, so each
        # sub-layer visibly matters.
        return rng.normal(0.0, 1.0 / math.sqrt(fan_in), size=shape)
    raise ValueError(f"no initialisation rule for parameter {name} {shape}")


def randomize(model, seed):
    rng = np.random.default_rng(seed)
    names = []
    with torch.no_grad():
        # named_parameters() yields each shared (tied) tensor once.
        for name, param in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            values = parameter_values(name, tuple(param.shape), rng, model.config)
            param.copy_(torch.from_numpy(values).to(param.dtype))
            names.append(name)
    return names


# --------------------------------------------------------------------------------------------
# Checkpoint inspection


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def checkpoint_tensors(model_dir):
    """name -> (dtype, shape, file) over all shards."""
    out = {}
    for fname in sorted(os.listdir(model_dir)):
        if fname.endswith(".safetensors"):
            for name, info in read_safetensors_header(os.path.join(model_dir, fname)).items():
                assert name not in out, f"tensor {name} stored twice"
                out[name] = (info["dtype"], info["shape"], fname)
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        assert set(weight_map) == set(out), "index weight_map disagrees with shard contents"
        for name, fname in weight_map.items():
            assert out[name][2] == fname, f"index puts {name} in {fname}, found in {out[name][2]}"
    return out


def check_zamba2_storage(config, tensors):
    """A loader must find every shared block and every adapter in the files."""
    hybrid = config.hybrid_layer_ids
    nmb = config.num_mem_blocks
    block_prefix = {}
    for b in range(nmb):
        for k, j in enumerate(hybrid):
            key = f"model.layers.{j}.shared_transformer.self_attn.q_proj.weight"
            if k % nmb == b and key in tensors:
                block_prefix[b] = f"model.layers.{j}.shared_transformer."
                break
        assert b in block_prefix, f"shared block {b} not stored"
    for k in range(len(hybrid)):
        prefix = block_prefix[k % nmb]
        needed = [f"{prefix}feed_forward.gate_up_proj_adapter_list.{k}.{i}.weight" for i in (0, 1)]
        if config.use_shared_attention_adapter:
            for proj in ("q", "k", "v"):
                needed += [f"{prefix}self_attn.linear_{proj}_adapter_list.{k}.{i}.weight" for i in (0, 1)]
        for name in needed:
            assert name in tensors, f"adapter tensor {name} missing for hybrid position {k}"
    for j in hybrid:
        assert f"model.layers.{j}.linear.weight" in tensors
    return {b: p for b, p in block_prefix.items()}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Reference computation


class _Float64Torch:
    """Stands in for the `torch` module inside transformers' modeling files while a float64
    reference runs: `torch.float32` / `torch.float` read as torch.float64, everything else is
    torch itself.

    model.double() alone does not give a float64 computation: 4.57.1's modeling code casts to
    float32 explicitly in the RMSNorms and gated norms (`hidden_states.to(torch.float32)`),
    the attention softmax (`dtype=torch.float32`), Mamba-2's `residual_in_fp32`, the Jamba router
    softmax (`dtype=torch.float`) and the SSD/selective-scan paths (`A_log.float()`,
    `.to(dtype=torch.float32)`, `B.float()`, ...). Those casts would round every layer to float32.
    """

    float32 = torch.float64
    float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


FLOAT64_PATCHED_MODULES = [
    "transformers.models.jamba.modeling_jamba",
    "transformers.models.zamba2.modeling_zamba2",
    "transformers.models.mamba2.modeling_mamba2",
    "transformers.models.granitemoehybrid.modeling_granitemoehybrid",
]


@contextlib.contextmanager
def compute_precision(dtype):
    """Runs transformers' forward passes in `dtype`. For float64: the modeling modules see
    _Float64Torch, Tensor.float() returns float64 and the default dtype is float64 (so tensors
    created inside the forward, e.g. masks, are float64 too). Everything is restored on exit."""
    if dtype == torch.float32:
        yield
        return
    assert dtype == torch.float64, dtype
    modules = [importlib.import_module(m) for m in FLOAT64_PATCHED_MODULES]
    saved_torch = [m.torch for m in modules]
    saved_float = torch.Tensor.float
    saved_default = torch.get_default_dtype()
    try:
        for m in modules:
            m.torch = _Float64Torch()
        torch.Tensor.float = lambda self, *args, **kwargs: self.to(torch.float64)
        torch.set_default_dtype(torch.float64)
        yield
    finally:
        torch.set_default_dtype(saved_default)
        torch.Tensor.float = saved_float
        for m, t in zip(modules, saved_torch):
            m.torch = t


def _rope_forward_float32_angles(self, x, position_ids):
    """Zamba2RotaryEmbedding.forward for a float64 reference with ROPE_ANGLES == "float32": the
    angles transformers computes (float32 inv_freq times float32 position, rounded to float32),
    their cos/sin in float64."""
    freqs = (position_ids[:, :, None].to(torch.float32) * self.inv_freq_float32[None, None, :]).to(torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def to_compute_dtype(model, dtype):
    """Converts a float32-loaded model to `dtype` (model.double() for float64; exact, also for the
    bf16 mamba2-tiny checkpoint, which was upcast exactly to float32 on load). RoPE: see
    ROPE_ANGLES. inv_freq is a non-persistent buffer that transformers computed in float32 at
    construction; "exact" recomputes it in float64 from rope_theta."""
    if dtype == torch.float32:
        return model
    model = model.double()
    for m in model.modules():
        if hasattr(m, "inv_freq") and hasattr(m, "rope_type"):
            assert m.rope_type == "default" and type(m).__name__ in (
                "Zamba2RotaryEmbedding",
                "GraniteMoeHybridRotaryEmbedding",
                "BambaRotaryEmbedding",
            ), type(m)
            old = m.inv_freq  # transformers' float32 values, upcast by model.double()
            dim = 2 * old.numel()  # the rotated dims: one frequency per pair of them
            if ROPE_ANGLES == "float32":
                m.inv_freq_float32 = old.to(torch.float32)
                m.forward = _rope_forward_float32_angles.__get__(m)
                continue
            assert ROPE_ANGLES == "exact", ROPE_ANGLES
            new = 1.0 / (
                float(m.config.rope_theta) ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
            )
            assert torch.allclose(new, old.to(torch.float64), rtol=1e-6, atol=0), "unexpected RoPE layout"
            m.inv_freq = new
            m.original_inv_freq = new
    return model


def make_prompts(lengths):
    rng = np.random.default_rng(PROMPT_SEED)
    pool = {n: rng.integers(FIRST_PROMPT_ID, VOCAB, size=n).tolist() for n in sorted(set(FULL_PROMPTS + SHORT_PROMPTS))}
    return {n: pool[n] for n in lengths}


ZAMBA2_SINGLE_CHUNK_NOTE = (
    "Zamba2: transformers 4.57.1's torch prefill (Zamba2MambaMixer.torch_forward) passes SSD "
    "states between chunks wrongly: it sums the chunk-decay products over the target-chunk axis "
    "instead of the source-chunk axis (`.sum(dim=2)` where Mamba2's equivalent sums over the source), "
    "so every prompt longer than chunk_size gets wrong logits (max |diff| of several units here), "
    "while prompts of <= chunk_size tokens and the single-token decode recurrence are right. "
    "These references therefore run the mixer with chunk_size raised at run time to cover the whole "
    "prompt (one chunk, no state passing; config.json keeps chunk_size 32 so an engine's multi-chunk "
    "SSD is still exercised); they were cross-checked against 4.57.1's own token-by-token cached "
    "decode (see stepwise_max_abs_diff)."
)


def set_zamba2_chunk(model, seq_len):
    """Makes the 4.57.1 Zamba2 torch prefill use a single SSD chunk (see ZAMBA2_SINGLE_CHUNK_NOTE)."""
    chunk = max(32, -(-seq_len // 32) * 32)
    for m in model.modules():
        if type(m).__name__ == "Zamba2MambaMixer":
            m.chunk_size = chunk


@torch.no_grad()
def full_logits(model, ids, zamba2_single_chunk=True):
    if zamba2_single_chunk and isinstance(model, Zamba2ForCausalLM):
        set_zamba2_chunk(model, len(ids))
    input_ids = torch.tensor([ids], dtype=torch.long)
    with compute_precision(model.dtype):
        out = model(input_ids=input_ids, use_cache=False)
    # In the model's dtype (float64 or float32); callers cast to float32 for storage.
    return out.logits[0].to(torch.float64).numpy()


@torch.no_grad()
def greedy_no_cache(model, prompt, steps):
    ids = list(prompt)
    tokens, rows, margins = [], [], []
    for _ in range(steps):
        row = full_logits(model, ids)[-1]
        top2 = np.sort(row)[-2:]
        tok = int(np.argmax(row))
        tokens.append(tok)
        rows.append(row)
        margins.append(float(top2[1] - top2[0]))
        ids.append(tok)
    return tokens, np.stack(rows), margins


@torch.no_grad()
def stepwise_logits(model, ids):
    """Logits of every position from transformers' own cached path, one token per call.

    An independent oracle for the prefill references: it uses the recurrent single-token
    decode code (conv-state roll + SSM state update) instead of the chunked/parallel prefill.
    """
    cfg = model.config
    if isinstance(model, JambaForCausalLM):
        from transformers.models.jamba.modeling_jamba import HybridMambaAttentionDynamicCache as Cache

        cache_kw = "past_key_values"
    elif isinstance(model, Zamba2ForCausalLM):
        from transformers.models.zamba2.modeling_zamba2 import Zamba2HybridDynamicCache as Cache

        cache_kw = "past_key_values"
    elif isinstance(model, GraniteMoeHybridForCausalLM):
        from transformers.models.granitemoehybrid.modeling_granitemoehybrid import (
            HybridMambaAttentionDynamicCache as Cache,
        )

        cache_kw = "past_key_values"
    else:
        from transformers.models.mamba2.modeling_mamba2 import Mamba2Cache as Cache

        cache_kw = "cache_params"
    cache = Cache(cfg, 1, dtype=model.dtype, device="cpu")
    rows = []
    with compute_precision(model.dtype):
        for t, tok in enumerate(ids):
            out = model(
                input_ids=torch.tensor([[tok]], dtype=torch.long),
                use_cache=True,
                cache_position=torch.tensor([t], dtype=torch.long),
                **{cache_kw: cache},
            )
            rows.append(out.logits[0, -1].to(torch.float64).numpy())
    return np.stack(rows)


class LayerOutputs:
    """Residual stream after every decoder layer (before the final norm), for locating the
    first layer where an engine diverges."""

    def __init__(self, model):
        base = model.backbone if hasattr(model, "backbone") else model.model
        self.outputs = [None] * len(base.layers)
        self.handles = [layer.register_forward_hook(self._hook(i)) for i, layer in enumerate(base.layers)]

    def _hook(self, i):
        def hook(module, inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            self.outputs[i] = out[0].detach().to(torch.float64).numpy().astype(np.float32)

        return hook

    def stacked(self):
        return np.stack(self.outputs)

    def close(self):
        for h in self.handles:
            h.remove()


class RoutingGap:
    """Smallest gap, over all tokens and MoE layers of one forward, between the k-th and the
    (k+1)-th routing probability: how far the reference is from a top-k tie an engine could
    resolve differently under float32 rounding."""

    def __init__(self, model):
        self.min_gap = None
        self.handles = []
        for m in model.modules():
            if type(m).__name__ == "JambaSparseMoeBlock":
                self.handles.append(m.router.register_forward_hook(self._hook(m.top_k)))
            elif type(m).__name__ == "GraniteMoeHybridTopKGating":
                self.handles.append(m.layer.register_forward_hook(self._hook(m.top_k)))

    def _hook(self, k):
        def hook(module, inputs, output):
            probs = torch.softmax(output.to(torch.float64), dim=-1).sort(dim=-1, descending=True).values
            gap = float((probs[..., k - 1] - probs[..., k]).min())
            self.min_gap = gap if self.min_gap is None else min(self.min_gap, gap)

        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def load_float32(cls, model_dir):
    model, info = cls.from_pretrained(
        model_dir, torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(key), f"{model_dir}: {key} = {info[key]}"
    model.eval()
    return model


def build_model(name, spec):
    torch.manual_seed(spec["seed"])
    config = spec["config"]()
    config._attn_implementation = "eager"
    model = spec["cls"](config)
    model.eval()
    randomize(model, spec["seed"])
    return model


def zamba2_alias_patterns(config):
    first_user = {}
    patterns = []
    for k, j in enumerate(config.hybrid_layer_ids):
        b = k % config.num_mem_blocks
        if b in first_user:
            patterns.append(rf"^model\.layers\.{j}\.shared_transformer\.")
        else:
            first_user[b] = j
    return patterns


def save_model(name, spec, model):
    out_dir = os.path.join(MODELS_DIR, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    model = model.to(spec["save_dtype"])
    if isinstance(model, Zamba2ForCausalLM):
        # transformers 4.57.1 cannot save a Zamba2 model whose shared block is used by more than
        # one hybrid layer: Zamba2Model._tied_weights_keys holds compiled regexes which
        # _get_tied_weight_keys turns into "model.re.compile(...)" strings that match nothing,
        # so save_pretrained raises on the aliased tensors. Declare the aliases ourselves: keep
        # each shared block (with all its adapters) under the FIRST hybrid layer that uses it,
        # as hub checkpoints do, drop the other hybrid layers' aliases.
        model._dynamic_tied_weights_keys = zamba2_alias_patterns(model.config)
    kwargs = {"safe_serialization": True}
    if spec["max_shard_size"]:
        kwargs["max_shard_size"] = spec["max_shard_size"]
    model.save_pretrained(out_dir, **kwargs)
    GenerationConfig(
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, do_sample=False
    ).save_pretrained(out_dir)
    return out_dir


def copy_tokenizer(name, spec, out_dir):
    copied = []
    for fname in spec["tokenizer_files"]:
        src = os.path.join(TOKENIZER_DIR, fname)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out_dir, fname))
            copied.append(fname)
    return copied


def generate(name, spec):
    print(f"== {name}", flush=True)
    model = build_model(name, spec)
    prompts = make_prompts(spec["prompts"])
    probe = prompts[spec["prompts"][-1]][:40]
    before = full_logits(model, probe) if spec["save_dtype"] == torch.float32 else None

    out_dir = save_model(name, spec, model)
    tensors = checkpoint_tensors(out_dir)
    shards = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    if spec["max_shard_size"]:
        assert len(shards) >= 2 and os.path.exists(os.path.join(out_dir, "model.safetensors.index.json"))
    want_dtype = {torch.float32: "F32", torch.bfloat16: "BF16"}[spec["save_dtype"]]
    assert all(t[0] == want_dtype for t in tensors.values()), "unexpected tensor dtype in checkpoint"

    ref = load_float32(spec["cls"], out_dir)
    if spec["cls"] is Zamba2ForCausalLM:
        check_zamba2_storage(ref.config, tensors)
    if before is not None:
        after = full_logits(ref, probe)
        assert np.array_equal(before, after), f"reloaded {name} differs: {np.abs(before - after).max()}"
    write_references(name, spec["cls"], ref, out_dir, prompts, str(spec["save_dtype"]).replace("torch.", ""))
    return out_dir


def write_references(name, cls, ref, out_dir, prompts, checkpoint_dtype):
    """Computes and writes tests/data/reference/<name>/ for the float32-loaded model `ref` of the
    checkpoint in `out_dir`: one case per entry of `prompts` (length -> ids)."""
    vocab = ref.config.vocab_size
    shards = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    ref = to_compute_dtype(ref, COMPUTE_DTYPE)
    compute_dtype = str(COMPUTE_DTYPE).replace("torch.", "")

    ref_dir = os.path.join(REFERENCE_DIR, name)
    if os.path.isdir(ref_dir):
        shutil.rmtree(ref_dir)
    os.makedirs(ref_dir)
    cases = []
    layer_dump_len = 33 if 33 in prompts else max(prompts)
    for n, ids in prompts.items():
        case = f"len{n:03d}"
        routing = RoutingGap(ref)
        layers = LayerOutputs(ref) if n == layer_dump_len else None
        logits = full_logits(ref, ids)
        routing.close()
        if layers is not None:
            layers.close()
        assert logits.shape == (n, vocab) and np.isfinite(logits).all()
        tokens, rows, margins = greedy_no_cache(ref, ids, GREEDY_STEPS)
        assert np.array_equal(rows[0], logits[-1])
        stepwise = stepwise_logits(ref, ids)
        step_diff = float(np.abs(stepwise - logits).max())
        assert step_diff < STEPWISE_TOLERANCE, f"{name} {case}: prefill vs cached decode differ by {step_diff}"
        np.save(os.path.join(ref_dir, f"{case}.prefill_logits.npy"), logits.astype(np.float32))
        np.save(os.path.join(ref_dir, f"{case}.greedy_logits.npy"), rows.astype(np.float32))
        cases.append(
            {
                "name": case,
                "prompt_ids": ids,
                "prefill_logits_file": f"{case}.prefill_logits.npy",
                "prefill_logits_shape": [n, vocab],
                "greedy_ids": tokens,
                "greedy_logits_file": f"{case}.greedy_logits.npy",
                "greedy_logits_shape": [GREEDY_STEPS, vocab],
                "greedy_min_top2_margin": min(margins),
                "stepwise_max_abs_diff": step_diff,
            }
        )
        if routing.min_gap is not None:
            cases[-1]["moe_min_routing_gap"] = routing.min_gap
        if layers is not None:
            stack = layers.stacked()
            np.save(os.path.join(ref_dir, f"{case}.layer_outputs.npy"), stack)
            cases[-1]["layer_outputs_file"] = f"{case}.layer_outputs.npy"
            cases[-1]["layer_outputs_shape"] = list(stack.shape)
        print(
            f"   {case}: greedy {tokens} (min top-2 margin {min(margins):.3g}, "
            f"prefill vs cached decode {step_diff:.2g})",
            flush=True,
        )

    cfg = ref.config
    if COMPUTE_DTYPE == torch.float64:
        precision_notes = [
            "Logits are stored as float32 but computed on CPU in float64 with transformers' torch "
            "(non-kernel) paths and eager attention, from the checkpoint as stored on disk (loaded "
            "as float32, then model.double(); both conversions exact). The float32 casts hard-coded in "
            "4.57.1's modeling code (RMSNorm/gated norm, attention and router softmax, SSD/scan, "
            "Mamba-2 residual_in_fp32) were redirected to float64, so the whole forward is float64 "
            "(RoPE models: see rope_angles). Greedy argmax and top-2 margins "
            "are taken on the float64 logits. The reference is thus far more precise than a float32 "
            "engine: the stored values carry only float32 rounding (relative 6e-8).",
        ]
        noise_note = (
            "(an independent check of the reference; in float64 it is ~1e-12, so it no longer "
            "indicates float32 noise: a float32 engine sees its own rounding only)."
        )
    else:
        precision_notes = [
            "Logits are float32, computed on CPU in float32 with transformers' torch (non-kernel) paths "
            "and eager attention, from the checkpoint as stored on disk.",
        ]
        noise_note = (
            "(an independent check of the reference; it also shows the float32 noise level to expect "
            "between two correct implementations)."
        )
    notes = precision_notes + [
        "greedy_ids: argmax of the last logits row; every step re-runs the full forward over "
        "prompt + tokens so far with use_cache=False (no KV/SSM cache is involved); EOS does not stop it.",
        "greedy logits row 0 equals the last row of the prefill logits.",
        "layer_outputs (one case per model): float32 [num_layers, T, hidden]; row i is the residual "
        "stream after decoder layer i (mixer + FFN for Jamba; for Zamba2 hybrid layers, after the "
        "shared block, linear and mamba), before the final norm; from the same prefill as the logits.",
        "stepwise_max_abs_diff: max |difference| between the prefill logits and transformers' own "
        "token-by-token cached decode of the same prompt, both in " + compute_dtype + " " + noise_note,
    ]
    extra = {}
    if cls is Zamba2ForCausalLM:
        extra["zamba2_dt_min_clamp"] = "time_step_min"
        extra["time_step_min"] = cfg.time_step_min
        notes.append(
            "Zamba2: transformers 4.57.1's torch path clamps dt = max(softplus(dt_raw + dt_bias), "
            "time_step_min) in prefill (and decode). These fixtures include that clamp; several "
            "heads have softplus values below time_step_min, so parity needs zamba2_dt_min_clamp=time_step_min."
        )
        notes.append("Zamba2 gated RMSNorm is grouped (mamba_ngroups groups of din/ngroups channels).")
        notes.append(ZAMBA2_SINGLE_CHUNK_NOTE)
        extra["ssd_chunking_of_reference"] = "single chunk covering the prompt (4.57.1 multi-chunk bug)"
        if cfg.use_mem_rope and COMPUTE_DTYPE == torch.float64:
            extra["rope_angles"] = ROPE_ANGLES
            if ROPE_ANGLES == "float32":
                notes.append(
                    "rope_angles float32: the RoPE angles are transformers' own, which it computes in "
                    "float32 for every model dtype (inv_freq = 1 / rope_theta^(2i/d) in float32, "
                    "angle = float32(position) * inv_freq rounded to float32); their cos/sin and "
                    "everything else are float64. (Exact float64 angles differ by up to 4.2e-6 rad "
                    "over positions 0-156 and move these logits by up to 1.5e-4.)"
                )
            else:
                notes.append("rope_angles exact: RoPE inv_freq and angles in float64.")
    if cls is Mamba2ForCausalLM:
        extra["time_step_limit"] = list(cfg.time_step_limit)
        notes.append(
            "Mamba2: checkpoint stored in bfloat16; references come from loading it with "
            "torch_dtype=float32 (exact upcast) and running in " + compute_dtype + ". The gated RMSNorm is "
            "full-width over din (transformers Mamba2 semantics), not grouped. time_step_limit "
            "(0, inf) makes the dt clamp a no-op."
        )
    if cls is JambaForCausalLM:
        notes.append("Jamba: use_mamba_kernels=False (slow_forward path); attention has no positional encoding.")
    if cls is GraniteMoeHybridForCausalLM:
        notes.append(
            "GraniteMoeHybrid (Granite-4.0-H): embeddings x embedding_multiplier, each mixer and FFN "
            "output x residual_multiplier before its residual add, logits / logits_scaling, attention "
            "softmax scale = attention_multiplier; the router takes a softmax over the k selected "
            "logits; the gated RMSNorm is full-width over din; time_step_limit is fixed at (0, inf)."
        )
    manifest = {
        "model": name,
        "model_dir": os.path.relpath(out_dir, REPO_ROOT),
        "architecture": cfg.architectures[0] if cfg.architectures else cls.__name__,
        "checkpoint_dtype": checkpoint_dtype,
        "compute_dtype": compute_dtype,
        "logits_storage_dtype": "float32",
        "device": "cpu",
        "attn_implementation": "eager",
        "vocab_size": vocab,
        "generation": {
            "method": "greedy",
            "do_sample": False,
            "max_new_tokens": GREEDY_STEPS,
            "stop_on_eos": False,
            "use_cache": False,
        },
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "checkpoint_sha256": {f: sha256_file(os.path.join(out_dir, f)) for f in shards},
        **extra,
        "notes": notes,
        "cases": cases,
    }
    with open(os.path.join(ref_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def generate_existing(model_dir, name):
    """References for a checkpoint that this tool did not build (e.g. bundled/tandem-tiny-chat):
    loaded as stored, the same float64 computation, EXISTING_PROMPTS of seeded random ids."""
    print(f"== {name} ({model_dir})", flush=True)
    model_dir = os.path.abspath(os.path.join(REPO_ROOT, model_dir))
    with open(os.path.join(model_dir, "config.json")) as f:
        arch = json.load(f)["architectures"][0]
    cls = {
        c.__name__: c
        for c in (JambaForCausalLM, Zamba2ForCausalLM, Mamba2ForCausalLM, GraniteMoeHybridForCausalLM)
    }[arch]
    dtypes = {t[0] for t in checkpoint_tensors(model_dir).values()}
    assert len(dtypes) == 1, f"mixed checkpoint dtypes {dtypes}"
    checkpoint_dtype = {"F32": "float32", "BF16": "bfloat16"}[dtypes.pop()]
    ref = load_float32(cls, model_dir)
    rng = np.random.default_rng(PROMPT_SEED)
    prompts = {
        n: rng.integers(EXISTING_FIRST_PROMPT_ID, ref.config.vocab_size, size=n).tolist() for n in EXISTING_PROMPTS
    }
    write_references(name, cls, ref, model_dir, prompts, checkpoint_dtype)


def describe(name):
    model_dir = os.path.join(MODELS_DIR, name)
    tensors = checkpoint_tensors(model_dir)
    total = 0
    for tname, (dtype, shape, fname) in sorted(tensors.items(), key=lambda kv: natural_key(kv[0])):
        print(f"{tname:80s} {dtype:5s} {str(shape):16s} {fname}")
        total += int(np.prod(shape))
    print(f"{len(tensors)} tensors, {total} parameters")


def natural_key(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", help=f"subset of {sorted(MODELS)} (default: all)")
    parser.add_argument("--describe", action="store_true", help="print tensor names/shapes of saved checkpoints")
    parser.add_argument(
        "--compute-dtype",
        choices=["float64", "float32"],
        default="float64",
        help="dtype the references are computed in (default float64; always stored as float32)",
    )
    parser.add_argument(
        "--rope-angles",
        choices=["float32", "exact"],
        default="float32",
        help="float64 references: RoPE angles as transformers rounds them (float32, default) or exact",
    )
    parser.add_argument(
        "--tokenizers-only", action="store_true", help="only copy tokenizer files into existing checkpoints"
    )
    parser.add_argument(
        "--existing",
        metavar="DIR",
        help="write references for this existing checkpoint (relative to the repo root) instead of building one",
    )
    parser.add_argument("--name", help="with --existing: the folder name under tests/data/reference/")
    args = parser.parse_args()
    if args.existing:
        if not args.name or args.models or args.describe or args.tokenizers_only:
            sys.exit("--existing needs --name and takes no model names, --describe or --tokenizers-only")
    names = args.models or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n}; choose from {sorted(MODELS)}")
    if args.describe:
        for n in names:
            print(f"== {n}")
            describe(n)
        return
    global COMPUTE_DTYPE, ROPE_ANGLES
    COMPUTE_DTYPE = getattr(torch, args.compute_dtype)
    ROPE_ANGLES = args.rope_angles
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.existing:
        generate_existing(args.existing, args.name)
        return
    for n in names:
        out_dir = os.path.join(MODELS_DIR, n) if args.tokenizers_only else generate(n, MODELS[n])
        copied = copy_tokenizer(n, MODELS[n], out_dir)
        print(f"   tokenizer files copied into {n}: {copied or 'none (tests/data/tokenizers/tiny-spm missing)'}")


if __name__ == "__main__":
    main()
