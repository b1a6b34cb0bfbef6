#!/usr/bin/env python3
"""Builds the Nemotron-H fixtures (tests/data/models/nemotron-h-tiny, the Nemotron 3 ones with
mixture-of-experts layers, nemotron3-tiny and nemotron3-tiny-nolatent, and their references).

transformers 4.57.1, which make_fixtures.py is pinned to, has no NemotronH; 5.24.0 has. So these
come from a venv of their own (requirements-nemotron.txt) and reuse make_fixtures.py's parameter
rules, prompts, float64 computation and manifest format.

One change from transformers 5.24.0 as shipped, recorded in the manifest: its chunked prefill
clamps dt at time_step_min while its recurrent decode step does not, so the two disagree
wherever softplus(dt) < time_step_min (these fixtures' dt biases put some heads there). The
reference runs both without the clamp, as the model was trained (mamba_ssm's default dt_limit)
and as tandem runs it; the cached-decode cross-check then holds.
"""

import json
import os
import sys

import torch
from transformers import NemotronHConfig, NemotronHForCausalLM

import make_fixtures as mf

mf.FLOAT64_PATCHED_MODULES = ["transformers.models.nemotron_h.modeling_nemotron_h"]

DT_NOTE = (
    "NemotronH: transformers 5.24.0's chunked prefill clamps dt at time_step_min but its "
    "recurrent decode step does not; these references run both without the clamp (each Mamba-2 "
    "mixer's time_step_limit set to (0, inf)), as the model was trained and as tandem runs it. "
    "The gated RMSNorm is grouped (n_groups groups of din/n_groups channels); attention has no "
    "positional encoding; MLP layers are up -> relu^2 -> down, ungated."
)


def tiny_nemotron_h(pattern, **overrides):
    """The tiny Nemotron-H every fixture shares (Mamba-2 8 heads x 16 in 2 groups, attention 4q/2kv
    x 16, relu2 MLPs of 96), with `pattern` for its layers and `overrides` on top."""
    fields = dict(
        vocab_size=mf.VOCAB,
        hidden_size=64,
        hybrid_override_pattern=pattern,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=96,
        mlp_hidden_act="relu2",
        mlp_bias=True,
        ssm_state_size=16,
        mamba_num_heads=8,
        mamba_head_dim=16,
        n_groups=2,
        conv_kernel=4,
        chunk_size=32,
        use_conv_bias=True,
        use_bias=True,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        pad_token_id=mf.PAD_ID,
        bos_token_id=mf.BOS_ID,
        eos_token_id=mf.EOS_ID,
    )
    fields.update(overrides)
    return NemotronHConfig(**fields)


def nemotron_config():
    return tiny_nemotron_h("M*-M-*M-")


def nemotron3_config(latent):
    """Nemotron 3: expert layers ('E') among the rest, with every routing feature switched on
    (groups, a correction bias, renormalised and scaled weights) and, with `latent`, the experts
    on a projection of the hidden state (Nemotron 3 Super; Nano has none)."""
    config = tiny_nemotron_h(
        "ME*M-EME" if latent else "ME*EM",
        mlp_bias=latent,
        use_bias=False,
        n_routed_experts=8,
        num_experts_per_tok=3,
        moe_intermediate_size=48,
        moe_shared_expert_intermediate_size=80,
        moe_latent_size=32 if latent else None,
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
    )
    # The experts one by one in float64 (the default grouped matmul takes no float64).
    config._experts_implementation = "eager"
    return config


MODELS = {
    "nemotron-h-tiny": dict(
        cls=NemotronHForCausalLM,
        config=nemotron_config,
        seed=501,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=mf.FULL_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
    "nemotron3-tiny": dict(
        cls=NemotronHForCausalLM,
        config=lambda: nemotron3_config(latent=True),
        seed=502,
        save_dtype=torch.float32,
        max_shard_size=None,
        prompts=mf.FULL_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
    "nemotron3-tiny-nolatent": dict(
        cls=NemotronHForCausalLM,
        config=lambda: nemotron3_config(latent=False),
        seed=503,
        save_dtype=torch.bfloat16,
        max_shard_size=None,
        prompts=mf.SHORT_PROMPTS,
        tokenizer_files=["tokenizer.json", "tokenizer_config.json"],
    ),
}

MOE_NOTE = (
    "Nemotron 3 expert layers: the router (gate.weight, fp32 as transformers keeps it) scores "
    "by sigmoid, adds e_score_correction_bias (random here, zero in a fresh model) for the "
    "choice, picks among the topk_group best of n_group groups, renormalises and scales the "
    "weights; experts are up -> relu^2 -> down, beside one shared expert."
)

_parameter_values = mf.parameter_values


def parameter_values(name, shape, rng, config):
    # transformers 5 keeps every expert's matrix in one [E, out, in] parameter.
    if len(shape) == 3 and name.rsplit(".", 1)[-1] in ("up_proj", "down_proj"):
        return mf.np.asarray(rng.normal(0.0, 1.0 / mf.math.sqrt(shape[-1]), size=shape))
    return _parameter_values(name, shape, rng, config)


class RoutingGap(mf.RoutingGap):
    """make_fixtures' smallest routing gap, for Nemotron 3's router too: over every token, the
    smallest of the gap between the topk_group-th and the next group score and the gap between
    the k-th and the (k+1)-th biased score inside the allowed groups. A gap of float32 rounding's
    size would let an engine choose other experts than the reference."""

    def __init__(self, model):
        super().__init__(model)
        for m in model.modules():
            if type(m).__name__ == "NemotronHTopkRouter":
                self.handles.append(m.register_forward_hook(self._sigmoid_hook))

    def _sigmoid_hook(self, module, inputs, output):
        logits = output[0].to(torch.float64)
        scores = logits.sigmoid() + module.e_score_correction_bias.to(torch.float64)
        groups = scores.view(-1, module.num_group, module.num_experts // module.num_group)
        group_scores = groups.topk(2, dim=-1)[0].sum(dim=-1).sort(dim=-1, descending=True)
        gaps = []
        if module.topk_group < module.num_group:
            values = group_scores.values
            gaps.append(values[:, module.topk_group - 1] - values[:, module.topk_group])
        allowed = group_scores.indices[:, : module.topk_group]
        mask = torch.zeros_like(group_scores.values, dtype=torch.bool).scatter_(1, allowed, True)
        mask = mask.unsqueeze(-1).expand_as(groups).reshape(scores.shape)
        ranked = scores.masked_fill(~mask, float("-inf")).sort(dim=-1, descending=True).values
        k = module.top_k
        if k < ranked.shape[-1]:
            gaps.append(ranked[:, k - 1] - ranked[:, k])
        gap = float(torch.stack(gaps).min())
        self.min_gap = gap if self.min_gap is None else min(self.min_gap, gap)


def with_correction_biases(model, seed):
    """The routers' correction biases are buffers, not parameters: randomize() leaves them at
    zero, which would leave the biased choice untested."""
    rng = mf.np.random.default_rng(seed + 1)
    with torch.no_grad():
        for name, buf in sorted(model.named_buffers(), key=lambda kv: kv[0]):
            if name.endswith("e_score_correction_bias"):
                values = rng.normal(0.0, 0.3, size=tuple(buf.shape))
                buf.copy_(torch.from_numpy(values).to(buf.dtype))
    return model


def without_dt_clamp(model):
    for m in model.modules():
        if type(m).__name__ == "NemotronHMamba2Mixer":
            m.time_step_limit = (0.0, float("inf"))
    return model


_build_model = mf.build_model


def build_model(name, spec):
    return without_dt_clamp(with_correction_biases(_build_model(name, spec), spec["seed"]))


def load_checked(cls, model_dir, **implementations):
    """The saved checkpoint, loaded back in float32 with eager attention (and `implementations`,
    e.g. experts_implementation), every tensor accounted for."""
    model, info = cls.from_pretrained(
        model_dir,
        dtype=torch.float32,
        attn_implementation="eager",
        output_loading_info=True,
        **implementations,
    )
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(key), f"{model_dir}: {key} = {info[key]}"
    return model.eval()


def load_float32(cls, model_dir):
    return without_dt_clamp(load_checked(cls, model_dir, experts_implementation="eager"))


@torch.no_grad()
def stepwise_logits(model, ids):
    """transformers' own cached path, one token per call (its recurrent Mamba-2 step), each with
    its position given: transformers 5.24.0's Bamba places cached steps at wrong positions
    without them (Nemotron-H has no positional encoding, so they change nothing there)."""
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


def generate_all(models, notes_of, fields=None):
    """make_fixtures.generate for the models named on the command line (all of `models` by
    default), with the float64 hooks set, the tokenizer copied, and the manifest given
    notes_of(name) and `fields`."""
    mf.stepwise_logits = stepwise_logits
    mf.COMPUTE_DTYPE = torch.float64
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name in sys.argv[1:] or list(models):
        spec = models[name]
        out_dir = mf.generate(name, spec)
        mf.copy_tokenizer(name, spec, out_dir)
        manifest_path = os.path.join(mf.REFERENCE_DIR, name, "manifest.json")
        with open(manifest_path) as f:
            manifest = json.load(f)
        manifest["notes"].extend(notes_of(name))
        manifest.update(fields or {})
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")


def main():
    mf.build_model = build_model
    mf.load_float32 = load_float32
    mf.parameter_values = parameter_values
    mf.RoutingGap = RoutingGap
    generate_all(
        MODELS,
        lambda name: [DT_NOTE] + ([MOE_NOTE] if name.startswith("nemotron3") else []),
        {"dt_clamp_of_reference": "none (time_step_limit (0, inf) in prefill and decode)"},
    )


if __name__ == "__main__":
    main()
