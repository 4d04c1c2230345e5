"""Intervals and tests that carry an estimated examination curve's uncertainty.

With ``evaluate(..., propensity=bias)``, ``bias`` from :func:`topkeval.estimate_position_bias`,
every weight ``w_j = min(1 / p_j, clip)`` comes from a curve estimated on a log of finitely many
queries: resampling only the evaluated queries would take the curve as known and the intervals
would be too narrow. An inverse propensity weighted metric (precision, tp, dcg, rbp) is linear in
the weights of the logged positions, per query ``v_q = sum_j w_j S_qj`` with ``S_qj`` the sum of
the click terms of the clicks logged at position j, so every resample is cheap:

* the queries of the curve's log and of the evaluated log are resampled (jointly, one count per
  query id, when the two logs share query ids; independently when they share none);
* the curve is fitted again on its resampled queries (:meth:`PositionBias.resampled`), giving
  ``w_b``;
* the resample's mean is ``sum_q c_bq u_q S_q . w_b / sum_q c_bq u_q`` (``c_bq`` the counts,
  ``u_q`` the query weights of ``weight=``, 1 without).

``summary_ci`` gives the basic bootstrap interval of those means (``2 m - q``, m the estimate and q
the percentiles of the resampled means: a weight ``1 / p`` with p estimated is biased upward, by
Jensen's inequality, and so is every resample's; the percentile interval would count that bias
twice, the basic one removes it); ``compare`` that of the paired differences (``S`` of the model
minus ``S`` of the baseline), its bootstrap test shifts them to the null, and
its permutation test adds to the sign-flipped differences (weighed with the estimated curve) the
curve's own deviation ``sum_j (w_bj - w_j) Dbar_j`` (``Dbar`` the mean paired difference per
position): the statistic's two sources of noise, the queries evaluated and the curve. The t and
Wilcoxon tests have no such form and are refused, as are the analyses that take the per-query
values as the only noise (compare_all, anova, queries_needed). So are the ratios pooled over the
queries (recall_micro@k...): a ratio of two resampled sums is undefined where a refitted curve
cannot place a clicked position (measured: docs/how-to/clicks.md). Validated by simulation in
tests/test_position_bias.py and tests/test_clicks_simulation.py (coverage, wrong-way rate).
"""

from __future__ import annotations

import math
import weakref
import zlib

import numpy as np
import pandas as pd

from .. import stattests
from ..errors import ParameterError

#: Evaluation -> (positions, {(model, label): DataFrame of S by query}); computed once per evaluation.
_SUMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

KNOWN = ("give the curve as known (propensity=bias.propensities, a mapping) to take it as exact, at the risk of "
         "intervals too narrow")


def estimated(ev) -> bool:
    """Whether these results weigh clicks by an estimated curve whose uncertainty intervals must carry."""
    return getattr(ev, "estimated_curve", None) is not None


def refuse(ev, owner: str) -> None:
    """Refuse an analysis that takes the per-query values as the only noise on results weighted by an
    estimated curve."""
    if estimated(ev):
        raise ParameterError(f"{owner} takes the per-query values as the only source of noise, but these results "
                             "weigh the clicks by a curve estimated by estimate_position_bias, whose own uncertainty "
                             "it would leave out. Use compare() (pairs of models) and summary_ci(), which fit the "
                             f"curve again on resampled queries, or {KNOWN}.")


def check_test(test: str) -> None:
    """Refuse a test that cannot resample the estimated curve's queries (:mod:`topkeval.stattests`)."""
    if not stattests.TESTS[test].refits_curve:
        usable = " or ".join(f"test={name!r}" for name in stattests.names("pair", refits_curve=True))
        raise ParameterError(f"test={test!r} takes the per-query differences as the only source of noise, but these "
                             "results weigh the clicks by a curve estimated by estimate_position_bias, whose own "
                             f"uncertainty it would leave out: use {usable} (both resample the curve's queries too), "
                             f"or {KNOWN}.")


def position_sums(ev) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(positions, weights, sums)``: the logged positions with a click, the weight each click there
    got, and per (model, metric label) a DataFrame of ``S`` (queries x positions), indexed by query
    id, such that each per-query value is ``S @ weights``."""
    held = _SUMS.get(ev)
    if held is not None:
        return held
    from ..backends.cpu import CPU
    from ..engine import build_results, evaluate_grouped, plan_of
    from ..metrics import FAMILIES

    conv = ev.conventions
    labels = list(ev.metrics)
    kinds = (ev.info.get("ips") or {}).get("estimators") or {}
    pooled = [label for label in labels if kinds.get(label) == "pooled"]
    if pooled:
        raise ParameterError(f"{', '.join(pooled)}: no interval carries an estimated curve's uncertainty for a ratio "
                             "pooled over the queries. Resampled as a ratio of two sums, each under the curve fitted "
                             "again, it gave no interval in 3 of 12 simulated logs (a curve from two arms of 2,000 "
                             "queries) and upper bounds of recall above 1 in 6: a resampled curve that leaves a "
                             "rarely examined position no click leaves the ratio undefined; with the curve taken as "
                             "known its intervals covered the truth in 74-78% of 100 logs. On one log, tp@k and "
                             "precision@k order the models as recall_micro@k does, and their intervals carry the "
                             f"curve: evaluate them apart; or {KNOWN}.")
    plan = plan_of({label: ev.metric(label) for label in labels}, conv)
    other = [label for label, m in zip(labels, plan.metrics) if FAMILIES[m.family].ips != "ips"]
    if other:
        raise ParameterError(f"{', '.join(other)}: no interval carries an estimated curve's uncertainty for this "
                             "estimator (only the sums of weighted clicks, precision, tp, dcg and rbp, are linear in "
                             f"the weights); evaluate the others apart, or {KNOWN}.")
    log = next(iter(ev.sources()))[0]
    clicked = log.relevant(conv)
    pos = log.rows["position"]
    weights = log.rows["ips_weight"]
    positions = np.unique(pos[clicked])
    shown_weights = np.array([weights[clicked & (pos == j)][0] for j in positions])
    sums: dict = {}
    for i, j in enumerate(positions):
        one = log.with_scores(log.scores)
        one.rows = {**log.rows, "ips_weight": np.where(clicked, (pos == j).astype(np.float64), 1.0)}
        batch, _ = evaluate_grouped(one, plan, backend=CPU)
        pq = build_results([batch], plan, query_name=ev.query_name).per_query
        for model, part in pq.groupby("model", sort=False):
            part = part.set_index(ev.query_name)
            for label, column in zip(labels, plan.labels):
                frame = sums.setdefault((model, label), pd.DataFrame(index=part.index, columns=range(len(positions)),
                                                                     dtype=np.float64))
                frame[i] = part[column].to_numpy(np.float64)
    held = (positions, shown_weights, sums)
    _SUMS[ev] = held
    return held


def _curve_weights(bias, positions: np.ndarray, curve_counts: np.ndarray, clip: float | None) -> np.ndarray:
    """Per resample, the weight of a click at each of ``positions``: ``min(1 / p_b, clip)`` with the
    curve fitted again (inf where a resample has no click to place a position; NaN where it cannot)."""
    from .bias import refit

    p = refit(bias, curve_counts)
    at = bias.curve.index.get_indexer(positions)
    with np.errstate(divide="ignore"):
        w = 1.0 / p[:, at]
    return np.minimum(w, clip) if clip is not None else w


def counts(curve_ids: pd.Index, eval_ids: pd.Index, n_resamples: int, seed):
    """Blocks of bootstrap counts ``(curve counts, evaluation counts)``, one column per query of
    ``curve_ids`` and of ``eval_ids``: drawn once per query id for both when the two share ids (one
    log, or logs of the same queries: the union resampled), independently when they share none."""
    from .bias import query_counts

    rng = np.random.default_rng(seed)
    shared = eval_ids.isin(curve_ids)
    n_curve = len(curve_ids)
    if shared.any():
        union = curve_ids.append(eval_ids[~shared])  # the curve's queries first: their counts a slice
        at = union.get_indexer(eval_ids)
        for c in query_counts(rng, n_resamples, len(union)):
            yield c[:, :n_curve], c[:, at]
    else:
        curve_rng, eval_rng = rng.spawn(2)
        per = max(1, (1 << 22) // (n_curve + len(eval_ids)))
        yield from zip(query_counts(curve_rng, n_resamples, n_curve, per),
                       query_counts(eval_rng, n_resamples, len(eval_ids), per))


def resamples(ev, blocks: list, n_resamples: int, seed, deviations: list | None = None) -> tuple[list, list]:
    """For each block ``(queries, S, u)`` (query ids, their S rows, query weights or None), the
    resampled means ``sum_q c u S.w_b / sum_q c u``, one per resample; the same counts and curves for
    every block (each block's numbers depend on the seed and its own queries only). With
    ``deviations`` (one mean paired difference per position ``Dbar`` per block), also the curve's own
    deviation ``sum_j (w_bj - w_j) Dbar_j`` under each resample's curve."""
    positions, weights, _ = position_sums(ev)
    bias = ev.estimated_curve
    clip = (ev.info.get("ips") or {}).get("clip")
    eval_ids = pd.Index(ev.per_query[ev.query_name].unique())
    at = [eval_ids.get_indexer(q) for q, _, _ in blocks]
    out: list[list] = [[] for _ in blocks]
    dev: list[list] = [[] for _ in blocks]
    streams = counts(bias.queries, eval_ids, n_resamples, seed)
    for curve_counts, eval_counts in streams:
        w = _curve_weights(bias, positions, curve_counts, clip)
        for i, (_, S, u) in enumerate(blocks):
            c = eval_counts[:, at[i]]
            cu = c if u is None else c * u
            sums = cu @ S
            with np.errstate(invalid="ignore", divide="ignore"):
                out[i].append(np.where(sums != 0, sums * w, 0.0).sum(axis=1) / cu.sum(axis=1))
                if deviations is not None:
                    d = deviations[i]
                    dev[i].append(np.where(d != 0, (w - weights) * d, 0.0).sum(axis=1))
    return ([np.concatenate(o) if o else np.zeros(0) for o in out],
            [np.concatenate(o) if o else np.zeros(0) for o in dev])


def summary_ci(ev, confidence: float, n_resamples: int, seed) -> pd.DataFrame:
    """:func:`topkeval.analysis.compare.summary_ci` with the curve fitted again on every resample."""
    from ..engine.aggregate import weighted_mean
    from .segments import groups

    _, _, sums = position_sums(ev)
    weight = ev.weight
    keys, blocks, values, value_weights = [], [], [], []
    for key, pq in groups(ev):
        for model in ev.models:
            part = pq[pq["model"] == model]
            if weight:
                part = part[part[weight] > 0]
            for metric in ev.metrics:
                ok = part[metric].notna().to_numpy()
                q = pd.Index(part[ev.query_name].to_numpy()[ok])
                u = part[weight].to_numpy(np.float64)[ok] if weight else None
                keys.append((key, model, metric))
                blocks.append((q, sums[(model, metric)].loc[q].to_numpy(), u))
                values.append(part[metric].to_numpy(np.float64))
                value_weights.append(part[weight].to_numpy(np.float64) if weight else None)
    means, _ = resamples(ev, blocks, n_resamples, seed)
    alpha = 1 - confidence
    rows = []
    for (key, model, metric), v, u, m in zip(keys, values, value_weights, means):
        lo, hi = _percentiles(2 * weighted_mean(v, u) - m, alpha)  # the basic bootstrap interval
        rows.append({**key, "model": model, "metric": metric, "mean": weighted_mean(v, u), "ci_low": lo,
                     "ci_high": hi, "n_queries": int((~np.isnan(v)).sum())})
    return pd.DataFrame(rows)


def _percentiles(draws: np.ndarray, alpha: float) -> tuple[float, float]:
    """The percentile interval; NaN when a resample has no mean (a curve it cannot place)."""
    if not len(draws) or np.isnan(draws).any():
        return math.nan, math.nan
    lo, hi = quantiles(draws, [alpha / 2, 1 - alpha / 2])
    return lo, hi


def quantiles(draws: np.ndarray, probs) -> list[float]:
    """``np.quantile(draws, probs)`` (linear interpolation between order statistics) where some draws
    may be infinite (a resample whose refitted curve gives a position with clicks no finite weight):
    between an infinite order statistic and a finite one the quantile is the infinite one (the limit
    of the interpolation), between two infinities of opposite signs NaN, and no numpy warning.

    >>> quantiles(np.array([3.0, 1.0, 2.0, 4.0]), [0.5, 0.25])
    [2.5, 1.75]
    >>> quantiles(np.array([1.0, 2.0, np.inf]), [0.75, 0.25])
    [inf, 1.5]
    """
    x = np.sort(np.asarray(draws, np.float64))
    out = []
    for p in probs:
        h = (len(x) - 1) * float(p)
        i = int(math.floor(h))
        j = min(i + 1, len(x) - 1)
        t = h - i
        a, b = float(x[i]), float(x[j])
        if t == 0 or a == b:
            out.append(a)
        elif math.isinf(a) or math.isinf(b):
            out.append(a if math.isinf(a) and not math.isinf(b) else b if not math.isinf(a) else math.nan)
        else:
            out.append(a + (b - a) * t)
    return out


def compare_resamples(ev, rows: list[dict], test: str, n_resamples: int, seed) -> tuple[dict, dict]:
    """The bootstrap differences of each compared row (and for the permutation test its null
    statistics), the curve fitted again on every resample (see the module docstring)."""
    check_test(test)
    _, weights, sums = position_sums(ev)
    live = [i for i, r in enumerate(rows) if len(r["m"])]
    blocks, D = [], []
    for i in live:
        r = rows[i]
        q = r["queries"]
        S = (sums[(r["model"], r["metric"])].loc[q].to_numpy() - sums[(r["baseline"], r["metric"])].loc[q].to_numpy())
        S = np.ldexp(S, -r["shift"])  # as the row's values: scaled by a power of 2 where they are huge
        u = r["w"]
        blocks.append((q, S, u))
        D.append(S.mean(axis=0) if u is None else (u[:, None] * S).sum(axis=0) / u.sum())
    signed = stattests.TESTS[test].draws == "sign flips"  # the permutation test's sign flips
    boot_list, deviation = resamples(ev, blocks, n_resamples, seed, D if signed else None)
    # reflected about the estimate: their percentiles are the basic bootstrap interval (the bootstrap
    # test's |boot - estimate| is the same either way)
    boot = {i: 2 * float(d @ weights) - b for i, d, b in zip(live, D, boot_list)}
    perm: dict = {}
    if signed:
        for j, i in enumerate(live):
            q, S, u = blocks[j]
            r = rows[i]  # each row's signs seeded by what it compares: the same whichever rows the call holds
            key = repr((tuple(r["key"].items()), r["model"], r["metric"])).encode()
            rng = np.random.default_rng(None if seed is None else [seed, zlib.crc32(key)])
            x = S @ weights if u is None else u * (S @ weights)
            total = len(x) if u is None else u.sum()
            flips = np.empty(n_resamples)
            for start in range(0, n_resamples, 1024):
                signs = rng.choice((-1.0, 1.0), size=(min(1024, n_resamples - start), len(x)))
                flips[start:start + len(signs)] = signs @ x / total
            perm[i] = flips + deviation[j]
    return boot, perm
