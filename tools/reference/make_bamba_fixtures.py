#!/usr/bin/env python3
"""Builds the Bamba fixture (tests/data/models/bamba-tiny and its references).

Like make_nemotron_fixtures.py, this runs in the transformers 5.24.0 venv
(requirements-nemotron.txt) and reuses make_fixtures.py's parameter rules, prompts, float64
computation and manifest format. Bamba's RoPE covers the first half of each head (transformers
fixes its partial_rotary_factor at 0.5), which no other fixture has.
"""

import torch
from transformers import BambaConfig, BambaForCausalLM

import make_fixtures as mf
import make_nemotron_fixtures as nemotron

mf.FLOAT64_PATCHED_MODULES = ["transformers.models.bamba.modeling_bamba"]


def bamba_config():
    return BambaConfig(
        vocab_size=mf.VOCAB,
        hidden_size=64,
        num_hidden_layers=5,
        attn_layer_indices=[1, 4],
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        mamba_n_heads=8,
        mamba_d_head="auto",
        mamba_n_groups=2,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=32,
        mamba_conv_bias=True,
        mamba_proj_bias=False,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        pad_token_id=mf.PAD_ID,
        bos_token_id=mf.BOS_ID,
        eos_token_id=mf.EOS_ID,
    )


POSITION_NOTE = (
    "Bamba: the cached-decode cross-check passes each step's position_ids, because transformers "
    "5.24.0's Bamba places cached steps at wrong positions without them. RoPE rotates the first "
    "half of each head (partial_rotary_factor 0.5, fixed by transformers)."
)

MODELS = {
    "bamba-tiny": dict(
        cls=BambaForCausalLM,
        config=bamba_config,
        seed=601,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=mf.FULL_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
}


def main():
    mf.load_float32 = nemotron.load_checked
    nemotron.generate_all(MODELS, lambda name: [POSITION_NOTE])


if __name__ == "__main__":
    main()
