"""Off-policy estimates: the simulation table (bias, coverage, wrong-way rate) and the speed.

    python benchmarks/offpolicy_bench.py table --reps 500        # the table of docs/how-to/off-policy.md
    python benchmarks/offpolicy_bench.py table --reps 300 --records /tmp/offpolicy_logs.pkl  # and every log's rows
    python benchmarks/offpolicy_bench.py tests --reps 500        # compare's tests on off-policy estimates
    python benchmarks/offpolicy_bench.py speed --rows 10000000   # topkeval beside a numpy transcription

``table``: ``--reps`` logs of 2,000 rounds per setting from tests/offpolicy_simulation.py (a
Plackett-Luce logger over the production ranker's ranks, weights ``exp(-rank / tau)``, 20 candidates,
5 shown; the new ranker deterministic and better; position-based, cascade or dependent-click-model
clicks (after a click the user goes on with probability 0.3, 0.6, 0.8); a logger that only
shuffles its top 5, with support= given; and a sharply peaked logger, tau 2, where the chance that it
shows the policy's item is often below 1%). For every estimator and metric: the mean bias (estimate minus the population's
truth, in the estimator's standard deviations across logs), the coverage of the 95% interval
(Results.summary_ci, 1,000 resamples), the wrong-way rate (compare(baseline="logger"), paired t-test:
the truly better ranker declared significantly worse at 5%), and the share of logs where the estimate
was refused (NaN, with its reason).

``tests``: the paired tests of :meth:`Results.compare` on off-policy estimates, ``--reps`` logs of
2,000 rounds (position-based clicks, Plackett-Luce logger, tau 5). Under a true null (the new ranker
against its twin, whose population value is the same): the share of logs where each test rejects at
5% (permutation, t, bootstrap; and scipy's Wilcoxon signed-rank test run on the same per-round terms,
which compare refuses), and how often compare's interval of the difference holds 0. Against the
logger (a true difference, known): how often the interval holds it and how often the truly better
ranker is declared significantly worse.

``speed``: ``--rows`` rows (rounds of 10 candidates, 5 shown by a uniformly random logger), the new
ranker a score column; topkeval.off_policy (iips, sniips, dr; reading a pandas DataFrame, every input
check included) against a plain numpy transcription of the same three estimators on the same arrays
(lexsort for the ranker's top 5, bincount sums; no input checks), best of ``--repeat``, as a ratio.
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

ESTIMATORS = ["iips", "sniips", "dr", "rips", "snrips", "sips", "snsips"]
METRICS = ["precision@5", "precision@1", "dcg@3"]
PSCORES = {"item_position": "p_item", "cascade": "p_cascade", "slate": "p_slate"}


def one_log(sim, seed: int, clicks: str, logger: str, truth: dict, tau: float, continuation: float = 0.6) -> list[dict]:
    import topkeval as tk

    log, support = sim.simulate(2000, seed=seed, clicks=clicks, logger=logger, tau=tau, continuation=continuation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tk.TopkevalWarning)
        res = tk.off_policy(log, METRICS, policy="new", query="round", pscore=PSCORES, estimator=ESTIMATORS,
                            support=support)
        ci = res.summary_ci(n_resamples=1000, seed=seed).set_index(["model", "metric"])
        cmp = res.compare(baseline="logger", test="t", correction=None, n_resamples=1000,
                          seed=seed).set_index(["model", "metric"])
    rows = []
    for model in res.models:
        if model == "logger":
            continue
        d = res.info["off_policy"]["diagnostics"][model]["metrics"]
        for metric in METRICS:
            m = d[metric]
            t = sim.metric_truth(truth["new"], metric)
            rows.append(dict(estimator=model.split("(")[1].rstrip(")"), metric=metric,
                             estimate=float(res.summary.loc[model, metric]), truth=t,
                             low=float(ci.loc[(model, metric), "ci_low"]), high=float(ci.loc[(model, metric), "ci_high"]),
                             verdict=cmp.loc[(model, metric), "verdict"], refused=m.get("refused"),
                             lower=m.get("lower"), upper=m.get("upper"), skewness=m.get("skewness")))
    return rows


def _reason(reasons: pd.Series) -> str:
    """The most common reason of refusal, in a few words."""
    if not len(reasons):
        return ""
    words = reasons.map(lambda r: "clicks depend on clicks above" if "depend on the clicks above" in r else
                        "slate weights' tail" if "ratios of whole slates" in r else "items the log lacks" if "never lists"
                        in r else "effective sample size" if "sample size" in r else "effective clicks" if "effective clicks" in r else "support" if "cannot show" in r
                        else "weights' mean" if "weights average" in r else "weights' skewness" if "skewness" in r else "no estimate" if "no estimate" in r
                        else r[:30])
    return words.value_counts().index[0]


def table(reps: int, records: str | None = None) -> None:
    import offpolicy_simulation as sim

    settings = [("position", "plackett_luce", 5.0, 0.0), ("cascade", "plackett_luce", 5.0, 0.0),
                ("dcm", "plackett_luce", 5.0, 0.3), ("dcm", "plackett_luce", 5.0, 0.6), ("dcm", "plackett_luce", 5.0, 0.8),
                ("position", "shuffle", 5.0, 0.0), ("position", "plackett_luce", 2.0, 0.0)]
    out = []
    t0 = time.perf_counter()
    for clicks, logger, tau, go_on in settings:
        truth = sim.truth(clicks=clicks, logger=logger, tau=tau, continuation=go_on)
        kind = f"DCM clicks (continuation {go_on:g})" if clicks == "dcm" else f"{clicks} clicks"
        name = (f"{kind}, " + (f"Plackett-Luce logger (tau {tau:g})" if logger == "plackett_luce" else
                               "top-5 shuffle logger, support= given"))
        for rep in range(reps):
            for row in one_log(sim, 10_000 + rep, clicks, logger, truth, tau, go_on):
                out.append(dict(setting=name, **row))
    frame = pd.DataFrame(out)
    if records:  # every log's rows (each estimate's skewness among them): limits can be read off them later
        frame.to_pickle(records)

    def summarise(f: pd.DataFrame) -> pd.Series:
        ok = f[np.isfinite(f["estimate"])]
        sd = ok["estimate"].std()
        bounded = f[f["lower"].notna()]
        return pd.Series({
            "refused": 1 - len(ok) / len(f),
            "bias (sd)": (ok["estimate"] - ok["truth"]).mean() / sd if len(ok) > 1 and sd > 0 else np.nan,
            "coverage": ((ok["low"] <= ok["truth"]) & (ok["truth"] <= ok["high"])).mean() if len(ok) else np.nan,
            "wrong way": (f["verdict"] == "worse").mean(),
            "bounds cover": ((bounded["lower"] <= bounded["truth"]) & (bounded["truth"] <= bounded["upper"])).mean()
            if len(bounded) else np.nan,
            "why refused": _reason(f["refused"].dropna()),
        })

    summary = frame.groupby(["setting", "estimator", "metric"], sort=False).apply(summarise, include_groups=False)
    print(f"{reps} logs of 2,000 rounds per setting, {time.perf_counter() - t0:.0f} s")
    print(summary.reset_index().to_markdown(index=False, floatfmt=".3f"))


# ---------------------------------------------------------------------------------------------
# compare's tests on off-policy estimates


def tests(reps: int) -> None:
    from scipy import stats

    import offpolicy_simulation as sim
    import topkeval as tk

    truth = sim.truth(clicks="position")
    metrics = ["precision@5", "precision@1"]
    rows = []
    t0 = time.perf_counter()
    for rep in range(reps):
        log, _ = sim.simulate(2000, seed=20_000 + rep)
        for e in ("iips", "sniips", "dr"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tk.TopkevalWarning)
                res = tk.off_policy(log, metrics, policy=["new", "twin"], query="round", pscore="p_item", estimator=e)
            pq = res.per_query
            for test in ("permutation", "t", "bootstrap"):
                cmp = res.compare(baseline="new", test=test, correction=None, n_resamples=1000, seed=rep)
                for r in cmp.itertuples():
                    if r.verdict == "refused":
                        continue
                    delta = 0.0 if r.model == "twin" else (sim.metric_truth(truth["new"], r.metric)
                                                           - sim.metric_truth(truth["logger"], r.metric))
                    rows.append(dict(estimator=e, test=test, metric=r.metric,
                                     null="twin against new (equal value)" if r.model == "twin" else
                                     "logger against new (new better)", rejects=r.p_value < 0.05,
                                     covers=r.ci_low <= -delta <= r.ci_high if r.model == "logger" else
                                     r.ci_low <= delta <= r.ci_high,
                                     wrong=(r.verdict == "better") if r.model == "logger" else False))
            for metric in metrics:  # the signed-rank test compare refuses, run by scipy on the same terms
                a = pq.loc[pq["model"] == "new", metric].to_numpy()
                b = pq.loc[pq["model"] == "twin", metric].to_numpy()
                if np.isfinite(a).all() and np.isfinite(b).all() and (a != b).any():
                    rows.append(dict(estimator=e, test="wilcoxon (refused)", metric=metric,
                                     null="twin against new (equal value)",
                                     rejects=stats.wilcoxon(a, b).pvalue < 0.05, covers=np.nan, wrong=False))
    frame = pd.DataFrame(rows)
    table = frame.groupby(["null", "test", "estimator", "metric"], sort=False).agg(
        logs=("rejects", "size"), rejects=("rejects", "mean"), interval_holds_truth=("covers", "mean"),
        better_ranker_declared_worse=("wrong", "mean")).reset_index()
    print(f"{reps} logs of 2,000 rounds, {time.perf_counter() - t0:.0f} s")
    print(table.to_markdown(index=False, floatfmt=".3f"))


# ---------------------------------------------------------------------------------------------
# speed


def speed_log(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    candidates, shown = 10, 5
    rounds = rows // candidates
    picks = np.argsort(rng.random((rounds, candidates)), axis=1)[:, :shown]
    position = np.full((rounds, candidates), np.nan)
    position[np.arange(rounds)[:, None], picks] = np.arange(1, shown + 1)[None, :]
    x = rng.normal(size=(rounds, candidates))
    seen = ~np.isnan(position)
    click = seen & (rng.random((rounds, candidates)) < 1 / (1 + np.exp(2 - 1.5 * x)) / np.where(seen, position, 1))
    return pd.DataFrame({"round": np.repeat(np.arange(rounds), candidates),
                         "item": np.arange(rounds * candidates),
                         "position": position.ravel(), "click": click.ravel().astype(np.int8),
                         "pscore": np.where(seen, 1 / candidates, np.nan).ravel(),
                         "new": (x + 0.5 * rng.normal(size=x.shape)).ravel()})


def numpy_transcription(rnd, item, position, click, pscore, score, K: int, seed: int = 0) -> dict:
    """iips, sniips and dr of precision@K for a deterministic ranker, straight from the formulas."""
    N = len(rnd)
    order = np.lexsort((-score, rnd))
    r_sorted = rnd[order]
    new = np.r_[True, r_sorted[1:] != r_sorted[:-1]]
    starts = np.flatnonzero(new)
    rank = np.empty(N, np.int64)
    rank[order] = np.arange(N) - np.repeat(starts, np.diff(np.r_[starts, N])) + 1
    n = int(rnd.max()) + 1
    shown = ~np.isnan(position) & (position <= K)
    r, j, a, c = rnd[shown], position[shown].astype(np.int64) - 1, item[shown], click[shown].astype(float)
    w = (rank[shown] == j + 1) / pscore[shown]
    n_j = np.bincount(j, minlength=K)
    iips = np.bincount(j, weights=w * c, minlength=K) / n_j
    sniips = np.bincount(j, weights=w * c, minlength=K) / np.bincount(j, weights=w, minlength=K)
    # dr: (item, position) click rates counted on the other fold, smoothed towards the position's rate
    fold = np.random.default_rng(seed).permutation(n) % 2
    f = fold[r]
    keys, inv = np.unique(a * K + j, return_inverse=True)
    S = np.stack([np.bincount(inv[f == g], minlength=len(keys)) for g in (0, 1)])
    C = np.stack([np.bincount(inv[f == g], weights=c[f == g], minlength=len(keys)) for g in (0, 1)])
    mu = np.stack([np.bincount(j[f != g], weights=c[f != g], minlength=K) / np.bincount(j[f != g], minlength=K)
                   for g in (0, 1)])

    def q(g, k, jj):  # rates outside fold g
        at = np.searchsorted(keys, k)
        at = np.minimum(at, len(keys) - 1)
        hit = keys[at] == k
        s_out = np.where(hit, S[1 - g, at], 0.0)
        c_out = np.where(hit, C[1 - g, at], 0.0)
        return (c_out + mu[g, jj]) / (s_out + 1.0)

    top = rank <= K
    tj = rank[top] - 1
    dm = np.bincount(tj, weights=q(fold[rnd[top]], item[top] * K + tj, tj), minlength=K) / n  # every round logs 1..K
    resid = np.bincount(j, weights=w * (c - q(f, a * K + j, j)), minlength=K) / n_j
    dr = dm + resid
    return {"iips": iips.mean(), "sniips": sniips.mean(), "dr": dr.mean()}


def speed(rows: int, repeat: int) -> None:
    import topkeval as tk

    log = speed_log(rows)
    arrays = [log[c].to_numpy() for c in ("round", "item", "position", "click", "pscore", "new")]
    best_tk = best_np = cpu_tk = cpu_np = np.inf
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        res = tk.off_policy(log, ["precision@5"], policy="new", query="round", estimator=["iips", "sniips", "dr"],
                            on_policy=None, refuse=False)
        best_tk, cpu_tk = min(best_tk, time.perf_counter() - t), min(cpu_tk, time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        ref = numpy_transcription(*arrays, K=5)
        best_np, cpu_np = min(best_np, time.perf_counter() - t), min(cpu_np, time.process_time() - c)
    for e in ("iips", "sniips", "dr"):
        got = res.summary.loc[f"new ({e})", "precision@5"]
        assert abs(got - ref[e]) <= 1e-9 * max(1.0, abs(ref[e])), (e, got, ref[e])
    print(f"{len(log):,} rows ({log['round'].nunique():,} rounds of 10 candidates, 5 shown), iips + sniips + dr of "
          f"precision@5, best of {repeat}:")
    import os

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"| implementation | seconds | CPU seconds | ratio (seconds) |\n|---|---:|---:|---:|\n"
          f"| topkeval.off_policy (from a pandas DataFrame, input checks included) | {best_tk:.2f} | {cpu_tk:.2f} | "
          f"{best_tk / best_np:.2f} |\n| numpy transcription (no checks) | {best_np:.2f} | {cpu_np:.2f} | 1.00 |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("table")
    t.add_argument("--reps", type=int, default=500)
    t.add_argument("--records", help="also write every log's rows (a pandas pickle) to this file")
    c = sub.add_parser("tests")
    c.add_argument("--reps", type=int, default=500)
    s = sub.add_parser("speed")
    s.add_argument("--rows", type=int, default=10_000_000)
    s.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if args.what == "table":
        table(args.reps, args.records)
    elif args.what == "tests":
        tests(args.reps)
    else:
        speed(args.rows, args.repeat)


if __name__ == "__main__":
    main()
