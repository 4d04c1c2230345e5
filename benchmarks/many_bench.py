"""Many models: the time of compare_all (Tukey's HSD and the randomized Tukey HSD) and anova on a
sweep of 20 models over 100,000 queries, and the simulation table of issue 27.

    python benchmarks/many_bench.py [--models 20] [--queries 100000] [--resamples 1000] [--sims 500]

Per-query values are simulated (a query effect, a model effect, noise), as tests/test_many.py does.
The simulation table: over ``--sims`` null sweeps (5 models alike, 100 queries), how often each test
rejects some pair (the family-wise error, 5% promised), and for a paired t-test at
queries_needed(...) queries, the power observed over fresh studies (80% promised).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

import topkeval as tk


def sweep(X: np.ndarray) -> tk.Results:
    n, m = X.shape
    frame = pd.DataFrame({"model": np.repeat([f"m{j:02d}" for j in range(m)], n), "query": np.tile(np.arange(n), m),
                          "ap": X.T.ravel()})
    return tk.Results.from_per_query(frame)


def simulated(n, m, effects, rng):
    return rng.normal(0.4, 0.15, (n, 1)) + np.asarray(effects)[None, :] + rng.normal(0, 0.1, (n, m))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--sims", type=int, default=500)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    res = sweep(simulated(args.queries, args.models, np.linspace(0, 0.02, args.models), rng))
    sweep(simulated(50, 3, [0, 0, 0], rng)).compare_all(test="randomized_tukey", n_resamples=100)  # compile
    for name, call in (("anova", lambda: res.anova("ap")),
                       ("compare_all tukey", lambda: res.compare_all(test="tukey")),
                       (f"compare_all randomized_tukey ({args.resamples} resamples)",
                        lambda: res.compare_all(test="randomized_tukey", n_resamples=args.resamples))):
        t0 = time.perf_counter()
        call()
        print(f"{name}, {args.models} models x {args.queries:,} queries: {time.perf_counter() - t0:.2f} s")

    rejected = {"tukey": 0, "randomized_tukey": 0}
    for s in range(args.sims):
        null = sweep(simulated(100, 5, np.zeros(5), np.random.default_rng(10_000 + s)))
        for test in rejected:
            rejected[test] += null.compare_all(test=test, n_resamples=1000, seed=s)["significant"].any()
    # a pilot large enough that its variance is the true one: the check is of the sizing itself
    pilot = sweep(np.column_stack([np.zeros(20_000), np.random.default_rng(1).normal(0.02, 0.08, 20_000)]))
    need = int(pilot.queries_needed("ap", delta=0.02).iloc[0]["queries_needed"])
    hits = sum(stats.ttest_1samp(np.random.default_rng(2 + s).normal(0.02, 0.08, need), 0).pvalue < 0.05
               for s in range(args.sims))
    print(f"\n| check ({args.sims} simulations) | promised | observed |\n|---|---|---|")
    for test, count in rejected.items():
        print(f"| {test}: some pair rejected, 5 models alike over 100 queries | 5% | {count / args.sims:.1%} |")
    print(f"| paired t-test at queries_needed = {need} queries (delta 0.02, sd 0.08) | 80% | {hits / args.sims:.1%} |")


if __name__ == "__main__":
    main()
