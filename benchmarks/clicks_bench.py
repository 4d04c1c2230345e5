"""Clicks are not relevance: the simulation table and the cost of inverse propensity weighting.

    python benchmarks/clicks_bench.py                # the table (20,000 queries) and 10M rows timed
    python benchmarks/clicks_bench.py --rows 1000000 --reps 50

1. A position-based click log (``topkeval.demo.click_log``: 20 candidates per query, all shown by the
   old ranker, examination 1/position): per metric, the truth (true relevance), the naive number
   (clicks as relevance) and the estimate (IPS sums, ratios pooled over the queries), each with its
   distance from the truth in standard errors, and over ``--reps`` fresh logs of 2,000 queries how
   often the 95% bootstrap interval (summary_ci) covers the population's truth. (The full simulation
   table, with rankers that are not the logging one and their comparisons, is
   benchmarks/clicks_simulation.py.)
2. The examination curve recovered by estimate_position_bias from a two-arm log.
3. The time of an IPS evaluation against a plain one on ``--rows`` rows with text query and item
   ids, ``item=`` given (best of 3, side by side in one process), as a ratio.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=20_000)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--rows", type=int, default=10_000_000)
    args = p.parse_args()
    import topkeval as tk
    from topkeval.demo import click_log

    curve = {k: 1.0 / k for k in range(1, 21)}
    keep = dict(empty_queries="keep", undefined="nan")
    metrics = ["precision@10", "dcg@10", "recall_micro@10", "f1_micro@10"]
    ones = {k: 1.0 for k in range(1, 21)}  # every weight 1: the pooled ratios of the truth and of the clicks
    log = click_log(args.queries, seed=1)
    truth = tk.evaluate(log, metrics, relevance="relevant", score="new_ranker", position="position", propensity=ones)
    naive = tk.evaluate(log, metrics, relevance="click", score="new_ranker", position="position", propensity=ones)
    ips = tk.evaluate(log, metrics, relevance="click", score="new_ranker", position="position", propensity=curve)
    population = tk.evaluate(click_log(200_000, seed=999), metrics, relevance="relevant", score="new_ranker",
                             position="position", propensity=ones).summary.iloc[0]
    covered = dict.fromkeys(metrics, 0)
    for rep in range(args.reps):
        small = click_log(2000, seed=10_000 + rep)
        ci = tk.evaluate(small, metrics, relevance="click", score="new_ranker", position="position",
                         propensity=curve).summary_ci(n_resamples=1000, seed=rep).set_index("metric")
        for m in metrics:
            covered[m] += ci.loc[m, "ci_low"] <= population[m] <= ci.loc[m, "ci_high"]
    print(f"| metric | estimator | truth | naive (SE off) | estimate (SE off) | 95% CI coverage ({args.reps} logs) |")
    print("|---|---|---|---|---|---|")
    for m in metrics:
        t = truth.summary.iloc[0][m]
        v = ips.per_query[m].dropna()
        se = v.std(ddof=1) / np.sqrt(len(v))
        nv, iv = naive.summary.iloc[0][m], ips.summary.iloc[0][m]
        print(f"| {m} | {ips.info['ips']['estimators'][m]} | {t:.4f} | {nv:.4f} ({(nv - t) / se:+.1f}) | "
              f"{iv:.4f} ({(iv - t) / se:+.1f}) | {covered[m] / args.reps:.1%} |")
    print(f"\neffective sample size {ips.info['ips']['effective_sample_size']:.0f} of {ips.info['ips']['clicks']} clicks")

    impressions = click_log(args.queries, arms=2, seed=2)
    t0 = time.perf_counter()
    bias = tk.estimate_position_bias(impressions, item="image", n_resamples=200)
    took = time.perf_counter() - t0
    err = np.abs(bias.curve["propensity"].loc[1:10].to_numpy() - 1 / np.arange(1, 11))
    print(f"\nestimate_position_bias ({len(impressions):,} impressions, 200 resamples, {took:.1f} s): "
          f"largest error at positions 1-10 {err.max():.4f}")
    print(bias.curve.head(10).round(4).to_string())

    queries = args.rows // 20
    timed = ["precision@10", "dcg@10"]  # the same sums, on the clicks as they are and weighted
    import pandas as pd

    for shown in (20, 10):  # every candidate shown; half of them never shown (the note on them is computed too)
        big = click_log(queries, shown=shown, seed=3)
        # the call users make: text query and item ids, item= given
        for column, prefix in (("query", "q"), ("image", "img")):
            big[column] = pd.Series(np.char.add(prefix, big[column].to_numpy().astype(str)), dtype="string[pyarrow]")
        plain_t, ips_t = [], []
        warnings.simplefilter("ignore", tk.TopkevalWarning)  # the never-shown candidates: said once is enough
        for _ in range(3):
            t0 = time.perf_counter()
            tk.evaluate(big, timed, relevance="click", score="new_ranker", item="image", **keep)
            plain_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tk.evaluate(big, timed, relevance="click", score="new_ranker", item="image", position="position",
                        propensity=curve)
            ips_t.append(time.perf_counter() - t0)
        print(f"\n{len(big):,} rows, {shown} of 20 candidates shown: plain {min(plain_t):.3f} s, IPS "
              f"{min(ips_t):.3f} s: {min(ips_t) / min(plain_t):.2f}x")
        del big


if __name__ == "__main__":
    main()
