"""Paired comparison of models: confidence intervals, significance tests, multiple-testing corrections.

Everything here works on per-query values (``Results.per_query``); nothing re-ranks.

For a model M, a baseline B and a metric, with ``d_i = M_i - B_i`` over the n queries both were
evaluated on:

* ``delta = mean(d)``, ``relative_delta = delta / mean(B)``;
* ``ci_low, ci_high``: a paired bootstrap percentile interval of ``delta`` (queries resampled with
  replacement; each row's resamples seeded by the call's seed and what the row compares, its
  segment, model and metric, so a row's interval does not depend on which other rows the call holds);
  with ``interval="t"``, the paired t interval ``delta +- t_{(1 + confidence) / 2}(n - 1) sqrt(V / n)``,
  V the variance of the differences (``n - 1`` in its denominator): Sakai's margin of error of a
  difference (*Statistical Reform in Information Retrieval?*, SIGIR Forum 2014; the interval the
  paired t-test inverts);
* ``p_value`` of H0 "no difference", two-sided, by the chosen test:

  - ``"permutation"``: sign-flip randomisation of the ``d_i`` (Fisher's paired randomisation test),
    exact by enumerating all ``2**n`` sign vectors when that is at most ``n_resamples``, otherwise
    Monte Carlo with ``p = (1 + #{|T*| >= |T|}) / (1 + n_resamples)``;
  - ``"t"``: the paired t-test (``scipy.stats.ttest_rel``);
  - ``"wilcoxon"``: the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, zero differences
    dropped as Wilcoxon did);
  - ``"bootstrap"``: the studentized paired bootstrap test (bootstrap-t; Efron & Tibshirani 1993,
    16.4 and 12.5): ``T = mean(d) / se``, each resample's ``T* = (mean* - mean(d)) / se*`` (its own
    standard error), ``p = (1 + #{|T*| >= |T|}) / (1 + n_resamples)``. Studentizing keeps the test at
    its level on few queries, where shifting the resampled means alone rejects too often (9.5% at
    n = 10 for a 5% test); measured in tests/test_compare.py and docs/how-to/compare.md.

  When every ``d_i`` is 0 the p-value is 1 (nothing to detect), whatever the test.
* ``p_adjusted``: Holm, Bonferroni or Benjamini-Hochberg over every (model, metric) row of the call;
* ``effect_size``: Cohen's d of the paired differences (often written d_z), ``mean(d) / sd(d)``: the mean
  difference in units of its own spread over the queries (not :meth:`~topkeval.Results.compare_all`'s ``es_e``,
  which divides by the residual standard deviation of the two-way ANOVA of every model);
* ``wins / ties / losses``: queries where M scores above / equal to / below B (equal: within 1e-12);
* ``detectable_delta``: detectable at this size: the smallest mean difference a two-sided paired
  t-test at ``1 - confidence`` finds with probability 0.8, given the spread of these ``d_i`` and their
  number (noncentral t; :meth:`topkeval.Results.queries_needed` sizes a study); NaN with weights;
  ``inf`` for a metric in [0, 1] (:func:`topkeval.analysis.many.unit_range`: not inverse propensity
  weighted, every value in [0, 1]) when that difference would exceed 1: with so few queries, no
  difference the metric can take is detectable.

With query weights (``evaluate(..., weight=)``), means are weighted, ``delta = sum(w d) / sum(w)``;
the bootstrap resamples queries with replacement and takes the same weighted mean of each resample
(``sum(c w d) / sum(c w)``, c the counts: the ratio estimator of a weighted mean); the permutation
test flips the signs of the ``w d`` (exact under H0 that each d is symmetric about 0); Cohen's d
uses the weighted standard deviation (weights rescaled to mean 1, n - 1 degrees of freedom); t and Wilcoxon have no weighted form and are refused.
With segments (``evaluate(..., by=)``) every row is computed within each segment and over every
query (segment columns ``"(all)"``), and the correction runs over all of these rows.
The corrected estimates of a sampled evaluation (``evaluate_sampled``'s ``[corrected:...]``
columns) get no interval (``ci_low``, ``ci_high`` NaN, in ``summary_ci`` too): one over users and
draws would leave out the correction's bias, which the sample cannot measure
(:func:`topkeval.analysis.sampled.without_interval`); their tests and verdicts stand.

Per-query values that are terms of an estimate (an off-policy estimate's rounds, a click log's
inverse propensity weighted queries: ``info["per_query_terms"]``, :mod:`topkeval.engine.terms`):
the permutation, t and bootstrap tests test their mean difference, the estimates' difference; the
Wilcoxon test ranks them as outcomes and is refused, and wins / ties / losses (outcomes too) are
left out. An estimate the evaluation refused (``info["refused"]``) gets the verdict ``refused``, its
reason in the table's ``attrs["refused"]``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from .. import stattests
from ..engine import terms as _terms
from ..engine.aggregate import scaled_weights, total_weight, unscale, value_shift, weighted_mean
from ..engine.unbiased import check_decision
from ..errors import ParameterError, check_choice, did_you_mean
from . import curve_ci
from .many import TIE, detectable_delta, unit_range
from .many import all_equal as _all_equal
from .sampled import without_interval
from .segments import groups

TESTS = stattests.PAIRED
#: the intervals of compare (of a difference) and summary_ci (of a mean)
#: the confidence intervals of compare (``interval=``) and summary_ci (``method=``), default first
INTERVALS = tuple(stattests.INTERVALS)
#: ``"none"`` and None both mean no correction (the command line's ``--correction none``).
CORRECTIONS = ("holm", "bonferroni", "bh", "none", None)
_EXACT_MAX_N = 20  # enumerate sign vectors up to 2**20


def adjust(p_values, method: str | None) -> np.ndarray:
    """Adjust p-values for multiple testing.

    Parameters
    ----------
    p_values : array-like
        Raw p-values; NaN entries stay NaN and do not count as tests.
    method : {"holm", "bonferroni", "bh", "none", None}
        Holm's step-down, Bonferroni, Benjamini-Hochberg step-up, or no adjustment (``"none"``
        or None).

    Returns
    -------
    ndarray
        Adjusted p-values, capped at 1, monotone in the raw ones (Holm and BH enforce it).

    Examples
    --------
    >>> adjust([0.01, 0.04, 0.03], "holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust([0.01, 0.04, 0.03], "bh").round(4).tolist()
    [0.03, 0.04, 0.04]
    >>> adjust([0.01, 0.04, 0.03], "none").tolist()
    [0.01, 0.04, 0.03]
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    q = p[ok]
    if method is None or method == "none":
        adj = q.copy()
    elif method == "bonferroni":
        adj = np.minimum(1.0, q * m)
    elif method == "holm":
        order = np.argsort(q, kind="stable")
        stepped = np.maximum.accumulate((m - np.arange(m)) * q[order])
        adj = np.empty(m)
        adj[order] = np.minimum(1.0, stepped)
    elif method == "bh":
        from scipy.stats import false_discovery_control

        adj = false_discovery_control(q, method="bh")
    else:
        check_choice(method, CORRECTIONS, "correction", "adjust")
    out[ok] = adj
    return out


def _resampled(blocks: list, n_resamples: int, rng: np.random.Generator, kind: str, keys=None) -> list:
    """Resampled sums of each block's columns (see :func:`topkeval.kernels.resample.resampled_sums`)."""
    from ..kernels.resample import resampled_sums

    return resampled_sums(blocks, n_resamples, rng, kind, keys)


def _exact_sign_flip_p(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value by enumerating all 2**n sign vectors."""
    n = len(d)
    observed = abs(d.mean())
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
    stats = np.abs(signs @ d / n)
    return float(np.mean(stats >= observed - 1e-12 * max(1.0, observed)))


def _p_value(test: str, d: np.ndarray, m: np.ndarray, b: np.ndarray, perm_stats, boot_stats, n_resamples: int,
             w: np.ndarray | None = None, stud: tuple | None = None) -> float:
    """The p-value of H0 "no difference" by ``test`` (its implementation registered below)."""
    wd = d if w is None else w * d
    if np.all(wd == 0):
        return 1.0
    if len(d) < stattests.TESTS[test].min_n:
        return math.nan
    return stattests.implementation(test)(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud)


@stattests.implement("t")
def _t_p(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud) -> float:
    from scipy import stats

    if _all_equal(d):  # every query differs by the same amount: t is infinite (scipy warns instead)
        return 0.0
    return float(stats.ttest_rel(m, b).pvalue)


@stattests.implement("wilcoxon")
def _wilcoxon_p(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud) -> float:
    from scipy import stats

    return float(stats.wilcoxon(m, b, zero_method="wilcox").pvalue)


def _observed(d: np.ndarray, wd: np.ndarray, w: np.ndarray | None) -> tuple[float, float, float]:
    """(the mean difference, its size, the tolerance a resampled statistic's size is counted within)."""
    mean = float(d.mean()) if w is None else float(wd.sum() / w.sum())
    return mean, abs(mean), 1e-12 * max(1.0, abs(mean))


@stattests.implement("permutation")
def _permutation_p(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud) -> float:
    if perm_stats is None:
        return _exact_sign_flip_p(wd)  # the weighted statistic is mean(w d) scaled by n / sum(w)
    _, observed, tol = _observed(d, wd, w)
    return float((1 + np.sum(np.abs(perm_stats) >= observed - tol)) / (1 + n_resamples))


@stattests.implement("bootstrap")
def _bootstrap_p(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud) -> float:
    if stud is not None:  # the studentized bootstrap (bootstrap-t): |T*| against |T|, a NaN T* counted as extreme
        return float((1 + np.sum(~(np.abs(stud[1]) < abs(stud[0]) * (1 - 1e-12)))) / (1 + n_resamples))
    # bootstrap: shift the resampled means to the null hypothesis (a resample without weight counts as extreme)
    mean, observed, tol = _observed(d, wd, w)
    shifted = np.abs(boot_stats - mean)
    return float((1 + np.sum(~(shifted < observed - tol))) / (1 + n_resamples))


def t_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """``mean +- t_{(1 + confidence) / 2}(n - 1) sqrt(V / n)`` of the values, V their variance (``n - 1``
    in its denominator): Sakai's margin of error (MOE) around a mean, or around a mean difference
    when the values are paired differences. NaN below 2 values; the mean itself, a zero-width
    interval, when every value is the same (to rounding: :func:`topkeval.analysis.many.all_equal`).

    >>> [round(x, 4) for x in t_interval(np.array([0.0, 0.2, 0.2]), 0.95)]  # Sakai's paired example
    [-0.1535, 0.4202]
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    n = len(v)
    if n < 2:
        return math.nan, math.nan
    shift = value_shift(v)  # values of 1e300 divided by a power of 2 (exact), the bounds scaled back
    v = np.ldexp(v, -shift)
    mean = float(v.mean())
    if _all_equal(v):
        return tuple(unscale([mean, mean], shift))  # type: ignore[return-value]
    from scipy import stats

    moe = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(v.std(ddof=1)) / math.sqrt(n)
    low, high = unscale([mean - moe, mean + moe], shift)
    return low, high


def _cohen_d(delta: float, sd: float) -> float:
    if math.isnan(sd):
        return math.nan
    if sd > 0:
        return delta / sd
    return 0.0 if delta == 0 else math.copysign(math.inf, delta)


def _weighted_stats(d: np.ndarray, m: np.ndarray, b: np.ndarray, w: np.ndarray | None):
    """(value, baseline, delta, sd of d): plain, or weighted with ``w``."""
    if w is None:
        value, base = float(m.mean()), float(b.mean())
        sd = (0.0 if _all_equal(d) else float(d.std(ddof=1))) if len(d) > 1 else math.nan
        return value, base, value - base, sd
    total = float(w.sum())
    if total <= 0:
        return math.nan, math.nan, math.nan, math.nan
    value, base = float((w * m).sum() / total), float((w * b).sum() / total)
    mean_d = float((w * d).sum() / total)
    n = len(d)  # weights rescaled to mean 1, then n - 1 degrees of freedom: equal weights give the plain sd
    sd = (0.0 if _all_equal(d) else math.sqrt(float((w * (d - mean_d) ** 2).sum() / total) * n / (n - 1))) \
        if n > 1 else math.nan
    return value, base, value - base, sd


def _paired(per_query: pd.DataFrame, rows_of, query: str, model: str, baseline: str, metrics, missing: str):
    a = per_query[rows_of(model)].set_index(query)[metrics]
    b = per_query[rows_of(baseline)].set_index(query)[metrics]
    if missing == "zero":
        queries = a.index.union(b.index, sort=False)
        a_has, b_has = queries.isin(a.index), queries.isin(b.index)
        a, b = a.reindex(queries), b.reindex(queries)
        a.loc[~a_has, :] = 0.0  # a query the model lacks scores 0 (its undefined values stay NaN)
        b.loc[~b_has, :] = 0.0
        left_out = 0
    else:
        queries = a.index.intersection(b.index, sort=False)
        left_out = len(a.index.union(b.index)) - len(queries)
        a, b = a.loc[queries], b.loc[queries]
    return a, b, left_out


def compare(results, baseline: str | None = None, *, metrics=None, test: str = "permutation",
            correction: str | None = "holm", confidence: float = 0.95, n_resamples: int = 10_000,
            seed: int | None = 0, missing: str = "intersect", interval: str = "bootstrap") -> pd.DataFrame:
    """Compare every model of ``results`` with a baseline, metric by metric, on paired queries.

    See the module docstring for the definitions. ``Results.compare`` calls this.

    Parameters
    ----------
    results : Results
        With two or more models.
    baseline : str, optional
        The baseline model (default: the first).
    metrics : list of str, optional
        Metrics to compare (default: all of ``results``).
    test : {"permutation", "t", "wilcoxon", "bootstrap"}
    correction : {"holm", "bonferroni", "bh", "none", None}
        Applied across every (model, metric) row of the call; ``"none"`` (or None): no correction,
        ``p_adjusted`` equals ``p_value``. The columns of a sampled evaluation (``evaluate_sampled``)
        are estimates of the same metrics by several estimators: the correction runs over each
        estimator's rows apart (the full catalogue's, ``[sampled:...]``'s, each ``[corrected:...]``'s), so
        that the full catalogue's verdicts are those of ``evaluate_matrix`` whatever the sampling seed.
    confidence : float
        Level of the bootstrap intervals; ``significant`` is ``p_adjusted < 1 - confidence``.
    n_resamples : int
        Bootstrap resamples and Monte Carlo sign flips.
    seed : int or None
        Seed of the resampling; a fixed seed gives identical output.
    missing : {"intersect", "zero"}
        Queries one model lacks: left out (counted in the ``left_out`` column), or scored 0 for
        the model that lacks them.
    interval : {"bootstrap", "t"}
        ``ci_low, ci_high``: the paired bootstrap percentile interval, or the paired t interval
        (``delta +- t sqrt(V / n)``, V the variance of the differences; no weighted form).

    Returns
    -------
    pandas.DataFrame
        One row per (model, metric): ``model, metric, verdict, baseline, value, delta,
        relative_delta, ci_low, ci_high, p_value, p_adjusted, significant, wins, ties, losses,
        effect_size, n_queries, left_out, detectable_delta``. ``verdict`` is ``better`` or ``worse`` when the
        difference is significant after the correction, ``refused`` when the evaluation refused the
        model's or the baseline's estimate (its reason in ``attrs["refused"]``), ``no query to compare``
        when no paired query has a value (``n_queries`` 0), else ``no detectable difference``. On
        per-query values that are terms of an estimate, ``wins, ties, losses`` are left out and
        ``test="wilcoxon"`` is refused.

    Examples
    --------
    >>> import topkeval as tk
    >>> log = {"query": [1, 1, 2, 2, 3, 3, 3], "relevance": [1, 0, 1, 0, 0, 1, 0],
    ...        "old": [0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.0], "new": [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.0]}
    >>> res = tk.evaluate(log, metrics=["recall@1"], score=["old", "new"])
    >>> row = res.compare(baseline="old", test="permutation").iloc[0]
    >>> print(row.delta, row.p_value, row.wins, row.losses)  # exact: all 2**3 sign flips enumerated
    0.3333333333333333 1.0 2 1
    """
    models = list(results.summary.index)
    if len(models) < 2:
        raise ParameterError(f"compare needs two or more models; these results have {len(models)}. Evaluate several "
                             "score columns (score=[...]), or a stacked table whose model= column holds several "
                             "models (--model in the command line).")
    baseline = models[0] if baseline is None else baseline
    if baseline not in models:
        raise ParameterError(f"baseline {baseline!r} is not a model of these results.{did_you_mean(str(baseline), models)} "
                             f"Models: {', '.join(map(repr, models))}.")
    # test, correction, confidence, n_resamples, seed and missing are checked by Results.compare (topkeval.params)
    if curve_ci.estimated(results):  # its refusal first: it names the tests that hold with an estimated curve
        curve_ci.check_test(test)
    _terms.check_test(results.info, test, "compare")
    results.require_rows("compare")
    all_metrics = list(results.summary.columns)
    if metrics is None:
        metrics = all_metrics
    else:
        metrics = list(dict.fromkeys(results.label(m) for m in ([metrics] if isinstance(metrics, str) else metrics)))
    check_decision(results.info, "compare", metrics)  # click estimates clipped or too skewed: no interval, no verdict

    weight = results.weight
    if weight and not stattests.TESTS[test].weighted:
        raise ParameterError(f"test={test!r} has no weighted form; with query weights (weight=) use "
                             f"{stattests.choices(stattests.names('pair', weighted=True))}.")
    if weight and not stattests.INTERVALS[interval].weighted:
        raise ParameterError(f"interval={interval!r} has no weighted form; with query weights (weight=) use "
                             f"{stattests.choices(stattests.interval_names(weighted=True), key='interval')}.")
    rng = np.random.default_rng(seed)
    alpha = 1.0 - confidence
    rows = _pairs(results, baseline, metrics, missing)
    curve = curve_ci.estimated(results)
    if curve and not stattests.INTERVALS[interval].refits_curve:
        usable = " or ".join(f"interval={name!r}" for name in stattests.interval_names(refits_curve=True))
        raise ParameterError(f"interval={interval!r} takes the per-query differences as the only source of noise, but "
                             "these results weigh the clicks by a curve estimated by estimate_position_bias, whose own "
                             f"uncertainty it would leave out: use {usable} (which refits the curve on every "
                             "resample).")
    stud: dict = {}
    if curve:  # an estimated examination curve: fitted again on every resample (topkeval.analysis.curve_ci)
        boot, perm = curve_ci.compare_resamples(results, rows, test, n_resamples, seed)
    else:
        boot, perm, stud = _resamples(rows, bool(weight), test, n_resamples, rng)
    out = [_row(r, boot.get(i), perm.get(i), test, n_resamples, alpha, stud.get(i), interval)
           for i, r in enumerate(rows)]
    frame = pd.DataFrame(out)
    if curve and len(frame):  # a paired t-test's detectable difference leaves the curve's uncertainty out
        frame["detectable_delta"] = math.nan
    withheld = without_interval(results, metrics)  # corrected estimates of sampled evaluation: bias unknown
    if withheld:
        frame.loc[frame["metric"].isin(withheld), ["ci_low", "ci_high"]] = np.nan
    frame.insert(frame.columns.get_loc("p_value") + 1, "p_adjusted",
                 _adjust_per_estimator(frame, correction, {label: results.metric(label).estimate for label in metrics}))
    frame.insert(frame.columns.get_loc("p_adjusted") + 1, "significant", frame["p_adjusted"] < alpha)
    frame.insert(frame.columns.get_loc("metric") + 1, "verdict", [verdict(r) for r in frame.itertuples()])
    frame.attrs["n_resamples"] = n_resamples
    refused = {}
    for i, r in enumerate(frame.itertuples()):
        why = _terms.refusal(results.info, r.model, r.metric) or _terms.refusal(results.info, baseline, r.metric)
        if why is not None:
            refused[(r.model, r.metric)] = why
            frame.iat[i, frame.columns.get_loc("verdict")] = "refused"
    frame.attrs["refused"] = refused
    if _terms.estimator_terms(results.info) is not None:  # a query's term is no outcome: nothing won or lost
        frame = frame.drop(columns=["wins", "ties", "losses"])
        frame.attrs.update(n_resamples=n_resamples, refused=refused,
                           per_query_terms=_terms.estimator_terms(results.info))
    frame.attrs["interval"] = interval
    return frame


def _adjust_per_estimator(frame: pd.DataFrame, correction: str | None, estimates: dict[str, str]) -> np.ndarray:
    """The adjusted p-values of compare's rows: one family per estimator of the metrics (``estimates``:
    each column label's :attr:`Metric.estimate <topkeval.metrics.names.Metric>`, a sampled
    evaluation's ``corrected:bv`` of ``ndcg@10[corrected:bv]``; "" for a metric itself), each adjusted
    apart; one family, every row, for any other evaluation."""
    out = np.full(len(frame), np.nan)
    if not len(frame):
        return out
    families: dict[str, list[int]] = {}
    for i, label in enumerate(frame["metric"]):
        families.setdefault(estimates[label], []).append(i)
    p = frame["p_value"].to_numpy(dtype=np.float64)
    for idx in families.values():
        out[idx] = adjust(p[idx], correction)
    return out


def _pairs(results, baseline: str, metrics: list, missing: str) -> list[dict]:
    """Per segment, model and metric: the paired values ``m`` (model) and ``b`` (baseline) of the
    queries both have with a value (and a positive weight), their scaled weights ``w`` and total."""
    weight = results.weight
    query_weights = results.attributes[weight] if weight else None
    rows = []
    for key, per_query in (groups(results) if results.by else [({}, results.per_query)]):
        # the model column hashed once per table (comparing its text row by row costs more than the rest)
        codes, names = pd.factorize(per_query["model"])
        at = {name: i for i, name in enumerate(names)}

        def rows_of(name, codes=codes, at=at):
            return codes == at.get(name, -2)

        for model in results.models:
            if model == baseline:
                continue
            a, b, left_out = _paired(per_query, rows_of, results.query_name, model, baseline, metrics, missing)
            w_all = None if query_weights is None else query_weights.reindex(a.index).to_numpy(float)
            for metric in metrics:
                ma, mb = a[metric].to_numpy(float), b[metric].to_numpy(float)
                ok = ~(np.isnan(ma) | np.isnan(mb))  # undefined values (undefined=nan) drop the pair
                if w_all is not None:
                    ok &= w_all > 0  # a query of weight 0 counts nowhere (as if repeated 0 times)
                # values of 1e300 divided by a power of 2 (exact), the means and intervals scaled back
                shift = value_shift(ma[ok], mb[ok])
                # weights scaled by a power of 2 (exact): weights of 1e308 or 5e-324 neither overflow nor underflow
                rows.append(dict(key=key, model=model, baseline=baseline, metric=metric, queries=a.index[ok],
                                 unit=unit_range(results, metric, ma[ok], mb[ok]),
                                 m=np.ldexp(ma[ok], -shift),
                                 b=np.ldexp(mb[ok], -shift), shift=shift, left_out=left_out,
                                 w=None if w_all is None else scaled_weights(w_all[ok]),
                                 total=None if w_all is None else total_weight(w_all[ok])))
    return rows


def _resamples(rows: list[dict], weighted: bool, test: str, n_resamples: int, rng) -> tuple[dict, dict, dict]:
    """The bootstrap means of each row's differences, for a Monte Carlo permutation test its
    sign-flipped means, and for the bootstrap test its studentized statistics ``(T, T*)``: every row
    resampled in one parallel pass (each exactly, see :func:`_resampled`)."""
    live = [i for i, r in enumerate(rows) if len(r["m"])]
    diffs = {i: rows[i]["m"] - rows[i]["b"] for i in live}
    # weighted: the resampled ratio sum(c w d) / sum(c w) (c: bootstrap counts), and sign flips of w d
    blocks = [np.column_stack([rows[i]["w"] * diffs[i], rows[i]["w"]]) if weighted else diffs[i][:, None]
              for i in live]
    draws = stattests.TESTS[test].draws
    if draws == "bootstrap-t":  # the columns the resample's standard error needs (the same draws: d decides them)
        blocks = [np.column_stack([block, _spread_columns(diffs[i], rows[i]["w"])]) for block, i in zip(blocks, live)]
    # each row's resamples keyed by what it compares: the same whichever other rows the call holds
    keys = {i: (tuple(rows[i]["key"].items()), rows[i]["model"], rows[i]["metric"]) for i in live}
    boot: dict = {}
    perm: dict = {}
    stud: dict = {}
    flipped = [i for i in live if draws == "sign flips" and not (len(diffs[i]) <= _EXACT_MAX_N
                                                                and 2 ** len(diffs[i]) <= n_resamples)]
    at = {i: j for j, i in enumerate(live)}
    # the bootstrap and the sign flips in one parallel pass (as if one after the other, with rng)
    from ..kernels.resample import resampled_passes

    sums, flips = resampled_passes([(blocks, "bootstrap", [keys[i] for i in live]),
                                    ([blocks[at[i]][:, :1] for i in flipped], "signs", [keys[i] for i in flipped])],
                                   n_resamples, rng)
    for j, i in enumerate(live):
        n = len(diffs[i])
        if weighted:
            with np.errstate(invalid="ignore", divide="ignore"):
                boot[i] = sums[j][:, 0] / sums[j][:, 1]
        else:
            boot[i] = sums[j][:, 0] / n
        if draws == "bootstrap-t":
            stud[i] = _studentized(diffs[i], rows[i]["w"], sums[j][:, 2 if weighted else 1:])
    for j, i in enumerate(flipped):
        n = len(diffs[i])
        perm[i] = flips[j][:, 0] / (rows[i]["w"].sum() if weighted else n)
    return boot, perm, stud


def _spread_columns(d: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Per query, the columns whose resampled sums give a resample's mean and standard error: with
    ``x`` the differences centred on their (weighted) mean and scaled by a power of 2 to at most 1,
    ``x, x^2`` (plain) or ``w x, w, w^2 x^2, w^2 x, w^2`` (weighted: the ratio estimator's
    linearised variance ``sum c w^2 (x - xbar)^2 / (sum c w)^2``)."""
    x = _centred(d, w)
    if w is None:
        return np.column_stack([x, x * x])
    return np.column_stack([w * x, w, w * w * x * x, w * w * x, w * w])


def _centred(d: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    mean = d.mean() if w is None else (w * d).sum() / w.sum()
    x = d - mean
    top = float(np.abs(x).max()) if len(x) else 0.0
    return np.ldexp(x, -math.frexp(top)[1]) if top > 0 and math.isfinite(top) else x


def _studentized(d: np.ndarray, w: np.ndarray | None, sums: np.ndarray) -> tuple[float, np.ndarray]:
    """``(T, T*)``: the observed mean over its standard error, and each resample's mean minus the
    observed one over the resample's standard error (the bootstrap-t of Efron & Tibshirani 1993,
    16.4 and 12.5). T* is 0 for a resample without spread that equals the observed mean, infinite
    for one that differs from it, NaN for one without weight."""
    n = len(d)
    x = _centred(d, w)
    scale = float(np.abs(d - (d.mean() if w is None else (w * d).sum() / w.sum())).max()) if n else 0.0
    mean = float(d.mean()) if w is None else float((w * d).sum() / w.sum())
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if w is None:
            se = math.sqrt((x * x).sum() / (n - 1) / n) if n > 1 else math.nan
            centre = sums[:, 0] / n
            var = np.maximum((sums[:, 1] - n * centre * centre) / (n - 1), 0.0) / n
        else:
            se = math.sqrt(float((w * w * x * x).sum())) / float(w.sum())
            total = sums[:, 1]
            centre = sums[:, 0] / total
            var = np.maximum(sums[:, 2] - 2 * centre * sums[:, 3] + centre * centre * sums[:, 4], 0.0) / (total * total)
        star = np.where(var > 0, centre / np.sqrt(var), np.where(np.abs(centre) > 1e-12, np.inf, 0.0))
        star = np.where(np.isnan(centre), np.nan, star)
        observed = (math.ldexp(mean, -math.frexp(scale)[1]) if scale > 0 and math.isfinite(scale) else mean) / se \
            if se > 0 else (math.inf if mean != 0 else 0.0)
    return observed, star


def _row(r: dict, boot, perm, test: str, n_resamples: int, alpha: float, stud: tuple | None = None,
         interval: str = "bootstrap") -> dict:
    """One row of the comparison table from a pair's values and its resamples."""
    m, b, w = r["m"], r["b"], r["w"]
    d = m - b
    n = len(d)
    if n:
        value, base_mean, delta, sd = _weighted_stats(d, m, b, w)
    else:
        value = base_mean = delta = sd = math.nan
    if n and not math.isnan(delta):
        # one query has no spread to resample: no interval (as the t interval), not [delta, delta]
        lo, hi = stattests.interval_implementation(interval, "difference")(d, boot, alpha) if n > 1 else (math.nan,
                                                                                                          math.nan)
        p = _p_value(test, d, m, b, perm, boot, n_resamples, w, stud)
    else:
        lo = hi = p = math.nan
    eps = TIE
    detectable = detectable_delta(d, alpha) if w is None else math.nan
    relative = delta / base_mean if base_mean else math.nan
    effect = _cohen_d(delta, sd)
    if r["shift"]:  # values divided by 2**shift: the means, differences and intervals scaled back
        base_mean, value, delta, lo, hi, detectable = unscale([base_mean, value, delta, lo, hi, detectable],
                                                              r["shift"])
    if detectable > 1 and r["unit"]:  # beyond the largest difference of a metric in [0, 1]: none is
        detectable = math.inf
    return {
        **r["key"], "model": r["model"], "metric": r["metric"], "baseline": base_mean, "value": value, "delta": delta,
        "relative_delta": relative,
        "ci_low": float(lo), "ci_high": float(hi), "p_value": p,
        "wins": int(np.sum(d > eps)), "ties": int(np.sum(np.abs(d) <= eps)), "losses": int(np.sum(d < -eps)),
        "effect_size": effect,
        "n_queries": n, "left_out": r["left_out"], **({"weight": r["total"]} if w is not None else {}),
        "detectable_delta": detectable,
    }


def verdict(row) -> str:
    """``better`` / ``worse`` (significant after correction, by the sign of delta), ``no detectable
    difference``, or ``no query to compare`` (no paired query has a value: the metric is undefined
    on every query, or the two models share no query)."""
    if row.n_queries == 0:
        return "no query to compare"
    if row.significant and row.delta > 0:
        return "better"
    if row.significant and row.delta < 0:
        return "worse"
    return "no detectable difference"


def mean_cis(columns: list[np.ndarray], confidence: float, n_resamples: int, rng,
             weights: list | None = None, keys: list | None = None) -> list[tuple[float, float]]:
    """Bootstrap percentile intervals of the mean of each array (NaN dropped); with ``weights``, of
    the weighted mean (each resample's ``sum(c w v) / sum(c w)``). Every array is resampled in one
    parallel pass (each exactly, see :func:`_resampled`). An array of fewer than 2 values gets (nan, nan):
    one value has no spread to resample."""
    alpha = 1 - confidence
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(columns)
    live, blocks, shifts = [], [], []
    for i, v in enumerate(columns):
        ok = ~np.isnan(v)
        if ok.sum() < 2:  # one value has no spread to resample: no interval (as the t interval), not [v, v]
            continue
        live.append(i)
        shifts.append(value_shift(v[ok]))  # values of 1e300: resampled divided by a power of 2, scaled back
        v = np.ldexp(v, -shifts[-1])
        if weights is None:
            blocks.append(v[ok][:, None])
        else:
            w = scaled_weights(np.asarray(weights[i], dtype=np.float64)[ok])
            blocks.append(np.column_stack([v[ok] * w, w]))
    sums = _resampled(blocks, n_resamples, rng, "bootstrap", None if keys is None else [keys[i] for i in live])
    for i, block, s, shift in zip(live, blocks, sums, shifts):
        with np.errstate(invalid="ignore", divide="ignore"):
            means = s[:, 0] / (len(block) if weights is None else s[:, 1])
        lo, hi = np.nanquantile(means, [alpha / 2, 1 - alpha / 2])
        low, high = unscale([lo, hi], shift)
        out[i] = (float(low), float(high))
    return out


@stattests.implement_interval("bootstrap", "mean")
def _bootstrap_means(columns, confidence, n_resamples, rng, weights, keys) -> list[tuple[float, float]]:
    return mean_cis(columns, confidence, n_resamples, rng, weights, keys=keys)


@stattests.implement_interval("t", "mean")
def _t_means(columns, confidence, n_resamples, rng, weights, keys) -> list[tuple[float, float]]:
    return [t_interval(v, confidence) for v in columns]


@stattests.implement_interval("bootstrap", "difference")
def _bootstrap_difference(d, boot, alpha: float) -> tuple[float, float]:
    """The percentile interval of the resampled mean differences ``boot``."""
    if np.isinf(boot).any():  # infinite draws (a refitted curve): no numpy warning
        lo, hi = curve_ci.quantiles(boot[~np.isnan(boot)], [alpha / 2, 1 - alpha / 2])
    else:
        lo, hi = np.nanquantile(boot, [alpha / 2, 1 - alpha / 2])
    return lo, hi


@stattests.implement_interval("t", "difference")
def _t_difference(d, boot, alpha: float) -> tuple[float, float]:
    """The paired t interval of the differences ``d`` (no draws)."""
    return t_interval(d, 1 - alpha)


def summary_ci(ev, confidence: float = 0.95, n_resamples: int = 10_000, seed: int | None = 0,
               method: str = "bootstrap") -> pd.DataFrame:
    """Each model's mean of each metric with a bootstrap percentile interval, or (``method="t"``)
    Sakai's t interval ``mean +- t sqrt(V / n)`` (:func:`t_interval`; see
    :meth:`topkeval.Results.summary_ci`), per segment too with ``by=``; weighted with ``weight=``
    (a query of weight 0 counts nowhere; the t interval has no weighted form)."""
    ev.require_rows("summary_ci")
    check_decision(ev.info, "summary_ci")  # click estimates clipped or too skewed: no interval, no verdict
    if curve_ci.estimated(ev):  # an estimated examination curve: fitted again on every resample
        return curve_ci.summary_ci(ev, confidence, n_resamples, seed)
    weight = ev.weight
    if weight and not stattests.INTERVALS[method].weighted:
        raise ParameterError(f"method={method!r} has no weighted form; with query weights (weight=) use "
                             f"{stattests.choices(stattests.interval_names(weighted=True), key='method')}.")
    keys, columns, weights = [], [], []
    for key, pq in (groups(ev) if ev.by else [({}, ev.per_query)]):
        for model in ev.models:
            part = pq[pq["model"] == model]
            if weight:
                part = part[part[weight] > 0]  # a query of weight 0 counts nowhere
            for metric in ev.metrics:
                keys.append((key, model, metric))
                columns.append(part[metric].to_numpy(float))
                weights.append(part[weight].to_numpy(float) if weight else None)
    bounds = stattests.interval_implementation(method, "mean")(
        columns, confidence, n_resamples, np.random.default_rng(seed), weights if weight else None,
        [(tuple(key.items()), model, metric) for key, model, metric in keys])
    withheld = set(without_interval(ev, ev.metrics))  # corrected estimates of sampled evaluation
    rows = [{**key, "model": model, "metric": metric, "mean": weighted_mean(v, w),
             "ci_low": math.nan if metric in withheld else lo, "ci_high": math.nan if metric in withheld else hi,
             "n_queries": int((~np.isnan(v)).sum())}
            for (key, model, metric), v, w, (lo, hi) in zip(keys, columns, weights, bounds)]
    return pd.DataFrame(rows)
