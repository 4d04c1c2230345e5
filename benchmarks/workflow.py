"""From file to decision (issue 24): each step after the evaluation, as a ratio to the evaluate call.

    python benchmarks/workflow.py [--queries 36000] [--resamples 10000] [--rows 10000000]

In one process, on the same log (``--queries`` queries of 40 candidates, 2 models, 4 metrics),
each step timed as the best of ``--repeat`` runs, side by side:

* evaluate: ``tk.evaluate`` of the table in memory (the unit of every ratio);
* compare: ``Results.compare`` with ``--resamples`` resamples (permutation test, bootstrap intervals);
* summary_ci: ``Results.summary_ci`` with as many resamples;
* report: ``Results.report`` to a temporary file (its statistics, curves and figures);
* parquet: a ``--rows`` parquet file to means (``tk.evaluate(path)``: reading included), against
  ``pyarrow.parquet.read_table`` of the same four columns; the two alternate, ``--repeat`` times
  each (at least 5), and the ratio is of the medians (the best of each is printed too).
* the command line as a new user runs it (``--cli-queries`` queries, a segment column): ``topkeval
  compare --by`` and ``topkeval report``, whole processes (start-up included).

The report's own steps (``topkeval.outputs.html.LAST_TIMINGS``) are printed below the table.

The TREC files (``benchmarks/trec_bench.py``) and the first call after installation
(``benchmarks/first_call.py``) run in processes of their own, and so in scripts of their own.
Goals of issue 24: compare <= 3x, report <= 6x, parquet <= 1.5x reading.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOPKEVAL_JIT", "1")

import numpy as np
import pandas as pd

import topkeval as tk

METRICS = ["recall@20", "precision@20", "ndcg@10", "r_precision"]


def make_log(queries: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 40
    rows = queries * n
    rel = (rng.random(rows) < 0.1).astype(np.int8)
    latent = rel + rng.normal(size=rows)
    return pd.DataFrame({"query": np.repeat(np.arange(queries), n), "relevance": rel,
                         "old": latent + rng.normal(scale=1.5, size=rows),
                         "new": latent + rng.normal(scale=1.4, size=rows)})


def best(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=36_000)
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cli-queries", type=int, default=100_000, help="queries of the CLI steps (0: skip them)")
    args = p.parse_args()
    frame = make_log(args.queries)
    res = tk.evaluate(frame, METRICS, score=["old", "new"])  # warm: compiled kernels loaded
    res.compare(baseline="old", n_resamples=200)
    steps = {}
    steps["evaluate"] = best(lambda: tk.evaluate(frame, METRICS, score=["old", "new"]), args.repeat)
    # each repeat on fresh Results: Results memoize compare and summary_ci by their arguments
    steps["compare"] = best(lambda: tk.Results(res.evaluation).compare(baseline="old", n_resamples=args.resamples),
                            args.repeat)
    steps["summary_ci"] = best(lambda: tk.Results(res.evaluation).summary_ci(n_resamples=args.resamples), args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(1000))
        # matplotlib imported once (about 0.3 s, once per process; the CLI steps below include it)
        tk.evaluate(make_log(50), METRICS, score=["old", "new"]).report(Path(tmp) / "warm.html", n_resamples=100)
        fresh = tk.evaluate(frame, METRICS, score=["old", "new"])  # nothing computed yet: the report does it all
        steps["report"] = best(lambda: fresh.report(Path(tmp) / f"r{next(counter)}.html", baseline="old",
                                                    n_resamples=args.resamples), 1)
        from topkeval.outputs.html import LAST_TIMINGS

        sections = dict(LAST_TIMINGS)
        big = make_log(args.rows // 40, seed=1)
        path = Path(tmp) / "log.parquet"
        big.to_parquet(path)
        del big
        import pyarrow.parquet as pq

        times: dict[str, list[float]] = {"read": [], "means": []}
        calls = {"read": lambda: pq.read_table(path, columns=["query", "relevance", "old", "new"]),
                 "means": lambda: tk.evaluate(str(path), METRICS, score=["old", "new"])}
        calls["means"]()  # the file's first read (page cache) and the kernels of its types, outside the timing
        for _ in range(max(args.repeat, 5)):  # alternating: both see the same load of the machine
            for name, call in calls.items():
                times[name].append(best(call, 1))
        read, to_means = (statistics.median(times[n]) for n in ("read", "means"))
        best_read, best_means = min(times["read"]), min(times["means"])
        cli = {}
        if args.cli_queries:
            import subprocess
            import sys

            log = make_log(args.cli_queries, seed=2)
            log["segment"] = np.where(log["query"] % 3 == 0, "head", "tail")
            log.to_parquet(Path(tmp) / "cli.parquet")
            base = [sys.executable, "-m", "topkeval"]
            common = [str(Path(tmp) / "cli.parquet"), "--score", "old", "--score", "new", "--baseline", "old",
                      *sum((["-m", m] for m in METRICS), [])]
            for name, argv in (("CLI compare --by", base + ["compare", *common, "--by", "segment"]),
                               ("CLI report", base + ["report", *common, "-o", str(Path(tmp) / "cli.html")])):
                t0 = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True)
                cli[name] = time.perf_counter() - t0
    unit = steps["evaluate"]
    print(f"| step ({args.queries:,} queries, 2 models, 4 metrics) | seconds | ratio to evaluate | goal |")
    print("|---|---|---|---|")
    goals = {"evaluate": "", "compare": "<= 3x", "summary_ci": "", "report": "<= 6x"}
    for name, seconds in steps.items():
        print(f"| {name} | {seconds:.3f} | {seconds / unit:.1f}x | {goals[name]} |")
    print(f"| parquet file to means, {args.rows:,} rows (median) | {to_means:.3f} | {to_means / read:.2f}x reading "
          f"the columns ({read:.3f} s) | <= 1.5x |")
    print(f"| parquet file to means, best of {len(times['read'])} | {best_means:.3f} | {best_means / best_read:.2f}x "
          f"reading the columns ({best_read:.3f} s) | |")
    for name, seconds in cli.items():
        print(f"| {name}, {args.cli_queries:,} queries, whole process | {seconds:.2f} | | a few seconds |")
    print("\nreport steps: " + ", ".join(f"{k} {v:.3f} s" for k, v in sections.items() if v >= 0.001))


if __name__ == "__main__":
    main()
