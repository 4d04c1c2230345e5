"""An estimated examination curve, its intervals, bounds and the small-sample bootstrap, by simulation.

    python benchmarks/position_bias_simulation.py curve --reps 200       # section 1
    python benchmarks/position_bias_simulation.py ips --reps 200         # section 2
    python benchmarks/position_bias_simulation.py bounds --reps 300      # section 3
    python benchmarks/position_bias_simulation.py bootstrap --reps 2000  # section 4
    python benchmarks/position_bias_simulation.py weighted --reps 1000   # section 5

The click simulator is tests/test_position_bias.py's (position-based clicks, examination
1 / position, 20 candidates per query all shown; rankers A and A2 alike, B much better, B2 slightly
better than A; the curve estimated from two arms of 2,000 queries, the tutorial's size). Each section
prints a markdown table (docs/how-to/clicks-curve.md shows them):

1. ``curve``: estimate_position_bias per position over repeated logs: mean, bias (in % and in
   standard errors of one estimate), and the coverage of its 95% intervals; beside it the solver
   before this version (log ratios of pairwise click sums, solved by weighted least squares, the
   position pairs without a click at one end dropped), reimplemented here.
2. ``ips``: IPS precision@10 and dcg@10 with the curve known, estimated (``propensity=bias``: the
   intervals fit the curve again on resampled queries), estimated but taken as known
   (``propensity=bias.propensities``), and estimated from the evaluated log itself: bias, 95%
   interval coverage of the population's truth, the share of logs where B2 (truly better) is
   declared significantly worse than A, and where A2 (alike) differs significantly from A.
3. ``bounds``: logs where the bounds' model holds (every shown candidate examined, the bottom ones
   never shown): how often lower <= upper and the truth is inside, per metric and empty_queries rule.
4. ``bootstrap``: the type-I error of compare's test="bootstrap" (studentized) at a 5% level by
   number of queries, against the shifted-percentile test it replaced (computed here) and the
   permutation test.
5. ``weighted``: the coverage of summary_ci's 95% interval of a weighted mean at few queries.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import topkeval as tk  # noqa: E402
from test_position_bias import RANKERS, TRUE_CURVE, arms_log, evaluation_log, population_truth  # noqa: E402


def old_solver(log: pd.DataFrame) -> pd.Series:
    """The curve as estimate_position_bias computed it before: per pair of positions j < k, the
    click sums of the (query, item) pairs shown at both, ``rho = log(sum_j / sum_k)`` kept only where
    both sums are positive, solved by least squares weighted ``1 / (1/c_j + 1/c_k)`` with p_1 = 1."""
    agg = log.groupby(["query", "item", "position"], as_index=False)["click"].sum()
    both = agg.merge(agg, on=["query", "item"], suffixes=("_j", "_k"))
    both = both[both["position_j"] < both["position_k"]]
    eq = both.groupby(["position_j", "position_k"])[["click_j", "click_k"]].sum().reset_index()
    eq = eq[(eq["click_j"] > 0) & (eq["click_k"] > 0)]
    rho = np.log(eq["click_j"] / eq["click_k"]).to_numpy()
    weight = 1 / (1 / eq["click_j"] + 1 / eq["click_k"]).to_numpy()
    positions = np.unique(np.concatenate([eq["position_j"], eq["position_k"]]))
    at = {p: i for i, p in enumerate(positions)}
    A = np.zeros((len(eq), len(positions)))
    A[np.arange(len(eq)), [at[p] for p in eq["position_j"]]] = 1
    A[np.arange(len(eq)), [at[p] for p in eq["position_k"]]] = -1
    theta, *_ = np.linalg.lstsq(A[:, 1:] * np.sqrt(weight)[:, None], rho * np.sqrt(weight), rcond=None)
    return pd.Series(np.exp(np.concatenate([[0.0], theta])), index=positions)


def curve(reps: int, resamples: int) -> None:
    true_p = np.array(list(TRUE_CURVE.values()))
    new, old, covered = [], [], []
    for rep in range(reps):
        log = arms_log(np.random.default_rng(rep), 2000)
        bias = tk.estimate_position_bias(log, n_resamples=resamples, seed=rep)
        c = bias.curve.reindex(range(1, 21))
        new.append(c["propensity"].to_numpy())
        covered.append(((c["low"] <= true_p) & (true_p <= c["high"])).to_numpy())
        old.append(old_solver(log).reindex(range(1, 21)).to_numpy())
    new, old, covered = np.array(new), np.array(old), np.array(covered)
    print(f"| position | truth | mean (before) | bias (before) | bias / SE (before) | mean | bias | bias / SE | "
          f"95% interval covers ({reps} logs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for j in range(1, 20):
        t = true_p[j]
        cells = []
        for est in (old, new):
            m, sd = np.nanmean(est[:, j]), np.nanstd(est[:, j], ddof=1)
            cells += [f"{m:.4f}", f"{m / t - 1:+.1%}", f"{(m - t) / sd:+.2f}"]
        print(f"| {j + 1} | {t:.4f} | {' | '.join(cells)} | {covered[:, j].mean():.1%} |")


def ips(reps: int, resamples: int) -> None:
    truth = population_truth()
    metrics = ["precision@10", "dcg@10"]
    records = []
    for rep in range(reps):
        rng = np.random.default_rng(10_000 + rep)
        arms = arms_log(rng, 2000)
        log = evaluation_log(rng, 2000)
        bias = tk.estimate_position_bias(arms, n_resamples=0)
        # one log for both: the curve from the evaluated log's own impressions (two arms of it)
        position, click = _second_arm(rng, log)
        own = pd.concat([log.assign(arm=0), log.assign(arm=1, position=position, click=click)], ignore_index=True)
        own_bias = tk.estimate_position_bias(own, n_resamples=0)
        settings = {"known curve": TRUE_CURVE, "estimated curve": bias, "estimated, taken as known": bias.propensities,
                    "estimated from the evaluated log": own_bias}
        for setting, propensity in settings.items():
            res = tk.evaluate(log, metrics, relevance="click", score=list(RANKERS), item="item", position="position",
                              propensity=propensity)
            ci = res.summary_ci(n_resamples=resamples, seed=rep)
            for r in ci.itertuples():
                records.append(dict(setting=setting, what=f"{r.model} {r.metric}", estimate=r.mean,
                                    covered=r.ci_low <= truth[r.model][r.metric] <= r.ci_high,
                                    truth=truth[r.model][r.metric]))
            for test in ("permutation", "bootstrap"):
                table = res.compare(baseline="A", test=test, n_resamples=resamples, seed=rep, correction=None)
                for r in table.itertuples():
                    true_delta = truth[r.model][r.metric] - truth["A"][r.metric]
                    records.append(dict(setting=setting, what=f"{r.model} - A {r.metric} ({test})", estimate=r.delta,
                                        covered=r.ci_low <= true_delta <= r.ci_high, truth=true_delta,
                                        worse=r.verdict == "worse", significant=bool(r.significant)))
        if (rep + 1) % 10 == 0:
            print(f"{rep + 1} logs", file=sys.stderr, flush=True)
    _ips_table(pd.DataFrame(records), reps)


def _ips_table(frame: pd.DataFrame, reps: int) -> None:
    out = frame.groupby(["setting", "what"], sort=False).agg(
        truth=("truth", "first"), mean=("estimate", "mean"), sd=("estimate", "std"), covered=("covered", "mean"),
        worse=("worse", "mean"), significant=("significant", "mean"))
    print(f"| setting | estimate | truth | bias (in SD) | 95% interval covers ({reps} logs) | significantly worse | "
          "significant |")
    print("|---|---|---|---|---|---|---|")
    for (setting, what), r in out.iterrows():
        worse = f"{r.worse:.1%}" if "B2 - A" in what else ""
        significant = f"{r.significant:.1%}" if "A2 - A" in what else ""
        print(f"| {setting} | {what} | {r.truth:.4f} | {(r['mean'] - r.truth) / r.sd:+.2f} | {r.covered:.1%} | {worse} | "
              f"{significant} |")


def _second_arm(rng, log: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A second variant of the logging ranker on the evaluated log's queries: its positions and its
    clicks (examination 1 / position, as the simulator's)."""
    relevant = log["relevant"].to_numpy().reshape(-1, 20).astype(bool)
    score = 0.5 * relevant + rng.normal(size=relevant.shape)
    position = np.argsort(np.argsort(-score, axis=1), axis=1) + 1
    click = relevant & (rng.random(relevant.shape) < 1.0 / position)
    return position.ravel(), click.ravel().astype(np.int8)


def bounds(reps: int) -> None:
    metrics = ["precision@10", "hit_rate@10", "rr@10", "recall@10", "dcg@10"]
    rules = {"skip": dict(empty_queries="skip"), "keep": dict(empty_queries="keep", undefined="nan")}
    records = []
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        q, n, shown = 200, 20, 8
        relevant = rng.random((q, n)) < rng.beta(1.0, 8.0, q)[:, None]  # few relevant: queries without a click
        logger = np.argsort(np.argsort(-(0.5 * relevant + rng.normal(size=(q, n))), axis=1), axis=1) + 1
        position = np.where(logger <= shown, logger, np.nan)  # every shown candidate examined: clicks = relevance
        frame = pd.DataFrame({"query": np.repeat(np.arange(q), n), "item": np.tile(np.arange(n), q),
                              "relevant": relevant.ravel().astype(int),
                              "click": (relevant & (logger <= shown)).ravel().astype(int),
                              "position": position.ravel(), "new": (relevant + rng.normal(size=(q, n))).ravel()})
        for rule, conventions in rules.items():
            truth = tk.evaluate(frame, metrics, relevance="relevant", score="new", **conventions).summary.iloc[0]
            b = tk.evaluate(frame, metrics, relevance="click", score="new", position="position",
                            **conventions).bounds()
            for m in metrics:
                row = b.loc[("new", m)]
                records.append(dict(rule=rule, metric=m, ordered=row["lower"] <= row["upper"],
                                    inside=row["lower"] - 1e-12 <= truth[m] <= row["upper"] + 1e-12,
                                    width=row["upper"] - row["lower"]))
    out = pd.DataFrame(records).groupby(["rule", "metric"], sort=False).agg(
        ordered=("ordered", "mean"), inside=("inside", "mean"), width=("width", "mean"))
    print(f"| empty_queries | metric | lower <= upper ({reps} logs) | truth inside | mean width |")
    print("|---|---|---|---|---|")
    for (rule, m), r in out.iterrows():
        print(f"| {rule} | {m} | {r.ordered:.1%} | {r.inside:.1%} | {r.width:.4f} |")


def bootstrap(reps: int, resamples: int) -> None:
    from test_compare import _results  # noqa: F401  (the same helper as the tests)

    rng = np.random.default_rng(0)
    kinds = {"normal": lambda size: rng.normal(0, 0.2, size),
             "precision-like": lambda size: rng.choice([-0.2, -0.1, 0.0, 0.1, 0.2], p=[0.05, 0.2, 0.5, 0.2, 0.05],
                                                       size=size),
             "skewed": lambda size: rng.exponential(0.2, size) - 0.2}
    print(f"Share of {reps} null comparisons rejected at 5%:\n")
    print("| differences | queries | bootstrap, studentized | bootstrap, shifted percentiles (before) | permutation |")
    print("|---|---|---|---|---|")
    for kind, draw in kinds.items():
        for n in (5, 10, 20, 30, 50, 100):
            base = rng.random(n)
            noise = draw((reps, n))
            values = {"base": base} | {f"m{i}": base + noise[i] for i in range(reps)}
            res = _results(values)
            stud = res.compare(baseline="base", test="bootstrap", correction=None, n_resamples=resamples, seed=n)
            perm = res.compare(baseline="base", test="permutation", correction=None, n_resamples=resamples, seed=n)
            shifted = np.mean([_shifted_p(noise[i], rng, resamples) < 0.05 for i in range(reps)])
            print(f"| {kind} | {n} | {(stud['p_value'] < 0.05).mean():.1%} | {shifted:.1%} | "
                  f"{(perm['p_value'] < 0.05).mean():.1%} |")


def _shifted_p(d: np.ndarray, rng, resamples: int) -> float:
    """The bootstrap test before: resampled means shifted to the null, p = (1 + #|m* - m| >= |m|) / (1 + B)."""
    means = d[rng.integers(0, len(d), (resamples, len(d)))].mean(axis=1)
    return (1 + np.sum(np.abs(means - d.mean()) >= abs(d.mean()))) / (1 + resamples)


def weighted(reps: int, resamples: int) -> None:
    rng = np.random.default_rng(1)
    weights = {"equal": lambda n: np.ones(n), "uniform 0.5-2": lambda n: rng.uniform(0.5, 2, n),
               "log-normal (sigma 1.5)": lambda n: rng.lognormal(0, 1.5, n)}
    print(f"| weights | values | queries | 95% interval covers ({reps} samples) |")
    print("|---|---|---|---|")
    for wname, wdraw in weights.items():
        for vname, truth, vdraw in (("precision-like (binomial 10, 0.3)", 0.3, lambda n: rng.binomial(10, 0.3, n) / 10),
                                    ("skewed (exponential)", 1.0, lambda n: rng.exponential(1.0, n))):
            for n in (10, 20, 50, 200):
                covered = 0
                for rep in range(reps):
                    # one candidate per query, its grade the value: dcg@1 (linear gains) is the value itself
                    frame = pd.DataFrame({"query": np.arange(n), "grade": vdraw(n), "s": 1.0, "w": wdraw(n)})
                    res = tk.evaluate(frame, ["dcg@1"], relevance="grade", score="s", weight="w", empty_queries="keep")
                    lo, hi = res.summary_ci(n_resamples=resamples, seed=rep).iloc[0][["ci_low", "ci_high"]]
                    covered += lo <= truth <= hi
                print(f"| {wname} | {vname} | {n} | {covered / reps:.1%} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", choices=["curve", "ips", "bounds", "bootstrap", "weighted"])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--resamples", type=int, default=500)
    args = p.parse_args()
    warnings.simplefilter("ignore", tk.TopkevalWarning)
    t0 = time.perf_counter()
    if args.section == "curve":
        curve(args.reps, args.resamples)
    elif args.section == "ips":
        ips(args.reps, args.resamples)
    elif args.section == "bounds":
        bounds(args.reps)
    elif args.section == "bootstrap":
        bootstrap(args.reps, args.resamples)
    else:
        weighted(args.reps, args.resamples)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
