#!/usr/bin/env python3
"""Runs the prefix-cache and allocator sweeps behind docs/CACHE_RESULTS.md.

Every number comes from `tandem simulate` / `tandem simulate-alloc` (--json); this script only
loops over the grid, stores the JSON and draws the PNGs (matplotlib, optional).

  tools/cache/sweep.py --tandem build/cache/tandem --out tools/cache/results

It also prints the Markdown tables of docs/CACHE_RESULTS.md (--tables-only reprints them from
the stored JSON without running anything).
"""
import argparse
import json
import math
import os
import subprocess
import sys

CACHE_GRID = {
    "lmsys": [1, 2, 3, 4, 5, 10],
    "sharegpt": [1, 2, 3, 4, 5, 10],
    "swebench": [40, 60, 80, 100],
    "mooncake": [25, 50, 100, 200],
}
POLICIES = ["vllm-plus", "sglang-plus", "marconi", "marconi-k15"]
ALLOCATORS = ["padded-unified", "fixed-dual:0.5", "fixed-dual:0.9", "avmp-static:0.5",
              "avmp-dynamic", "avmp-dynamic-paper"]
ALLOC_WORKLOADS = ["uniform_short", "mixed_long", "agentic_burst", "sharegpt_replay"]
ALLOC_MODELS = ["jamba-1.5-mini", "zamba2-7b"]
ALLOC_POOLS = [4, 8]
SEEDS = [1, 2, 3]


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cache_sweep(args):
    rows = []
    for workload, caps in CACHE_GRID.items():
        source = (["--trace", args.mooncake] if workload == "mooncake" else
                  ["--workload", workload, "--seed", "42"])
        for cap in caps:
            for policy in POLICIES:
                per_req = os.path.join(args.out, f"per_request_{workload}_{cap}_{policy}.jsonl")
                # marconi-k15: Marconi with the bootstrap window Marconi's artifact used for
                # lmsys (15x instead of the default 5x).
                extra = ["--bootstrap-multiplier", "15"] if policy == "marconi-k15" else []
                cmd = [args.tandem, "simulate", *source, "--model-spec", "marconi-7b",
                       "--capacity-gb", str(cap), "--policy", policy.split("-k")[0], *extra,
                       "--json"]
                if cap == caps[len(caps) // 2]:
                    cmd += ["--per-request-out", per_req]
                r = run(cmd)
                r.update(workload=workload, capacity_gb=cap, policy=policy)
                rows.append(r)
                print(workload, cap, policy, f"{r['token_hit_rate']:.4f}", file=sys.stderr)
    return rows


def alloc_sweep(args):
    rows = []
    for model in ALLOC_MODELS:
        for pool in ALLOC_POOLS:
            for workload in ALLOC_WORKLOADS:
                for allocator in ALLOCATORS:
                    for seed in args.seeds:
                        r = run([args.tandem, "simulate-alloc", "--workload", workload,
                                 "--allocator", allocator, "--pool-gib", str(pool),
                                 "--model-spec", model, "--seed", str(seed), "--json"])
                        r.update(model=model, pool_gib=pool, workload=workload,
                                 allocator=allocator, seed=seed)
                        rows.append(r)
    return rows


SEED_CHECK = {"seeds": [42, 43, 44, 45, 46], "workloads": ["lmsys", "sharegpt"],
              "capacities": [1, 2, 3, 5, 10]}


def seed_check(args):
    """marconi ÷ sglang-plus token hit rate over more seeds than the main table's one."""
    ratios = []
    for seed in SEED_CHECK["seeds"]:
        for workload in SEED_CHECK["workloads"]:
            for cap in SEED_CHECK["capacities"]:
                hit = {}
                for policy in ["sglang-plus", "marconi"]:
                    hit[policy] = run([args.tandem, "simulate", "--workload", workload, "--seed",
                                       str(seed), "--model-spec", "marconi-7b", "--capacity-gb",
                                       str(cap), "--policy", policy, "--json"])["token_hit_rate"]
                ratios.append((seed, workload, cap, hit["marconi"] / hit["sglang-plus"]))
    geo = math.exp(sum(math.log(r[3]) for r in ratios) / len(ratios))
    losses = [r for r in ratios if r[3] < 1]
    print(f"seed check: {len(ratios)} cells, geometric mean marconi ÷ sglang-plus {geo:.3f}, "
          f"{len(losses)} below 1: " +
          ", ".join(f"{w} {c} GB seed {s} {r:.2f}×" for s, w, c, r in losses))


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def print_tables(cache_rows, alloc_rows):
    if cache_rows:
        by = {(r["workload"], r["capacity_gb"], r["policy"]): r for r in cache_rows}
        print("| workload | GB | vllm-plus | sglang-plus | marconi (α final) | "
              "marconi k=15 (α final) | marconi ÷ vllm-plus | marconi ÷ sglang-plus | "
              "P95 per-request hit: sglang-plus / marconi |")
        print("|---|---|---|---|---|---|---|---|---|")
        for workload, caps in CACHE_GRID.items():
            for cap in caps:
                v, g, m, k = (by[(workload, cap, p)] for p in POLICIES)
                hv, hg, hm = v["token_hit_rate"], g["token_hit_rate"], m["token_hit_rate"]
                over_v = f"{hm / hv:.1f}×" if hv > 0 else "∞ (vllm-plus 0)"
                over_g = f"{hm / hg:.2f}×" if hg > 0 else "–"
                print(f"| {workload} | {cap} | {hv:.4f} | {hg:.4f} | {hm:.4f} ({m['alpha_final']:.1f}) "
                      f"| {k['token_hit_rate']:.4f} ({k['alpha_final']:.1f}) | {over_v} | {over_g} "
                      f"| {g['hit_rate_p95']:.3f} / {m['hit_rate_p95']:.3f} |")
        print()
        print("| workload | GB | vllm-plus | sglang-plus | marconi | marconi k=15 |")
        print("|---|---|---|---|---|---|")
        for workload, caps in CACHE_GRID.items():
            for cap in caps:
                cells = " | ".join(f"{by[(workload, cap, p)]['flops_saved'] / 1e15:.2f}"
                                   for p in POLICIES)
                print(f"| {workload} | {cap} | {cells} |")
        print()
    if alloc_rows:
        def cell(model, pool, workload, allocator, key):
            return mean(r[key] for r in alloc_rows
                        if (r["model"], r["pool_gib"], r["workload"], r["allocator"]) ==
                        (model, pool, workload, allocator))

        def summed(workload, allocator, key):
            return sum(cell(m, p, workload, allocator, key)
                       for m in ALLOC_MODELS for p in ALLOC_POOLS)

        print("| allocator | " + " | ".join(ALLOC_WORKLOADS) +
              " | total of first 3 | migrations (sum) | peak reserved ÷ budget |")
        print("|---" * (len(ALLOC_WORKLOADS) + 4) + "|")
        for a in ALLOCATORS:
            ooms = [summed(w, a, "oom_events") for w in ALLOC_WORKLOADS]
            migs = sum(summed(w, a, "migrations") for w in ALLOC_WORKLOADS)
            peak = max(r["peak_reserved_bytes"] / (r["pool_gib"] * 2**30)
                       for r in alloc_rows if r["allocator"] == a)
            print(f"| {a} | " + " | ".join(f"{o:.0f}" for o in ooms) +
                  f" | {sum(ooms[:3]):.0f} | {migs:.0f} | {peak:.3f} |")
        print()
        print("| allocator | " + " | ".join(ALLOC_WORKLOADS) + " |")
        print("|---" * (len(ALLOC_WORKLOADS) + 1) + "|")
        for a in ALLOCATORS:
            gp = [mean(cell(m, p, w, a, "goodput") for m in ALLOC_MODELS for p in ALLOC_POOLS)
                  for w in ALLOC_WORKLOADS]
            print(f"| {a} | " + " | ".join(f"{g:.3f}" for g in gp) + " |")
        print()
        print("| model | GiB | allocator | " + " | ".join(ALLOC_WORKLOADS) + " |")
        print("|---" * (len(ALLOC_WORKLOADS) + 3) + "|")
        for m in ALLOC_MODELS:
            for p in ALLOC_POOLS:
                for a in ALLOCATORS:
                    print(f"| {m} | {p} | {a} | " +
                          " | ".join(f"{cell(m, p, w, a, 'oom_events'):.0f}"
                                     for w in ALLOC_WORKLOADS) + " |")
        print()


def plots(out, cache_rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots", file=sys.stderr)
        return
    for metric in ["token_hit_rate", "flops_saved"]:
        fig, axes = plt.subplots(1, len(CACHE_GRID), figsize=(4 * len(CACHE_GRID), 3.2))
        for ax, workload in zip(axes, CACHE_GRID):
            for policy in POLICIES:
                pts = [(r["capacity_gb"], r[metric]) for r in cache_rows
                       if r["workload"] == workload and r["policy"] == policy]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=policy)
            ax.set_title(workload)
            ax.set_xlabel("capacity (GB)")
            ax.set_ylabel(metric)
        axes[0].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{metric}.png"), dpi=110)
        plt.close(fig)
    # Hit rate by input length (the paper's Fig. 10a), at each workload's middle capacity.
    bins = [0, 1000, 2000, 4000, 8000, 16000, 32000, 10**9]
    labels = ["<1k", "1-2k", "2-4k", "4-8k", "8-16k", "16-32k", ">32k"]
    fig, axes = plt.subplots(1, len(CACHE_GRID), figsize=(4 * len(CACHE_GRID), 3.2))
    for ax, (workload, caps) in zip(axes, CACHE_GRID.items()):
        cap = caps[len(caps) // 2]
        for k, policy in enumerate(POLICIES):
            path = os.path.join(out, f"per_request_{workload}_{cap}_{policy}.jsonl")
            hit = [0.0] * (len(bins) - 1)
            tot = [0.0] * (len(bins) - 1)
            with open(path) as f:
                for line in f:
                    d = json.loads(line)
                    for b in range(len(bins) - 1):
                        if bins[b] <= d["input_tokens"] < bins[b + 1]:
                            hit[b] += d["hit_rate"] * d["input_tokens"]
                            tot[b] += d["input_tokens"]
            rate = [h / t if t else 0 for h, t in zip(hit, tot)]
            ax.bar([x + 0.2 * (k - 1.5) for x in range(len(rate))], rate, width=0.2, label=policy)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45)
        ax.set_title(f"{workload} @ {cap} GB")
        ax.set_ylabel("token hit rate")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "hit_rate_by_input_length.png"), dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", required=True, help="path to the tandem binary")
    p.add_argument("--mooncake", default="../shared/traces/mooncake_synthetic_trace.jsonl")
    p.add_argument("--out", default="tools/cache/results")
    p.add_argument("--skip-alloc", action="store_true")
    p.add_argument("--skip-cache", action="store_true")
    p.add_argument("--tables-only", action="store_true",
                   help="print the tables from the JSON in --out; run nothing")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                   help="allocator grid seeds, comma-separated")
    p.add_argument("--seed-check", action="store_true",
                   help="only compare marconi with sglang-plus over several seeds")
    args = p.parse_args()
    args.seeds = [int(x) for x in args.seeds.split(",")]
    if args.seed_check:
        seed_check(args)
        return
    os.makedirs(args.out, exist_ok=True)
    cache_path = os.path.join(args.out, "cache_sweep.json")
    alloc_path = os.path.join(args.out, "alloc_sweep.json")
    run_cache = not (args.skip_cache or args.tables_only)
    run_alloc = not (args.skip_alloc or args.tables_only)
    if run_cache:
        cache_rows = cache_sweep(args)
        with open(cache_path, "w") as f:
            json.dump(cache_rows, f, indent=1)
    if run_alloc:
        alloc_rows = alloc_sweep(args)
        with open(alloc_path, "w") as f:
            json.dump(alloc_rows, f, indent=1)
    cache_rows = alloc_rows = []
    if os.path.exists(cache_path):
        with open(cache_path) as f:
            cache_rows = json.load(f)
    if os.path.exists(alloc_path):
        with open(alloc_path) as f:
            alloc_rows = json.load(f)
    print_tables(cache_rows, alloc_rows)
    if run_cache:
        plots(args.out, cache_rows)


if __name__ == "__main__":
    main()
