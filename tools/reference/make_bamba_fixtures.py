#!/usr/bin/env python3
"""Builds the Bamba fixture (tests/data/models/bamba-tiny and its references).

Like make_nemotron_fixtures.py, this runs in the transformers 5.24.0 venv
(requirements-nemotron.txt) and reuses make_fixtures.py's parameter rules, prompts, float64
computation and manifest format. Bamba's RoPE covers the first half of each head (transformers
fixes its partial_rotary_factor at 0.5), which no other fixture has.
"""

import json
import os
import sys

import torch
from transformers import BambaConfig, BambaForCausalLM

import make_fixtures as mf

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


def load_float32(cls, model_dir):
    model, info = cls.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(key), f"{model_dir}: {key} = {info[key]}"
    return model.eval()


@torch.no_grad()
def stepwise_logits(model, ids):
    """transformers' own cached path, one token per call, each with its position given: without
    position_ids, transformers 5.24.0's Bamba places every cached step at the wrong position
    (its cache's length comes back as 0; differences of order 1 in the logits)."""
    rows = []
    cache = None
    with mf.compute_precision(model.dtype):
        for position, tok in enumerate(ids):
            out = model(
                input_ids=torch.tensor([[tok]], dtype=torch.long),
                position_ids=torch.tensor([[position]], dtype=torch.long),
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            rows.append(out.logits[0, -1].to(torch.float64).numpy())
    return mf.np.stack(rows)


def main():
    mf.load_float32 = load_float32
    mf.stepwise_logits = stepwise_logits
    mf.COMPUTE_DTYPE = torch.float64
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name in sys.argv[1:] or list(MODELS):
        spec = MODELS[name]
        out_dir = mf.generate(name, spec)
        mf.copy_tokenizer(name, spec, out_dir)
        manifest_path = os.path.join(mf.REFERENCE_DIR, name, "manifest.json")
        with open(manifest_path) as f:
            manifest = json.load(f)
        manifest["notes"].append(POSITION_NOTE)
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
