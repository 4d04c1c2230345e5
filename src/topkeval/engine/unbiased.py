"""Clicks are not relevance: inverse propensity weights for a log of the old ranker's clicks, what
can be estimated with them, and when the estimates' intervals cannot be trusted.

A click on the item the logging ranker showed at position ``j`` is observed with probability
``p_j`` (the examination probability of that position) times the item's relevance. Weighting each
click by ``1 / p_j`` makes every sum of per-item terms unbiased for the same sum over relevant
items (Joachims, Swaminathan & Schnabel 2017). The registry's ``ips`` field says what a family
becomes (:func:`check_families`):

* ``"ips"`` families (precision@k, tp@k, dcg@k, rbp): ``sum over clicked i of w_i term(rank_i)``,
  unbiased when the propensities are right and every relevant item had ``p > 0``;
* ``"pooled"`` families (recall_micro@k, f1_micro@k, fbeta_micro@k: :mod:`topkeval.metrics.pooled`):
  a ratio of two such sums, each summed over every query of the log: consistent;
* ``"snips"`` families (recall@k, F1@k, F-beta, R-precision, ap, ndcg) are per-query ratios whose
  denominator (R, the ideal DCG) clicks estimate only through the query's own few clicks: that
  self-normalised ratio is biased with one to four clicks per query, enough to declare a truly
  better ranker significantly worse in most simulated logs, so they are refused;
* the others (hit rate, rr, specificity, ...) have no per-item form and are refused.

When an estimate is kept, :func:`warnings_of` says what may make its interval or verdict
unreliable (:data:`SKEWNESS_LIMIT`: heavy-tailed weights; candidates never shown; clipping; a
curve estimated from few observations), each once per call.

The kernel takes the weights (``Columns.rw``); this module checks the inputs and makes them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ColumnError, DataError, ParameterError, plural
from ..metrics import FAMILIES

#: The skewness of an estimate (a mean over queries, :func:`skewness`) above which its normal or
#: bootstrap 95% interval is not trusted, for the sums (precision@k, dcg@k...). Cochran's rule for the
#: mean of a skewed variable (``n > 25 g1**2``: the mean's skewness at most 0.2) is stricter; in the
#: calibration of ``benchmarks/clicks_simulation.py --calibrate`` (docs/how-to/clicks.md) the sums'
#: intervals covered the truth in at least 88% of logs up to a skewness of 0.30 (small
#: position-based logs, cascades), and in as few as 81-84% from 0.37 on (cascades whose users rarely
#: read on after a click).
SKEWNESS_LIMIT = 0.3

#: The same for the ratios pooled over the queries (recall_micro...), whose denominator sums every
#: shown candidate's weight: more fragile, they covered the truth in 86% of the logs of a cascade at a
#: skewness of 0.09 already (no other interval did better: linearised, ratio percentile and
#: log-scale delta method alike), in 59-88% from 0.2 on, in at least 90% elsewhere below 0.15.
POOLED_SKEWNESS_LIMIT = 0.08

#: The lowest coverage the simulations measured above each limit, said in the warning.
COVERAGE_ABOVE_LIMIT = {"ips": "81%", "pooled": "59%"}

#: The skewness above which ``summary_ci``, ``compare`` and the other decisions refuse an estimate
#: (:func:`check_decision`), by estimator: the level past which, in the calibration of
#: ``benchmarks/clicks_simulation.py --calibrate`` (docs/how-to/clicks.md), the 95% intervals covered
#: the truth in fewer than 90% of logs. The sums covered at least 88% in every setting up to a skewness
#: of 0.30 and under 90% (84-89%) in every one from 0.37 on, where a truly better ranker was also
#: declared significantly worse in up to 19% of logs (a cascade whose users read on after a click with
#: probability 0.3, behind a poor logging ranker); the pooled ratios covered at least 86% up to 0.15
#: (90% or more but in one setting) and under 90% (71-88%) in seven settings of eight from 0.20 on.
#: Between the warning's limit and this one the estimates are warned of and decided.
REFUSAL_LIMIT = {"ips": 0.35, "pooled": 0.18}

#: What the simulations measured above the refusal limits, said in the refusal.
MEASURED_ABOVE_REFUSAL = {
    "ips": "their 95% intervals covered the truth in 84-89% of logs, and a truly better ranker was declared "
           "significantly worse in up to 19% of them",
    "pooled": "their 95% intervals covered the truth in 59-88% of logs, and a truly better ranker was declared "
              "significantly worse in up to 20% of them"}

#: An estimated examination curve whose value at a position rests on fewer (query, item) pairs than
#: this is flagged where clicks are weighted by it (see :func:`sparse_positions`).
CURVE_MIN_PAIRS = 100

#: What each refused per-query ratio family can be estimated as instead (``{k}``: its cutoff).
_INSTEAD = {
    "recall": "recall_micro@{k} (recall pooled over the queries: consistent)",
    "f1": "f1_micro@{k} (pooled over the queries: consistent)",
    "fbeta": "fbeta_micro(beta={beta})@{k} (pooled over the queries: consistent)",
    "r_precision": "precision@k or tp@k (unbiased: R-precision's cutoff is each query's R, which clicks do not give)",
    "ap": "dcg@k or precision@k (unbiased)",
    "ndcg": "dcg{at} (unbiased)",
}


def check_families(metrics) -> None:
    """Refuse a metric that has no estimator from clicks: a per-query ratio (the registry's ``ips``
    is ``"snips"``) or a family without a per-item form (``ips`` None)."""
    ratios = [m for m in metrics if FAMILIES[m.family].ips == "snips"]
    if ratios:
        instead = "; ".join(f"{m} -> " + _INSTEAD[m.family].format(
            k=m.k, at="" if m.k is None else f"@{m.k}", beta=m.param("beta") if m.family == "fbeta" else "")
            for m in ratios)
        raise ParameterError(
            f"{', '.join(str(m) for m in ratios)} cannot be estimated from clicks (propensity=): each is a ratio per "
            "query whose denominator (the query's relevant items R, or its ideal DCG) the clicks estimate only through "
            "that query's one or two clicks, and this self-normalised ratio is biased (recall@10 by +6 to +24% in "
            "simulation, where it declared a truly better ranker significantly worse in 89-100% of the logs of most "
            f"settings). Use instead: {instead}. Without "
            "propensity= the clicks are taken as relevance (biased toward the logging ranker); Results.bounds() "
            "bounds recall and F-beta.")
    bad = [str(m) for m in metrics if FAMILIES[m.family].ips is None]
    if bad:
        ok = sorted(f.name for f in FAMILIES.values() if f.ips in ("ips", "pooled"))
        raise ParameterError(f"{', '.join(bad)} cannot be estimated from clicks with propensity=: only a sum of per-item "
                             f"terms (or a ratio of such sums pooled over the queries) has an inverse propensity "
                             f"estimator. Families that do: {', '.join(ok)}. Evaluate the others without propensity= "
                             "(as clicks), or bound them (Results.bounds(); on the command line --bounds).")


def numbers_or_missing(values, column: str, option: str) -> np.ndarray:
    """A column of real numbers as float64, its missing values (None, NaN, NA, null) as NaN.

    Raises
    ------
    ColumnError
        Text, booleans, dates, durations, complex numbers, categories or other objects.
    """
    import pandas as pd

    if type(values).__module__.split(".")[0] == "pyarrow":
        values = values.to_pandas()
    series = values if isinstance(values, pd.Series) else pd.Series(values) if np.ndim(values) == 1 else None
    refuse = ColumnError(f"Column {column!r} ({option}) must hold numbers (empty where there is none); it holds "
                         f"{_kind(values)}. Convert it to numbers first.")
    if series is None or pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_complex_dtype(series.dtype):
        raise refuse
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    if series.dtype == object and all(v is None or v is pd.NA or (isinstance(v, numbers.Real)
                                                                   and not isinstance(v, bool)) for v in series):
        return np.array([np.nan if v is None or v is pd.NA else float(v) for v in series], np.float64)
    raise refuse


def _kind(values) -> str:
    dtype = getattr(values, "dtype", None)
    return f"values of type {dtype}" if dtype is not None and str(dtype) != "object" else "values that are not numbers"


def positions(values, column: str) -> np.ndarray:
    """The logging ranker's positions as float64, NaN for a candidate it never showed.

    Raises
    ------
    ColumnError
        A column that does not hold numbers.
    DataError
        A position that is not a whole number from 1 to 2**53.
    """
    pos = numbers_or_missing(values, column, "position=")
    shown = ~np.isnan(pos)
    bad = shown & ~((pos >= 1) & (pos == np.floor(pos)) & (pos <= 2.0 ** 53))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"Column {column!r} (position=) must hold the 1-based position at which the logging ranker "
                        f"showed each candidate (empty for never shown); row {row} has {float(pos[row]):g}. Fix the "
                        "column or leave such rows empty.")
    return pos


def check_shown(pos: np.ndarray, clicked: np.ndarray, position_column: str) -> None:
    """Refuse a click on a candidate the logging ranker never showed (no position)."""
    unshown = clicked & np.isnan(pos)
    if unshown.any():
        row = int(np.flatnonzero(unshown)[0])
        raise DataError(f"{plural(int(unshown.sum()), 'clicked row')} without a position (row {row} first): a click on "
                        "a candidate "
                        f"that the logging ranker never showed cannot be. Fill in {position_column!r} for them, or check that "
                        "the click and position columns belong to the same log.")


def weights(pos: np.ndarray, clicked: np.ndarray, propensity: np.ndarray, clip: float | None,
            position_column: str, shown: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Per-row inverse propensity weights (1 on rows without a click, which never weigh) and what
    to report: the effective sample size, the clicks whose weight ``clip`` capped, and the
    skewness the weights give an estimate (:func:`skewness`).

    ``propensity``: per clicked row (in row order), the probability that its candidate was
    examined where it was shown (NaN where unknown). ``shown``: the propensity of every shown
    candidate, clicked or not (NaN where unknown), for the skewness. Effective sample size (Kish):
    ``(sum w)^2 / sum w^2`` over the clicks.

    Raises
    ------
    DataError
        A click on a candidate never shown, a clicked row without a propensity, a propensity
        outside (0, 1], or propensities so small that their weights overflow.
    """
    check_shown(pos, clicked, position_column)
    p = np.asarray(propensity, np.float64)  # at the clicked rows, in order
    missing = np.isnan(p)
    if missing.any():
        where = pos[clicked][missing]
        raise DataError(f"{plural(int(missing.sum()), 'click')} at positions without a propensity (for example "
                        f"position {int(where[0])}): give a propensity for every position that has a click.")
    bad = ~((p > 0) & (p <= 1))
    if bad.any():
        value = float(p[bad][0])
        fix = ("a click where nothing is examined cannot be: check the curve and the positions" if value <= 0 else
               "normalise the curve so that no position's probability is above 1")
        raise DataError(f"Propensities are examination probabilities, in (0, 1]; a clicked row has {value:g}: {fix}.")
    with np.errstate(over="ignore", divide="ignore"):
        w = 1.0 / p
        total = float(w.sum())
    if not math.isfinite(total):
        value = float(p.min())
        raise DataError(f"A clicked row has the propensity {value:g}: its weight 1/p "
                        f"({'beyond the largest float' if not math.isfinite(1.0 / value) else 'summed with the others'}) "
                        "overflows, and every estimate would be infinite. A propensity that small says the position was "
                        "practically never examined: check the curve (estimated probabilities near 0 are noise; give "
                        "such positions a floor), or cap the weights with clip= (biased: see the warning it gives).")
    clipped = 0
    if clip is not None:
        clipped = int((w > clip).sum())
        w = np.minimum(w, clip)
    out = np.ones(len(clicked))
    out[clicked] = w
    scaled = w / w.max() if len(w) else w  # (sum w)^2 / sum w^2 without overflow
    ess = float(scaled.sum() ** 2 / (scaled * scaled).sum()) if len(w) else 0.0
    return out, {"clicks": int(clicked.sum()), "effective_sample_size": ess, "clipped": clipped,
                 "clip": clip, "max_weight": float(w.max()) if len(w) else None,
                 "skewness": skewness(shown, w, clip) if shown is not None else None}


def skewness(shown: np.ndarray, clicks: np.ndarray, clip: float | None) -> float | None:
    """The skewness of an inverse propensity weighted total, judged from the propensities of every
    shown candidate rather than from the clicks the log happened to get.

    Each shown candidate ``i`` with propensity ``p_i`` contributes ``w_i c_i`` (``w_i = 1 / p_i``,
    capped at ``clip``), its click ``c_i`` a Bernoulli draw of probability ``q_i = p_i rho``, with
    one relevance rate ``rho`` for every candidate, estimated so that the expected weighted clicks
    are the observed ones: ``rho = sum over clicks of w / sum over shown of p w``. The skewness of
    the total is the ratio of its third cumulant to its variance to the power 1.5::

        g = sum w^3 q (1 - q) (1 - 2q) / (sum w^2 q (1 - q)) ** 1.5

    An estimate (a mean over the queries) has about this skewness; above :data:`SKEWNESS_LIMIT` its
    95% interval covers too rarely. A log's own effective sample size cannot say so: a log that
    happens to hold the rare click of a huge weight has a small one and a wide, covering interval,
    and a log without it a large one and an interval too narrow.

    Returns None when a shown candidate has no propensity (a column given at the clicks only), NaN
    without a click.

    >>> round(skewness(np.array([1.0, 0.5, 0.25, 0.125]), np.array([2.0]), None), 4)
    1.9461
    """
    p = np.asarray(shown, np.float64)
    if np.isnan(p).any():
        return None
    p = p[(p > 0) & (p <= 1)]
    if not len(p) or not len(clicks):
        return math.nan
    with np.errstate(over="ignore", divide="ignore"):
        w = 1.0 / p if clip is None else np.minimum(1.0 / p, clip)
    if not np.isfinite(w).all():  # a shown candidate's weight beyond the largest float: no bound on the tail
        return math.inf
    top = float(w.max())
    rho = float((np.asarray(clicks) / top).sum() / (p * (w / top)).sum())
    q = np.minimum(p * rho, 1.0)
    s = w / top  # scale-free: no cube overflows
    k2 = float((s * s * q * (1 - q)).sum())
    k3 = float((s ** 3 * q * (1 - q) * (1 - 2 * q)).sum())
    return k3 / k2 ** 1.5 if k2 > 0 else math.nan


def sparse_positions(propensity, clicked_positions: np.ndarray) -> dict[int, int]:
    """The positions of an estimated examination curve (:func:`~topkeval.estimate_position_bias`'s
    result) that rest on fewer than :data:`CURVE_MIN_PAIRS` (query, item) pairs and weigh clicks of
    this log: position -> clicks there. Empty for a curve given as numbers (a mapping, a column, a
    function), which is taken as known.

    The hook for an estimated curve's own judgement: a result with a ``sparse_positions`` attribute
    (an iterable of positions) is read instead of its ``pairs`` column.
    """
    own = getattr(propensity, "sparse_positions", None)
    curve = getattr(propensity, "curve", None)
    if own is not None:
        thin = {int(j) for j in own}
    elif curve is not None and hasattr(curve, "columns") and "pairs" in curve.columns:
        pairs = curve["pairs"]
        thin = {int(j) for j, n in pairs.items() if not n >= CURVE_MIN_PAIRS}
    else:
        return {}
    at, counts = np.unique(np.asarray(clicked_positions, np.float64), return_counts=True)
    return {int(j): int(c) for j, c in zip(at, counts) if int(j) in thin}


def warnings_of(ips: dict, never_shown: dict | None, k: int | None, queries: int) -> dict[str, str]:
    """What may make the estimates of a click log unreliable, one message each by kind (given once per
    call as a :class:`~topkeval.TopkevalWarning`, and kept in ``info["ips"]["warnings"]`` for the
    command line and the report):

    * ``"skewed"``: the weights' :func:`skewness` is above :data:`SKEWNESS_LIMIT` (for a pooled ratio
      :data:`POOLED_SKEWNESS_LIMIT`);
    * ``"never_shown"``: candidates the logging ranker never showed fill part of a model's top k
      (``never_shown``: the share per model), unless the propensities give every one of them a chance
      of being shown (``ips["never_shown_examinable"]``: a column of a randomised logger's
      propensities);
    * ``"clipped"``: ``clip`` capped some weights;
    * ``"sparse_curve"``: clicks weighted by an estimated curve at positions with few observations
      (``ips["sparse_positions"]``, :func:`sparse_positions`).
    """
    out = {}
    g = ips.get("skewness")
    g = math.nan if g is None else float(g)  # None: not judged (a propensity column given at the clicks only)
    kinds = ips.get("estimators") or {}
    limits = {"ips": SKEWNESS_LIMIT, "pooled": POOLED_SKEWNESS_LIMIT}
    over = [m for m, kind in kinds.items() if g > limits.get(kind, math.inf)]
    if over:
        limit = min(limits[kinds[m]] for m in over)
        which = ", ".join(f"{m} (limit {limits[kinds[m]]:g}{': a pooled ratio' if kinds[m] == 'pooled' else ''})"
                          for m in over)
        seen = " and ".join(f"{COVERAGE_ABOVE_LIMIT[kind]} ({'sums' if kind == 'ips' else 'pooled ratios'})"
                            for kind in dict.fromkeys(kinds[m] for m in over))
        out["skewed"] = (
            "The estimates from clicks are too skewed for a normal interval (heavy-tailed inverse propensity weights, "
            f"or few clicks): judged from the propensities of every shown candidate, their skewness is about {g:.2f}, "
            f"above what {which} can take: in simulation such estimates' 95% intervals covered the truth in as few "
            f"as {seen} of logs (this log's effective sample size, {ips['effective_sample_size']:,.0f} of "
            f"{plural(ips['clicks'], 'click')}, does not show it). " + _decided(over, kinds, g)
            + (f"about {queries * (g / limit) ** 2:,.0f} queries would bring the skewness under {limit:g}."
               if math.isfinite(g) else "a shown candidate's propensity is so small that its weight 1/p "
               "overflows; check the propensities."))
    unseen = {m: v for m, v in (never_shown or {}).items() if v > 0}
    if unseen and not ips.get("never_shown_examinable"):
        out["never_shown"] = (
            f"Candidates the logging ranker never showed fill part of a model's top {k} "
            f"({', '.join(f'{m}: {v:.1%}' for m, v in unseen.items())}): no click can reach them, so inverse "
            "propensity weighting counts them as not relevant, and the estimate of a model that promotes them is "
            "biased low (toward the logging ranker). Results.bounds() gives the range of what they could change.")
    if ips.get("clipped"):
        out["clipped"] = (
            f"clip={ips['clip']:g} capped the weights of {plural(ips['clipped'], 'click')} of {ips['clicks']:,}: "
            "every estimate is biased (a sum low, the more for a model that promotes candidates the logging ranker "
            "showed far down; a pooled ratio either way, its numerator and denominator cut unequally), in favour of "
            "the logging ranker (in simulation clip=5 on examination 1/position biased precision@10 by up to -18% "
            "and recall_micro@10 by up to +12%, and declared a truly better ranker worse in a third to a half of "
            "logs). summary_ci, compare and the other decisions refuse clipped estimates: evaluate without clip= for "
            "them.")
    thin = ips.get("sparse_positions") or {}
    if thin:
        out["sparse_curve"] = (
            f"The estimated examination curve rests on fewer than {CURVE_MIN_PAIRS} (query, item) pairs at "
            f"{plural(len(thin), 'position')} ({', '.join(map(str, sorted(thin)))}), which weigh "
            f"{plural(sum(thin.values()), 'click')}: their propensities are noisy, and intervals computed with the "
            "curve as if it were known are too narrow. Estimate it from more impressions, or leave those positions out "
            "of the evaluation.")
    return out


def propensity_rows(propensity, pos: np.ndarray, cols, item, at: np.ndarray,
                    check: bool = True) -> tuple[np.ndarray, int | None]:
    """At rows ``at`` (the clicks; the other shown candidates with ``check=False``), the examination
    probability that ``propensity`` gives (NaN where it gives none), and with per-item propensities
    the rows on items they do not list (``check``: refused when none of them is listed).

    ``propensity`` is a column of ``cols`` (per-row probabilities), per-item propensities (an object
    with ``by_item``, a pandas Series item -> propensity, and ``unseen``: ``popularity_propensity``'s
    result), a function of the positions, a mapping position -> probability, or an object with a
    ``propensities`` mapping (``estimate_position_bias``'s result). ``pos``: every row's position.
    """
    pos = pos[at]
    if isinstance(propensity, str):
        return numbers_or_missing(cols[propensity], propensity, "propensity=")[at], None
    by_item = getattr(propensity, "by_item", None)
    if by_item is not None:  # popularity_propensity(): per item
        from ..inputs.ids import ids_as_objects

        ids = ids_as_objects(cols[item], at)
        where = pd.Index(by_item.index).get_indexer(ids)
        unmatched = int((where < 0).sum())
        if check and len(at) and unmatched == len(at):
            raise DataError(f"None of the clicked items of column {item!r} is among the items of the propensities "
                            f"(for example {ids[0]!r}, while they list {by_item.index[0]!r}): the ids must be the same "
                            "values of the same type (text '12' is not the number 12).")
        return np.where(where >= 0, by_item.to_numpy(np.float64)[np.maximum(where, 0)], float(propensity.unseen)), \
            unmatched
    if callable(propensity) and not isinstance(propensity, Mapping):  # position -> probability, vectorised
        try:
            with np.errstate(all="ignore"):
                values = np.asarray(propensity(pos.copy()), dtype=np.float64)
        except Exception as exc:
            raise ParameterError(f"propensity= as a function raised {type(exc).__name__}: {exc}. It must take an "
                                 "array of positions (float64) and return an array of probabilities.") from None
        if values.shape != pos.shape:
            raise ParameterError("propensity= as a function must map an array of positions to an array of "
                                 f"probabilities of the same shape; it returned shape {values.shape}.")
        return values, None
    curve = getattr(propensity, "propensities", propensity)  # estimate_position_bias()'s result, or a mapping
    if isinstance(curve, pd.Series):
        curve = curve.to_dict()
    if not isinstance(curve, Mapping) or not curve:
        raise ParameterError(f"propensity= must be a column name, a mapping position -> examination probability "
                             f"({{1: 1.0, 2: 0.6}}), a function of the positions, or estimate_position_bias's result; "
                             f"got {type(propensity).__name__}.")
    bad = [k for k in curve if not (isinstance(k, numbers.Integral) and not isinstance(k, bool) and 1 <= int(k) <= 2**53)]
    if bad:
        raise ParameterError(f"propensity= maps positions (whole numbers from 1 to 2**53) to probabilities; it has the "
                             f"key {bad[0]!r}.")
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in curve.values()):
        raise ParameterError("propensity= maps positions to probabilities (numbers in (0, 1]); a value is not a number.")
    keys = np.array([float(k) for k in curve])
    order = np.argsort(keys)
    keys, values = keys[order], np.array([float(v) for v in curve.values()])[order]
    found = np.minimum(np.searchsorted(keys, pos), len(keys) - 1)
    return np.where(keys[found] == pos, values[found], np.nan), None


def refuse_unplaced(bias, positions: np.ndarray) -> None:
    """Refuse clicks at positions an estimated curve (``estimate_position_bias``'s result: its
    ``curve`` table, with ``propensity`` and ``note`` columns by position) could not estimate, with
    the curve's reason."""
    curve = bias.curve
    at = curve.index.get_indexer(np.unique(positions))
    hit = at[at >= 0]
    hit = hit[~(curve["propensity"].to_numpy()[hit] > 0)]
    if len(hit):
        where = int(curve.index[hit[0]])
        raise DataError(f"A click at position {where}, which the estimated curve cannot place ({curve['note'].iloc[hit[0]]}"
                        "): drop the clicks there (or the positions beyond it, max_position= in estimate_position_bias "
                        "and the same rows of the log), or estimate the curve from a log that shows more there.")


def _decided(over: list, kinds: dict, g: float) -> str:
    """What the decisions do with the estimates ``over`` their warning's limit: refuse those above
    :data:`REFUSAL_LIMIT`, take the others with care."""
    refused = [m for m in over if g > REFUSAL_LIMIT[kinds[m]]]
    kept = [m for m in over if m not in refused]
    out = ""
    if refused:
        limits = " and ".join(f"{REFUSAL_LIMIT[k]:g} for {'the sums' if k == 'ips' else 'the pooled ratios'}"
                              for k in dict.fromkeys(kinds[m] for m in refused))
        out += (f"summary_ci, compare and the other decisions refuse {', '.join(refused)} (skewness above {limits}: "
                "no interval or verdict to trust); ")
    if kept:
        out += f"summary_ci and compare may be overconfident for {', '.join(kept)}; "
    return out


def check_decision(info, owner: str, metrics=None) -> None:
    """Refuse a decision (an interval, a test, a verdict) on estimates from clicks that cannot meet the
    criteria: weights clipped (biased toward the logging ranker: their intervals miss the truth and
    their verdicts can flip), or a skewness above :data:`REFUSAL_LIMIT` for one of ``metrics`` (all
    the estimates when None): their intervals cover too rarely and their verdicts can be the wrong
    way round.

    >>> info = {"ips": {"skewness": 0.6, "estimators": {"precision@10": "ips"}, "queries": 2000}}
    >>> try:
    ...     check_decision(info, "compare")
    ... except ParameterError as error:
    ...     print(str(error)[:68])
    compare refuses precision@10: judged from the propensities of every
    >>> check_decision(info, "compare", metrics=[])  # nothing over the limit asked for
    """
    ips = (info or {}).get("ips") or {}
    if ips.get("clipped"):
        raise ParameterError(f"{owner} refuses these estimates: clip={ips['clip']:g} capped the weights of "
                             f"{plural(ips['clipped'], 'click')}, which biases every estimate in favour of the "
                             "logging ranker (in simulation their 95% intervals covered the truth in no log at "
                             "clip=5, and a truly better ranker was declared worse in a third to a half of them). "
                             "Evaluate without clip= to compare models or to have intervals.")
    g = ips.get("skewness")
    g = math.nan if g is None else float(g)
    kinds = ips.get("estimators") or {}
    wanted = None if metrics is None else set(metrics)
    over = [m for m, kind in kinds.items() if (wanted is None or m in wanted) and g > REFUSAL_LIMIT.get(kind, math.inf)]
    if not over:
        return
    over_kinds = list(dict.fromkeys(kinds[m] for m in over))
    limit = min(REFUSAL_LIMIT[k] for k in over_kinds)
    names = {"ips": "the sums", "pooled": "the ratios pooled over the queries"}
    queries = ips.get("queries")
    more = (f"About {queries * (g / limit) ** 2:,.0f} queries (this log has {queries:,}) would bring it under "
            f"{limit:g}" if math.isfinite(g) and queries else
            "A shown candidate's weight 1/p overflows: check the propensities" if not math.isfinite(g) else
            "More queries would bring it under the limit")
    kept = [m for m, k in kinds.items() if g <= REFUSAL_LIMIT.get(k, math.inf)]
    instead = (f"; the estimates under their limit can be decided without them (evaluate {', '.join(kept)} alone, or "
               f"compare(metrics=[...]) of them)" if kept else "")
    if over_kinds == ["pooled"]:
        instead += ("; on one log, tp@k and precision@k order the models as recall_micro@k does, with a skewness "
                    "limit of their own")
    raise ParameterError(
        f"{owner} refuses {', '.join(over)}: judged from the propensities of every shown candidate, the skewness of "
        f"these estimates from clicks is about {g:.2f}, above "
        + " and ".join(f"{REFUSAL_LIMIT[k]:g} for {names[k]}" for k in over_kinds)
        + ", where in simulation " + "; for the pooled ratios ".join(MEASURED_ABOVE_REFUSAL[k] for k in over_kinds)
        + " (heavy-tailed inverse propensity weights: rare clicks at rarely examined positions). The estimates "
        f"themselves stand (res.summary). {more}{instead}.")
