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
position): the statistic's two sources of noise, the queries evaluated and the curve.

A ratio pooled over the queries (recall_micro@k, f1_micro@k, fbeta_micro@k:
:mod:`topkeval.metrics.pooled`) is a ratio of two such sums,
``r = a sum_q N_q . w / (b sum_q D_q . w + sum_q K_q)`` (``N_qj`` the query's clicks at position j
in the model's top k, ``D_qj`` its clicks at position j, ``K_q`` what F-beta adds per query), so
it is resampled as a ratio: each resample's ratio of its resampled numerator and denominator under
its refitted curve (a ratio bootstrap), its basic interval ``2 r - q``, the difference of two
models' ratios likewise; the permutation test flips the signs of the paired linearised shares
(the per-query values) and adds the curve's deviation of the difference of the ratios,
``Delta(w_b) - Delta(w)`` over every query (for a sum, ``sum_j (w_bj - w_j) Dbar_j`` again).

The t and Wilcoxon tests have no such form and are refused, as are the analyses that take the
per-query values as the only noise (compare_all, anova, queries_needed). Validated by simulation in
tests/test_position_bias.py and tests/test_clicks_simulation.py (coverage, wrong-way rate).
"""

from __future__ import annotations

import math
import weakref
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    if test in ("t", "wilcoxon"):
        raise ParameterError(f"test={test!r} takes the per-query differences as the only source of noise, but these "
                             "results weigh the clicks by a curve estimated by estimate_position_bias, whose own "
                             "uncertainty it would leave out: use test='permutation' or test='bootstrap' (both "
                             f"resample the curve's queries too), or {KNOWN}.")


@dataclass(frozen=True)
class Ratio:
    """The sums of a ratio pooled over the queries, per logged position: under click weights ``w``
    (one per position) and query counts ``c``, its value is
    ``a (c @ numerator) . w / (b (c @ denominator) . w + c @ listed)``.

    Attributes
    ----------
    numerator : pandas.DataFrame
        Queries x positions: the clicks logged at each position that the model puts in its top k
        (their expected number under ``ties="expected"``).
    denominator : pandas.DataFrame
        Queries x positions: the query's clicks logged at each position.
    listed : pandas.Series
        Per query, what F-beta's denominator adds (``k``, or ``min(k, n)`` under
        ``short_lists="shrink"``, times its coefficient); 0 for recall.
    a, b : float
        The coefficients of the numerator and of the clicks in the denominator.
    """

    numerator: pd.DataFrame
    denominator: pd.DataFrame
    listed: pd.Series
    a: float
    b: float

    def parts(self, q: pd.Index) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The sums of the queries ``q``, each total ``(c @ S) . w + c @ K`` of a ``(S, K)``: the
        numerator's ``(numerator, None)`` and the denominator's ``(b denominator, listed)``."""
        return [(self.numerator.loc[q].to_numpy(), None),
                (self.b * self.denominator.loc[q].to_numpy(), self.listed.loc[q].to_numpy())]

    def value(self, totals: list[tuple]) -> np.ndarray:
        """The ratio from the totals of :meth:`parts` (see :func:`_total`): where a resample's curve
        gives a position with clicks no finite weight, the ratio's limit as that weight grows, the
        share of those clicks in the numerator; NaN where the denominator is 0."""
        (num, num_inf), (den, den_inf) = totals
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den_inf > 0, self.a * num_inf / den_inf,
                            np.where(den != 0, self.a * num / den, np.nan))


def position_sums(ev) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(positions, weights, sums)``: the logged positions with a click, the weight each click there
    got, and per (model, metric label) a DataFrame of ``S`` (queries x positions), indexed by query
    id, such that each per-query value is ``S @ weights``; for a ratio pooled over the queries, a
    :class:`Ratio` of its numerator's and denominator's sums."""
    held = _SUMS.get(ev)
    if held is not None:
        return held
    from ..backends.cpu import CPU
    from ..engine import build_results, evaluate_grouped, make_plan
    from ..metrics import FAMILIES
    from ..metrics.pooled import listed

    conv = ev.conventions
    labels = list(ev.metrics)
    names = ev.info.get("metric_names", {})
    plan = make_plan([names.get(label, label) for label in labels], conv, clicks=True)
    kinds = {label: FAMILIES[m.family].ips for label, m in zip(labels, plan.metrics)}
    other = [label for label, kind in kinds.items() if kind not in ("ips", "pooled")]
    if other:
        raise ParameterError(f"{', '.join(other)}: no interval carries an estimated curve's uncertainty for this "
                             "estimator (only the sums of weighted clicks, precision, tp, dcg and rbp, and the ratios "
                             "of such sums pooled over the queries, recall_micro, f1_micro and fbeta_micro, are); "
                             f"evaluate the others apart, or {KNOWN}.")
    linear = [label for label in labels if kinds[label] == "ips"]
    pooled = [label for label in labels if kinds[label] == "pooled"]
    linear_plan = make_plan([names.get(label, label) for label in linear], conv) if linear else None
    # the pooled ratios: the same kernel as the metric's (its relevance threshold, its kind of hits), per part
    pooled_parts = make_plan([names.get(label, label) for label in pooled], conv, clicks=True).parts() \
        if pooled else []
    log = next(iter(ev.sources()))[0]
    clicked = log.relevant(conv)
    pos = log.rows["position"]
    weights = log.rows["ips_weight"]
    positions = np.unique(pos[clicked])
    shown_weights = np.array([weights[clicked & (pos == j)][0] for j in positions])
    sums: dict = {}
    ratios: dict = {}  # (model, label) -> [numerator, denominator, listed, metric]
    for part in pooled_parts:
        for model in log.scores:
            st = CPU.compute(log, model, part, log.judgments(part.conv))
            for name, m in zip(part.names, part.metrics):
                for label in (label for label in pooled if names.get(label, label) == name):
                    ratios[(model, label)] = [np.zeros((log.n_queries, len(positions))),
                                              np.zeros((log.n_queries, len(positions))),
                                              _coefficients(m)[2] * listed(st, m, part.conv), m]
    for i, j in enumerate(positions):
        one = log.with_scores(log.scores)
        one.rows = {**log.rows, "ips_weight": np.where(clicked, (pos == j).astype(np.float64), 1.0)}
        if linear_plan is not None:
            batch, _ = evaluate_grouped(one, linear_plan, backend=CPU)
            pq = build_results([batch], linear_plan, query_name=ev.query_name).per_query
            for model, frame_part in pq.groupby("model", sort=False):
                frame_part = frame_part.set_index(ev.query_name)
                for label, column in zip(linear, linear_plan.labels):
                    frame = sums.setdefault((model, label), pd.DataFrame(index=frame_part.index,
                                                                         columns=range(len(positions)),
                                                                         dtype=np.float64))
                    frame[i] = frame_part[column].to_numpy(np.float64)
        for part in pooled_parts:  # the clicks weighed 1 at position j only: its share of each sum
            for model in log.scores:
                st = CPU.compute(one, model, part, one.judgments(part.conv))
                for name, m in zip(part.names, part.metrics):
                    for label in (label for label in pooled if names.get(label, label) == name):
                        ratios[(model, label)][0][:, i] = st.h[:, st.column(m.k)]
                        ratios[(model, label)][1][:, i] = st.Rw
    ids = pd.Index(log.queries)
    for key, (numerator, denominator, fixed, m) in ratios.items():
        sums[key] = Ratio(pd.DataFrame(numerator, index=ids), pd.DataFrame(denominator, index=ids),
                          pd.Series(fixed, index=ids), *_coefficients(m)[:2])
    held = (positions, shown_weights, sums)
    _SUMS[ev] = held
    return held


def _coefficients(m) -> tuple[float, float, float]:
    """``(a, b, c)`` of a pooled ratio ``a sum h / (b sum R + c sum k)``, as
    :mod:`topkeval.metrics.pooled` computes it (divided by ``beta ** 2`` for beta >= 1; recall's
    ``c`` is 0)."""
    if m.family == "recall_micro":
        return 1.0, 1.0, 0.0
    beta = 1.0 if m.family == "f1_micro" else float(m.param("beta"))
    if beta >= 1:
        inv = 1.0 / (beta * beta)
        return inv + 1.0, 1.0, inv
    b2 = beta * beta
    return 1.0 + b2, b2, 1.0


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


@dataclass(frozen=True)
class Block:
    """One statistic to resample: the rows of ``queries`` in each of ``parts`` (``(S, K)``: sums per
    position, and a term per query that no weight changes, or None), the query weights (or None), and
    ``value``, the statistic from the parts' totals ``sum_q c_q u_q (S_q . w + K_q)`` and the total
    weight ``sum_q c_q u_q``."""

    queries: pd.Index
    parts: list
    weights: np.ndarray | None
    value: object

    @classmethod
    def mean(cls, queries: pd.Index, S: np.ndarray, weights: np.ndarray | None = None) -> Block:
        """The (weighted) mean of the per-query values ``S . w``."""
        return cls(queries, [(S, None)], weights, _mean)


def _mean(totals: list[tuple], weight) -> np.ndarray:
    """The mean ``total / weight``; infinite where a resample's curve gives a position with clicks no
    finite weight."""
    total, infinite = totals[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(infinite != 0, np.sign(infinite) * np.inf, total / weight)


def _total(sums: np.ndarray, fixed, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sums . w + fixed`` per resample, as its finite part and the sum of the ``sums`` whose weight
    is infinite (a resample whose curve is 0 at a position: the statistic's limit as that weight
    grows); a position without a click adds 0, whatever its weight."""
    infinite = np.isinf(w)
    with np.errstate(invalid="ignore"):
        finite = np.where((sums != 0) & ~infinite, sums * np.where(infinite, 0.0, w), 0.0).sum(axis=-1) + fixed
    return finite, np.where(infinite, sums, 0.0).sum(axis=-1)


def resamples(ev, blocks: list, n_resamples: int, seed, deviation: bool = False) -> tuple[list, list]:
    """For each block (a :class:`Block`, or ``(queries, S, u)`` for the mean of ``S . w``), its
    statistic on each resample: the queries' counts ``c`` and the curve's weights ``w_b`` fitted
    again on the resampled queries of the curve's log; the same counts and curves for every block
    (each block's numbers depend on the seed and its own queries only). With ``deviation``, also the
    curve's own deviation of each block's statistic over all its queries, ``value(w_b) - value(w)``
    (for a mean, ``sum_j (w_bj - w_j) Dbar_j``)."""
    positions, weights, _ = position_sums(ev)
    bias = ev.estimated_curve
    clip = (ev.info.get("ips") or {}).get("clip")
    eval_ids = pd.Index(ev.per_query[ev.query_name].unique())
    blocks = [b if isinstance(b, Block) else Block.mean(*b) for b in blocks]
    at = [eval_ids.get_indexer(b.queries) for b in blocks]
    out: list[list] = [[] for _ in blocks]
    dev: list[list] = [[] for _ in blocks]
    whole = []  # per block: the sums over every query, and the statistic under the curve as estimated
    for b in blocks:
        u = np.ones(len(b.queries)) if b.weights is None else b.weights
        parts = [(u @ S, 0.0 if K is None else float(u @ K)) for S, K in b.parts]
        whole.append((parts, float(u.sum()), b.value([_total(S, K, weights) for S, K in parts], float(u.sum()))))
    streams = counts(bias.queries, eval_ids, n_resamples, seed)
    for curve_counts, eval_counts in streams:
        w = _curve_weights(bias, positions, curve_counts, clip)
        for i, b in enumerate(blocks):
            c = eval_counts[:, at[i]]
            cu = c if b.weights is None else c * b.weights
            totals = [_total(cu @ S, 0.0 if K is None else cu @ K, w) for S, K in b.parts]
            out[i].append(b.value(totals, cu.sum(axis=1)))
            if deviation:
                parts, weight, estimate = whole[i]
                with np.errstate(invalid="ignore"):
                    dev[i].append(b.value([_total(S, K, w) for S, K in parts], weight) - estimate)
    return ([np.concatenate(o) if o else np.zeros(0) for o in out],
            [np.concatenate(o) if o else np.zeros(0) for o in dev])


def estimate(ev, block) -> float:
    """A block's statistic on every query once, under the curve as estimated."""
    _, weights, _ = position_sums(ev)
    b = block if isinstance(block, Block) else Block.mean(*block)
    u = np.ones(len(b.queries)) if b.weights is None else b.weights
    return float(b.value([_total(u @ S, 0.0 if K is None else float(u @ K), weights) for S, K in b.parts],
                         float(u.sum())))


def _block(sums: dict, model: str, metric: str, q: pd.Index, u: np.ndarray | None) -> Block:
    """The block of one model's metric over the queries ``q``: a mean, or a pooled ratio."""
    held = sums[(model, metric)]
    if isinstance(held, Ratio):
        return Block(q, held.parts(q), None, lambda totals, weight, r=held: r.value(totals))
    return Block.mean(q, held.loc[q].to_numpy(), u)


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
                blocks.append(_block(sums, model, metric, q, u))
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
    blocks, flipped = [], []
    for i in live:
        r = rows[i]
        q, u = r["queries"], r["w"]
        model, base = sums[(r["model"], r["metric"])], sums[(r["baseline"], r["metric"])]
        if isinstance(model, Ratio):  # the difference of two pooled ratios, each resampled as a ratio
            blocks.append(Block(q, model.parts(q) + base.parts(q), None,
                                lambda t, _, a=model, b=base, shift=r["shift"]:
                                np.ldexp(a.value(t[:2]) - b.value(t[2:]), -shift)))
            flipped.append(r["m"] - r["b"])  # the paired linearised shares
            continue
        S = model.loc[q].to_numpy() - base.loc[q].to_numpy()
        S = np.ldexp(S, -r["shift"])  # as the row's values: scaled by a power of 2 where they are huge
        blocks.append(Block.mean(q, S, u))
        flipped.append(S @ weights)
    boot_list, deviation = resamples(ev, blocks, n_resamples, seed, deviation=test == "permutation")
    # reflected about the estimate: their percentiles are the basic bootstrap interval (the bootstrap
    # test's |boot - estimate| is the same either way)
    boot = {i: 2 * estimate(ev, block) - b for i, block, b in zip(live, blocks, boot_list)}
    perm: dict = {}
    if test == "permutation":
        for j, i in enumerate(live):
            u = blocks[j].weights
            r = rows[i]  # each row's signs seeded by what it compares: the same whichever rows the call holds
            key = repr((tuple(r["key"].items()), r["model"], r["metric"])).encode()
            rng = np.random.default_rng(None if seed is None else [seed, zlib.crc32(key)])
            x = flipped[j] if u is None else u * flipped[j]
            total = len(x) if u is None else u.sum()
            flips = np.empty(n_resamples)
            for start in range(0, n_resamples, 1024):
                signs = rng.choice((-1.0, 1.0), size=(min(1024, n_resamples - start), len(x)))
                flips[start:start + len(signs)] = signs @ x / total
            perm[i] = flips + deviation[j]
    return boot, perm
