"""What a click log cannot say, bounded: every metric's range over what the candidates the logging
ranker never showed could be (none of them relevant / as many as could be), and how much of each
model's top k they fill. No click model is needed (Microsoft Recommenders' issue 459 asks for these
bounds on data missing not at random).

For a query, the clicked candidates are relevant and the shown, unclicked ones are not (as the naive
evaluation takes them); each never-shown candidate may be either. The bounds are exact under every
tie rule that does not order ties by relevance (``expected``, ``first``, ``item_asc``/``item_desc``;
``optimistic``/``pessimistic`` give the top-k families only):

* families that look only at the top k and grow with each relevant candidate there (precision, tp,
  hit_rate, dcg, rbp, rr): the lower bound is the naive value, the upper one the value with every
  never-shown candidate relevant (fp the other way round);
* recall, F1, F-beta: ``(h + sum_S p) / (R + |S|)``-shaped in the set S of never-shown candidates
  made relevant (``p_j`` their chance of being in the top k); the extremes take S as a prefix of
  those candidates ordered by ``p`` (descending for the upper bound, ascending for the lower);
* the others (ap, ndcg, r_precision, ...) do not move one way with a candidate's relevance; no
  bound is given (NaN, with the reason in ``note``).

A bound's mean runs over the queries where it is defined (those with a click or a never-shown
candidate); ``never_shown`` is the mean share of each model's top min(k, n) taken by never-shown
candidates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine import make_plan
from ..engine.rules import comparable_scores, threshold, tie_rule
from ..errors import ParameterError

_TOP_UP = frozenset({"precision", "tp", "hit_rate", "dcg", "rbp", "rr"})
_TOP_DOWN = frozenset({"fp"})
_RATIO = frozenset({"recall", "f1", "fbeta"})


def bounds(evaluation, metrics=None) -> pd.DataFrame:
    """See :meth:`topkeval.Results.bounds`."""
    from ..backends.cpu import CPU
    from ..engine import attach, build_results, evaluate_grouped
    from ..engine.aggregate import weighted_mean

    if evaluation.sources is None or evaluation.conventions is None:
        raise ParameterError("bounds() reads the click log again; these results keep no rows (a matrix, Spark, a "
                             "streamed file): evaluate a table with position=.")
    sources = list(evaluation.sources())
    log = sources[0][0]
    if len(sources) != 1 or "position" not in log.rows:
        raise ParameterError("bounds() needs the logging ranker's positions: evaluate the click log with "
                             "position='<column>' (the column where never-shown candidates are empty).")
    conv = evaluation.conventions
    labels = list(evaluation.info["metrics"]) if metrics is None else ([metrics] if isinstance(metrics, str)
                                                                        else list(metrics))
    plan = make_plan(labels, conv, clicks="ips" in evaluation.info)  # a pooled ratio's naive value too
    estimates = _estimates(evaluation, plan)
    weight = evaluation.weight
    attributes = evaluation.attributes[[weight]] if weight and evaluation.attributes is not None else None
    query_weights = (attributes[weight].reindex(log.queries).to_numpy(np.float64) if attributes is not None
                     else None)
    never = np.isnan(log.rows["position"])
    plain = log.with_scores(log.scores)
    plain.rows = {k: v for k, v in log.rows.items() if k != "ips_weight"}
    grades = np.asarray(log.grades, np.float64)
    relevant_grade = max(1.0, float(conv.threshold or 1.0))
    upper_log = plain.with_grades(np.where(never & ~conv.is_relevant(grades), relevant_grade, grades))

    def means(current_log):  # the same queries and the same weights as the estimate
        batch, _ = evaluate_grouped(current_log, plan, backend=CPU)
        ev = build_results([batch], plan, query_name=evaluation.query_name)
        return attach(ev, attributes, (), weight).summary if weight else ev.summary

    naive, upper = means(plain), means(upper_log)
    shares: dict = {}
    out = []
    for model in log.scores:
        for label, metric in zip(plan.labels, plan.metrics):
            family = metric.family
            row = {"model": model, "metric": label, "naive": float(naive.loc[model, label]),
                   "estimate": estimates.get((model, str(metric)), np.nan), "lower": np.nan, "upper": np.nan,
                   "never_shown": np.nan, "note": ""}
            if metric.k is not None:
                if (model, metric.k) not in shares:  # once per model and cutoff, whatever the metrics
                    shares[(model, metric.k)] = never_shown_share(plain, conv, model, metric.k, never, query_weights)
                row["never_shown"] = shares[(model, metric.k)]
            if family in _TOP_UP or family in _TOP_DOWN:
                lo, hi = float(naive.loc[model, label]), float(upper.loc[model, label])
                row["lower"], row["upper"] = (lo, hi) if family in _TOP_UP else (hi, lo)
            elif family in _RATIO and conv.ties not in ("optimistic", "pessimistic"):
                low, high = _ratio_bounds(plain, conv, model, metric, never)
                ok = np.isfinite(low)
                w = None if query_weights is None else query_weights[ok]
                if ok.any():
                    row["lower"], row["upper"] = weighted_mean(low[ok], w), weighted_mean(high[ok], w)
            elif family in _RATIO:
                row["note"] = f"ties={conv.ties!r} orders ties by relevance: no exact bound"
            else:
                row["note"] = "not monotone in a candidate's relevance: no bound"
            out.append(row)
    return pd.DataFrame(out).set_index(["model", "metric"])


def _estimates(evaluation, plan) -> dict:
    """(model, canonical metric name) -> this evaluation's mean: of the metrics it computed (under
    any of their names), and of the others by evaluating them again when the data can be read."""
    canonical = evaluation.info.get("metric_names", {})
    out = {(model, canonical.get(label, label)): float(value)
           for label in evaluation.summary.columns for model, value in evaluation.summary[label].items()}
    missing = [str(m) for m in plan.metrics if not any((model, str(m)) in out for model in evaluation.summary.index)]
    if missing and evaluation.rerun is not None:
        again = evaluation.rerun(missing)
        names = again.info.get("metric_names", {})
        out |= {(model, names.get(label, label)): float(value)
                for label in again.summary.columns for model, value in again.summary[label].items()}
    return out


def _inclusion(log, conv, model: str, k: int, rows: np.ndarray) -> np.ndarray:
    """Per row: the chance that a row of ``rows`` is in the model's top k (0 elsewhere)."""
    from ..kernels import cpu

    scores = comparable_scores(log.scores[model], conv)
    tie, items = tie_rule(log, conv, scores)
    grades = log.grades.astype(np.float64, copy=False)
    kq = np.full(log.n_queries, int(min(k, 1 << 40)), np.int64)
    return cpu.inclusion(log.offsets, scores, rows, grades, items, threshold(conv), tie, kq)


def never_shown_share(log, conv, model: str, k: int, never: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The mean share of the model's top min(k, n) filled by candidates the logging ranker never
    showed (``never``), over the queries with a candidate; weighted with ``weights``."""
    from ..backends.cpu import CPU
    from ..engine.aggregate import weighted_mean

    inside = CPU.expected_in_top(log, conv, model, k, never)
    q = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    scores = comparable_scores(log.scores[model], conv)
    n_kept = np.bincount(q, weights=(scores >= threshold(conv)).astype(np.float64), minlength=log.n_queries)
    den = np.minimum(float(k), n_kept)
    ok = den > 0
    if not ok.any():
        return float("nan")
    return weighted_mean(inside[ok] / den[ok], None if weights is None else weights[ok])


def _ratio_bounds(log, conv, model: str, metric, never: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the lower and upper bound of recall / F-beta (NaN where none is defined)."""
    k = metric.k
    rel = conv.is_relevant(np.asarray(log.grades, np.float64))
    p_never = _inclusion(log, conv, model, k, never)
    p_rel = _inclusion(log, conv, model, k, rel)
    q = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    h = np.bincount(q, weights=p_rel, minlength=log.n_queries)
    R: np.ndarray = np.bincount(q, weights=rel.astype(np.float64), minlength=log.n_queries)
    b: np.ndarray = np.zeros(log.n_queries)
    if metric.family == "recall":
        a, num_gain, den_gain = 1.0, 1.0, 1.0
    else:
        beta2 = 1.0 if metric.family == "f1" else float(metric.param("beta")) ** 2
        scores = comparable_scores(log.scores[model], conv)
        n_kept = np.bincount(q, weights=(scores >= threshold(conv)).astype(np.float64), minlength=log.n_queries)
        b = np.minimum(float(k), n_kept) if conv.short_lists == "shrink" else np.full(log.n_queries, float(k))
        a, num_gain, den_gain = 1.0 + beta2, 1.0 + beta2, beta2
        R = beta2 * R
    base = R + b
    num0 = a * h
    never_rows = np.flatnonzero(never)
    low, high = _extremes(num0, base, q[never_rows], p_never[never_rows], num_gain, den_gain, log.n_queries)
    clicked = np.bincount(q, weights=rel.astype(np.float64), minlength=log.n_queries) > 0
    # over the queries where the naive ratio is defined (a click): the same queries as its mean
    return np.where(clicked, low, np.nan), np.where(clicked, high, np.nan)


def _extremes(num0, den0, q, p, num_gain: float, den_gain: float, Q: int):
    """Per query, the min and the max over prefixes S of its candidates ordered by ``p`` (ascending
    for the min, descending for the max: for a given size the best sets) of
    ``(num0 + num_gain sum_S p) / (den0 + den_gain |S|)``; NaN where every denominator is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        empty = np.where(den0 > 0, num0 / den0, np.nan)
    low, high = empty.copy(), empty.copy()
    for sign, out, pick in ((1.0, low, np.fmin), (-1.0, high, np.fmax)):
        order = np.lexsort((sign * p, q))
        qs, ps = q[order], p[order]
        first = np.ones(len(qs), bool)
        first[1:] = qs[1:] != qs[:-1]
        starts = np.flatnonzero(first)
        group = np.cumsum(first) - 1
        size = np.arange(len(qs)) - starts[group] + 1
        within = pd.Series(ps).groupby(group).cumsum().to_numpy()  # each query's own running sum
        ratio = (num0[qs] + num_gain * within) / (den0[qs] + den_gain * size)
        pick.at(out, qs, ratio)
    return low, high
