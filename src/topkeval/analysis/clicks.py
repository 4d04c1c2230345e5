"""What a click log cannot say, bounded: every metric's range over what the candidates the logging
ranker never showed could be (none of them relevant / as many as could be), and how much of each
model's top k they fill. No click model is needed (Microsoft Recommenders' issue 459 asks for these
bounds on data missing not at random).

The model: the clicked candidates are relevant and the shown, unclicked ones are not (as the naive
evaluation takes them); each never-shown candidate may be either. A completion says which
never-shown candidates are relevant; the bounds are the smallest and the largest mean of the metric
over every completion, each mean over the queries that completion includes (under
``empty_queries="skip"`` a query without a click is in the mean only when a never-shown candidate of
it is relevant), so that ``lower <= upper`` and the truth is inside whenever the model holds. Per
query, the extremes over its completions:

* families that look only at the top k and grow with each relevant candidate there (precision, tp,
  hit_rate, dcg, rbp, rr; fp the other way round): none relevant (the naive value), all relevant,
  and, for a query without a click, its smallest value once it has a relevant candidate: only the
  never-shown candidate the model ranks last relevant. Exact under every tie rule;
* recall, F1, F-beta: ``(h + sum_S p) / (R + |S|)``-shaped in the set S of never-shown candidates
  made relevant (``p_j`` their chance of being in the top k); for each size of S the extremes take
  the candidates of largest (smallest) p, so the extremes are prefixes of those candidates ordered by
  ``p``. Exact under every tie rule that does not order ties by relevance (``expected``, ``first``,
  ``item_asc``/``item_desc``); ``optimistic``/``pessimistic`` get no bound;
* the others (ap, ndcg, r_precision, ...) do not move one way with a candidate's relevance; no
  bound is given (NaN, with the reason in ``note``).

The queries that may be left out (:func:`extreme_means`) are in the extreme mean exactly when their
extreme value lies beyond it; ``never_shown`` is the mean share of each model's top min(k, n) taken
by never-shown candidates. Tested against every completion of small logs (tests/test_bounds.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..backends.clicks import never_shown_share
from ..engine import make_plan, plan_of
from ..engine.aggregate import weighted_mean
from ..engine.rules import comparable_scores, threshold, tie_rule
from ..errors import ParameterError

_TOP_UP = frozenset({"precision", "tp", "hit_rate", "dcg", "rbp", "rr"})
_TOP_DOWN = frozenset({"fp"})
_RATIO = frozenset({"recall", "f1", "fbeta"})


def bounds(evaluation, metrics=None) -> pd.DataFrame:
    """See :meth:`topkeval.Results.bounds`."""
    from ..backends.cpu import CPU
    from ..engine import build_results, evaluate_grouped

    if evaluation.sources is None or evaluation.conventions is None:
        raise ParameterError("bounds() reads the click log again; these results keep no rows (a matrix, Spark, a "
                             "streamed file): evaluate a table with position=.")
    sources = list(evaluation.sources())
    log = sources[0][0]
    if len(sources) != 1 or "position" not in log.rows:
        raise ParameterError("bounds() needs the logging ranker's positions: evaluate the click log with "
                             "position='<column>' (the column where never-shown candidates are empty).")
    conv = evaluation.conventions
    # the results' own metrics (their Metric objects), or the user's names, read; a pooled ratio's naive value too
    plan = (plan_of(evaluation.metric_objects, conv, clicks="ips" in evaluation.info) if metrics is None else
            make_plan([metrics] if isinstance(metrics, str) else list(metrics), conv, clicks="ips" in evaluation.info))
    estimates = _estimates(evaluation, plan)
    weight = evaluation.weight
    query_weights = (evaluation.attributes[weight].reindex(log.queries).to_numpy(np.float64) if weight
                     and evaluation.attributes is not None else None)
    never = np.isnan(log.rows["position"])
    plain = log.with_scores(log.scores)
    plain.rows = {k: v for k, v in log.rows.items() if k != "ips_weight"}
    grades = np.asarray(log.grades, np.float64)
    relevant_grade = max(1.0, float(conv.threshold or 1.0))
    clicked = conv.is_relevant(grades)
    upper_log = plain.with_grades(np.where(never & ~clicked, relevant_grade, grades))

    def per_query(current_log) -> dict:
        """(model, label) -> every query's value (NaN where the query is left out of the mean)."""
        batch, _ = evaluate_grouped(current_log, plan, backend=CPU)
        pq = build_results([batch], plan, query_name=evaluation.query_name).per_query
        out: dict = {}
        for model, part in pq.groupby("model", sort=False):
            part = part.set_index(evaluation.query_name).reindex(current_log.queries)
            out |= {(model, label): part[label].to_numpy(np.float64) for label in plan.labels}
        return out

    naive_q, upper_q = per_query(plain), per_query(upper_log)
    q = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    no_click = np.bincount(q, weights=clicked.astype(np.float64), minlength=log.n_queries) == 0
    shares: dict = {}
    out = []
    for model in log.scores:
        single_q = None
        for label, metric in zip(plan.labels, plan.metrics):
            family = metric.family
            naive = naive_q[(model, label)]
            row = {"model": model, "metric": label, "naive": weighted_mean(naive, query_weights),
                   "estimate": estimates.get((model, str(metric)), np.nan), "lower": np.nan, "upper": np.nan,
                   "never_shown": np.nan, "note": ""}
            if metric.k is not None:
                if (model, metric.k) not in shares:  # once per model and cutoff, whatever the metrics
                    shares[(model, metric.k)] = never_shown_share(plain, conv, model, metric.k, never, query_weights)
                row["never_shown"] = shares[(model, metric.k)]
            if family in _TOP_UP or family in _TOP_DOWN:
                if single_q is None:  # each query without a click: its lowest-ranked never-shown candidate relevant
                    single_q = per_query(_single_log(plain, conv, model, never, no_click, relevant_grade))
                options = [naive, single_q[(model, label)], upper_q[(model, label)]]
            elif family in _RATIO and conv.ties not in ("optimistic", "pessimistic"):
                low, high = _ratio_bounds(plain, conv, model, metric, never)
                none = np.isnan(low)  # no never-shown candidate: the naive value is the only one
                options = [naive, np.where(none, naive, low), np.where(none, naive, high)]
            elif family in _RATIO:
                row["note"] = f"ties={conv.ties!r} orders ties by relevance: no exact bound"
                options = None
            else:
                row["note"] = "not monotone in a candidate's relevance: no bound"
                options = None
            if options is not None:
                values = np.column_stack(options)
                row["lower"], row["upper"] = extreme_means(values, query_weights)
            out.append(row)
    return pd.DataFrame(out).set_index(["model", "metric"])


def extreme_means(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float]:
    """The smallest and the largest (weighted) mean over every way of choosing one value per query
    from its row of ``values`` (queries x options; NaN: the query left out of the mean, as a query
    without a relevant candidate is under ``empty_queries="skip"``).

    A query whose every option is a number is in the mean, at its smallest (largest) option; one
    with a NaN option may be left out, and is in the extreme mean exactly when its extreme option
    is below (above) that mean: the queries sorted by it, the extreme is a prefix (Dinkelbach's
    argument for ratios). NaN when no choice has a query.

    >>> extreme_means(np.array([[0.5, 0.5, 1.0], [np.nan, 0.0, 0.2]]))
    (0.25, 1.0)
    """
    w = np.ones(len(values)) if weights is None else np.asarray(weights, np.float64)
    keep = w > 0  # a query of weight 0 counts nowhere
    values, w = values[keep], w[keep]
    defined = ~np.isnan(values)
    some = defined.any(axis=1)
    forced = defined.all(axis=1)
    optional = some & ~forced
    with np.errstate(all="ignore"):
        lo = np.where(some, np.nanmin(np.where(defined, values, np.inf), axis=1), np.nan)
        hi = np.where(some, np.nanmax(np.where(defined, values, -np.inf), axis=1), np.nan)
    return _extreme(lo, w, forced, optional, 1.0), _extreme(hi, w, forced, optional, -1.0)


def _extreme(v: np.ndarray, w: np.ndarray, forced: np.ndarray, optional: np.ndarray, sign: float) -> float:
    """min (sign 1) or max (sign -1) over prefixes of the optional queries sorted by ``sign * v`` of
    ``(sum_forced w v + sum_prefix w v) / (sum_forced w + sum_prefix w)``."""
    base_num, base_den = float((w[forced] * v[forced]).sum()), float(w[forced].sum())
    order = np.argsort(sign * v[optional], kind="stable")
    num = base_num + np.concatenate([[0.0], np.cumsum((w * v)[optional][order])])
    den = base_den + np.concatenate([[0.0], np.cumsum(w[optional][order])])
    ok = den > 0
    if not ok.any():
        return float("nan")
    means = num[ok] / den[ok]
    return float(means.min() if sign > 0 else means.max())


def _single_log(log, conv, model: str, never: np.ndarray, no_click: np.ndarray, grade: float):
    """The log with, in each query without a click, the one never-shown candidate that the model
    ranks last made relevant: the smallest value that a top-k metric growing with each relevant
    candidate takes there once the query has a relevant candidate at all (and the largest of fp).
    Last: the lowest score; among equal ones, the last in the order of the tie rule (the last row
    under ``first``, the smallest item key under ``item_desc``, the largest under ``item_asc``); the
    other rules give every one of them the same value."""
    from ..kernels import cpu

    scores = comparable_scores(log.scores[model], conv)
    tie, key = tie_rule(log, conv, scores)
    rows = np.arange(log.n_rows)
    if tie == cpu.TIE_ITEM_DESC:
        second = -key.astype(np.float64)
    elif tie == cpu.TIE_ITEM_ASC:
        second = key.astype(np.float64)
    else:
        second = rows.astype(np.float64)
    q = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    candidates = np.flatnonzero(never & no_click[q])
    # per query, the candidate with the lowest score, then the largest second key: the last one after sorting
    order = np.lexsort((second[candidates], -scores[candidates], q[candidates]))
    picked = candidates[order]
    last = np.ones(len(picked), bool)
    last[:-1] = q[picked][1:] != q[picked][:-1]
    grades = np.asarray(log.grades, np.float64).copy()
    grades[picked[last]] = grade
    one = log.with_scores({model: log.scores[model]})
    return one.with_grades(grades)


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


def _ratio_bounds(log, conv, model: str, metric, never: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the smallest and the largest recall / F-beta over every non-empty set of its
    never-shown candidates made relevant (NaN where it has none: the empty set is the naive value)."""
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
    never_rows = np.flatnonzero(never)
    return _extremes(a * h, R + b, q[never_rows], p_never[never_rows], num_gain, den_gain, log.n_queries)


def _extremes(num0, den0, q, p, num_gain: float, den_gain: float, Q: int):
    """Per query, the min and the max over non-empty prefixes S of its candidates ordered by ``p``
    (ascending for the min, descending for the max: for a given size the best sets) of
    ``(num0 + num_gain sum_S p) / (den0 + den_gain |S|)``; NaN for a query without candidates."""
    low, high = np.full(Q, np.nan), np.full(Q, np.nan)
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
