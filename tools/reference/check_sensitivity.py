#!/usr/bin/env python3
"""Shows that the fixtures catch plausible porting mistakes.

Loads each saved fixture checkpoint, applies one deliberate mistake at a time (a wrong
formula or a forgotten parameter, each one a known pitfall of porting these models), re-runs the
longest reference prompt and prints how far the logits move from the stored reference. A
mistake the fixtures could not detect would show a difference near 1e-6; every line should
be orders of magnitude above the float32 tolerance the C++ parity tests use (~1e-4).

Also prints, as a control, the difference caused by a harmless change (the SSD chunk size),
which must stay at rounding level. The model runs in the manifest's compute_dtype (float64 for
the current references, so "reload reproduces reference" shows only the float32 storage rounding).
"""

import json
import os
import types

import numpy as np
import torch
import torch.nn.functional as F

import make_fixtures as mf


def load(name):
    spec = mf.MODELS[name]
    with open(os.path.join(mf.REFERENCE_DIR, name, "manifest.json")) as f:
        manifest = json.load(f)
    mf.ROPE_ANGLES = manifest.get("rope_angles", mf.ROPE_ANGLES)
    model = mf.to_compute_dtype(
        mf.load_float32(spec["cls"], os.path.join(mf.MODELS_DIR, name)),
        getattr(torch, manifest.get("compute_dtype", "float32")),
    )
    case = max(manifest["cases"], key=lambda c: len(c["prompt_ids"]))
    ref = np.load(os.path.join(mf.REFERENCE_DIR, name, case["prefill_logits_file"]))
    return model, case["prompt_ids"], ref


def modules_of(model, cls_name):
    return [m for m in model.modules() if type(m).__name__ == cls_name]


def grouped_gated_norm(groups):
    def forward(self, hidden_states, gate=None):
        dtype = hidden_states.dtype
        h = hidden_states.float() * F.silu(gate.float())
        shape = h.shape
        h = h.view(*shape[:-1], groups, shape[-1] // groups)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.view(shape).to(dtype)

    return forward


def renormalised_moe_forward(self, hidden_states):
    b, t, d = hidden_states.shape
    x = hidden_states.view(-1, d)
    probs = F.softmax(self.router(x), dim=-1, dtype=x.dtype)
    w, idx = torch.topk(probs, self.top_k, dim=-1)
    w = w / w.sum(-1, keepdim=True)  # the mistake: Granite-style renormalisation
    out = torch.zeros_like(x)
    for e in range(self.num_experts):
        rows, slot = torch.where(idx == e)
        if rows.numel():
            out[rows] += w[rows, slot, None] * self.experts[e](x[rows])
    return out.view(b, t, d), None


def zero_(params):
    with torch.no_grad():
        for p in params:
            p.zero_()


def fill_(params, value):
    with torch.no_grad():
        for p in params:
            p.fill_(value)


def mistakes(name):
    """(label, function(model)) pairs for model `name`."""
    out = []
    if name.startswith("jamba"):
        out += [
            ("D skip ignored (D=0)", lambda m: zero_(x.D for x in modules_of(m, "JambaMambaMixer"))),
            ("D = 1 (default)", lambda m: fill_((x.D for x in modules_of(m, "JambaMambaMixer")), 1.0)),
            ("conv bias ignored", lambda m: zero_(x.conv1d.bias for x in modules_of(m, "JambaMambaMixer"))),
            ("dt_proj bias ignored", lambda m: zero_(x.dt_proj.bias for x in modules_of(m, "JambaMambaMixer"))),
            (
                "dt/B/C norms skipped (weight 1 stands in)",
                lambda m: [
                    setattr(mx, n, torch.nn.Identity())
                    for mx in modules_of(m, "JambaMambaMixer")
                    for n in ("dt_layernorm", "b_layernorm", "c_layernorm")
                ],
            ),
            (
                "MoE top-k weights renormalised",
                lambda m: [
                    setattr(b, "forward", types.MethodType(renormalised_moe_forward, b))
                    for b in modules_of(m, "JambaSparseMoeBlock")
                ],
            ),
            (
                "norm weights ignored (all 1)",
                lambda m: fill_((p for n, p in m.named_parameters() if "norm" in n), 1.0),
            ),
        ]
    if name.startswith("zamba2"):
        out += [
            ("dt clamp to time_step_min removed", lambda m: [setattr(x, "time_step_min", 0.0) for x in modules_of(m, "Zamba2MambaMixer")]),
            ("D skip ignored (D=0)", lambda m: zero_(x.D for x in modules_of(m, "Zamba2MambaMixer"))),
            ("conv bias ignored", lambda m: zero_(x.conv1d.bias for x in modules_of(m, "Zamba2MambaMixer"))),
            (
                "attention scale 1/sqrt(dh) instead of sqrt(2/dh)",
                lambda m: [setattr(a, "scaling", a.head_dim**-0.5) for a in modules_of(m, "Zamba2Attention")],
            ),
            (
                "MLP adapters ignored",
                lambda m: zero_(p for n, p in m.named_parameters() if "gate_up_proj_adapter_list" in n),
            ),
            ("per-layer `linear` skipped (identity)", lambda m: [setattr(l, "linear", torch.nn.Identity()) for l in modules_of(m, "Zamba2HybridLayer")]),
        ]
        if name == "zamba2-tiny":
            out += [
                (
                    "gated norm full-width instead of grouped",
                    lambda m: [setattr(x.norm, "group_size", x.intermediate_size) for x in modules_of(m, "Zamba2MambaMixer")],
                ),
                ("q/k/v adapters ignored", lambda m: zero_(p for n, p in m.named_parameters() if "linear_q_adapter" in n or "linear_k_adapter" in n or "linear_v_adapter" in n)),
                ("RoPE skipped", lambda m: setattr(m.config, "use_mem_rope", False)),
            ]
    if name.startswith("mamba2"):
        out += [
            (
                "gated norm grouped instead of full-width",
                lambda m: [
                    setattr(x.norm, "forward", types.MethodType(grouped_gated_norm(x.n_groups), x.norm))
                    for x in modules_of(m, "Mamba2Mixer")
                ],
            ),
            ("D skip ignored (D=0)", lambda m: zero_(x.D for x in modules_of(m, "Mamba2Mixer"))),
            ("dt_bias ignored", lambda m: zero_(x.dt_bias for x in modules_of(m, "Mamba2Mixer"))),
            ("conv bias ignored", lambda m: zero_(x.conv1d.bias for x in modules_of(m, "Mamba2Mixer"))),
            (
                "groups interleaved (head h -> group h % g)",
                lambda m: [permute_groups(x) for x in modules_of(m, "Mamba2Mixer")],
            ),
        ]
    return out


def permute_groups(mixer):
    """Equivalent to mapping head h to group h % g: reorder the heads instead of the groups."""
    nh, g, p = mixer.num_heads, mixer.n_groups, mixer.head_dim
    per = nh // g
    # new head position i (contiguous semantics) takes old head order[i]
    order = [j * g + gi for gi in range(g) for j in range(per)]
    with torch.no_grad():
        din = mixer.intermediate_size
        conv_dim = mixer.conv_dim
        w = mixer.in_proj.weight
        z = w[:din].view(nh, p, -1)[order].reshape(din, -1)
        x = w[din : 2 * din].view(nh, p, -1)[order].reshape(din, -1)
        dt = w[din + conv_dim :][order]
        w[:din] = z
        w[din : 2 * din] = x
        w[din + conv_dim :] = dt
        cw, cb = mixer.conv1d.weight, mixer.conv1d.bias
        cw[:din] = cw[:din].view(nh, p, 1, -1)[order].reshape(din, 1, -1)
        cb[:din] = cb[:din].view(nh, p)[order].reshape(din)
        for t in (mixer.dt_bias, mixer.A_log, mixer.D):
            t.copy_(t[order])
        mixer.norm.weight.copy_(mixer.norm.weight.view(nh, p)[order].reshape(din))
        ow = mixer.out_proj.weight
        ow.copy_(ow.view(ow.shape[0], nh, p)[:, order].reshape(ow.shape[0], din))


def main():
    torch.set_num_threads(1)
    for name in mf.MODELS:
        model, ids, ref = load(name)
        base = mf.full_logits(model, ids)
        print(f"== {name}  (prompt length {len(ids)}, |logits| max {np.abs(ref).max():.2f})")
        print(f"   {'reload reproduces reference':55s} max|diff| = {np.abs(base - ref).max():.3g}")
        if name.startswith("mamba2"):
            m2, _, _ = load(name)
            for mx in m2.modules():
                if hasattr(mx, "chunk_size"):
                    mx.chunk_size = 256
            d = np.abs(mf.full_logits(m2, ids) - ref).max()
            print(f"   {'control: SSD chunk size 32 -> 256 (harmless)':55s} max|diff| = {d:.3g}")
        if name.startswith("zamba2"):
            m2, _, _ = load(name)
            for mx in m2.modules():
                if hasattr(mx, "chunk_size"):
                    mx.chunk_size = 32
            d = np.abs(mf.full_logits(m2, ids, zamba2_single_chunk=False) - ref).max()
            print(f"   {'transformers 4.57.1 multi-chunk prefill (its bug)':55s} max|diff| = {d:.3g}")
        for label, apply in mistakes(name):
            m2, _, _ = load(name)
            apply(m2)
            d = np.abs(mf.full_logits(m2, ids) - ref).max()
            print(f"   {label:55s} max|diff| = {d:.3g}")


if __name__ == "__main__":
    main()
