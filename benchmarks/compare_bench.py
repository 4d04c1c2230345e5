"""How long a comparison takes: 3 models x 10 metrics over 100k queries, 10,000 resamples.

    python benchmarks/compare_bench.py [--queries 100000] [--resamples 10000]

The per-query values come from a real evaluate() of a synthetic log (100k queries of 40
candidates); the timing covers Results.compare (bootstrap intervals for every row plus the
chosen test and Holm's correction) and nothing else.
"""

from __future__ import annotations

import os

os.environ.setdefault("TOPKEVAL_JIT", "1")  # warm-ups are small: load the compiled kernels there

import argparse
import time

import numpy as np
import pandas as pd

import topkeval as tk

METRICS = [f"{m}@{k}" for m in ("recall", "precision", "f1") for k in (5, 10, 20)] + ["r_precision"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--resamples", type=int, default=10_000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    n = 40
    rows = args.queries * n
    rel = (rng.random(rows) < 0.1).astype(np.int8)
    latent = rel + rng.normal(size=rows)
    frame = pd.DataFrame({"query": np.repeat(np.arange(args.queries), n), "relevance": rel,
                          "old": latent + rng.normal(scale=1.5, size=rows),
                          "new": latent + rng.normal(scale=1.4, size=rows),
                          "newer": latent + rng.normal(scale=1.2, size=rows)})
    res = tk.evaluate(frame, metrics=METRICS, score=["old", "new", "newer"])
    print(f"{res.info['evaluated']:,} queries, {len(METRICS)} metrics, 3 models, {args.resamples:,} resamples")
    for test in ("permutation", "t", "wilcoxon", "bootstrap"):
        t = time.perf_counter()
        table = res.compare(baseline="old", test=test, correction="holm", n_resamples=args.resamples, seed=0)
        print(f"compare(test={test!r:14s}) {time.perf_counter() - t:6.2f} s   ({len(table)} rows)")
    t = time.perf_counter()
    res.summary_ci(n_resamples=args.resamples)
    print(f"summary_ci()                   {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()
