#!/usr/bin/env python3
"""Summarises a Google Benchmark JSON file written with --benchmark_repetitions=N: for each
benchmark, the repetition with the lowest real time (the least disturbed by other processes on a
shared machine), as a Markdown table."""
import json
import sys


def main(path):
    with open(path) as f:
        data = json.load(f)
    best = {}
    order = []
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"]
        if name not in best:
            order.append(name)
        if name not in best or b["real_time"] < best[name]["real_time"]:
            best[name] = b
    skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
            "iterations", "real_time", "cpu_time", "time_unit", "label", "family_index",
            "per_family_instance_index", "aggregate_name", "aggregate_unit", "error_occurred",
            "error_message"}
    print("| benchmark | label | real time | main-thread CPU | rate |")
    print("|---|---|---:|---:|---:|")
    for name in order:
        b = best[name]
        unit = b.get("time_unit", "ns")
        rates = ", ".join(f"{k} {v:.3g}" for k, v in b.items()
                          if k not in skip and isinstance(v, (int, float)))
        short = name.replace("/real_time", "")
        print(f"| {short} | {b.get('label', '')} | {b['real_time']:.4g} {unit} | "
              f"{b['cpu_time']:.4g} {unit} | {rates} |")


if __name__ == "__main__":
    main(sys.argv[1])
