"""Aggregation: per-query values to means, the one layer every summary goes through.

A summary is the mean of each model's per-query values over the queries where the metric is
defined (NaN values left out); with query weights, ``sum_q w_q v_q / sum_q w_q`` over the same
queries. Both are exact for any finite values and weights: sums that would overflow are taken on a
scale divided by a power of 2 (exact), and weights are first multiplied by a power of 2 that brings
the largest into [0.5, 1) (:func:`scaled_weights`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def mean(values: np.ndarray) -> float:
    """The mean of the defined (not NaN) values; nan when there is none (see :func:`weighted_mean`)."""
    return weighted_mean(values, None)


def scaled_weights(weights: np.ndarray) -> np.ndarray:
    """The weights times one power of 2 that brings the largest into [0.5, 1).

    A weighted mean does not change when every weight is multiplied by one number, and a power of
    2 multiplies exactly: weights of 1e308 no longer overflow their sum (inf / inf = NaN), weights
    of 5e-324 no longer underflow their products with the values (5e-324 * 0.5 = 0). A weight
    below 2**-1022 times the largest may lose bits or become 0: its share of the mean is below
    1e-308 either way. Weights that are all 0 (or none) are returned as they are.

    >>> scaled_weights(np.array([4.0, 1.0, 0.0])).tolist()
    [0.5, 0.125, 0.0]
    >>> bool(np.isfinite(scaled_weights(np.array([1e308, 1e308])).sum()))
    True
    >>> scaled_weights(np.array([5e-324, 1e-323])).tolist()
    [0.25, 0.5]
    """
    weights = np.asarray(weights, dtype=np.float64)
    top = float(weights.max()) if weights.size else 0.0
    if not 0 < top < math.inf:
        return weights
    return np.ldexp(weights, -math.frexp(top)[1])


def total_weight(weights) -> float:
    """The sum of some weights, shown beside the means; inf when it exceeds the largest float (weights
    of 1e308), which the means themselves never compute (:func:`scaled_weights`)."""
    with np.errstate(over="ignore"):
        return float(np.sum(np.asarray(weights, dtype=np.float64)))


def value_shift(*values: np.ndarray) -> int:
    """The power of 2 to divide per-query values by (exact) so that their sums, differences and
    squares cannot overflow: 0, unless some value exceeds 1e100 (a DCG of huge grades)."""
    finite = [np.abs(v[np.isfinite(v)]) for v in values]
    top = max((float(v.max()) for v in finite if len(v)), default=0.0)
    return math.frexp(top)[1] if 1e100 < top < math.inf else 0


def unscale(values, shift: int) -> list[float]:
    """Numbers computed on values divided by ``2**shift`` (:func:`value_shift`), scaled back: inf where the
    true number exceeds the largest float (a difference of two values of 1.5e308)."""
    with np.errstate(over="ignore"):
        return [float(x) for x in np.ldexp(np.asarray(values, dtype=np.float64), shift)]


def weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """``sum(w v) / sum(w)`` over the defined values (nan when none, or no weight on them); the mean
    without weights. Exact for any finite weights >= 0 (:func:`scaled_weights`) and for values so
    large that their sum would overflow (averaged on a scale divided by a power of 2).

    >>> weighted_mean(np.array([1.0, 0.5]), np.array([5e-324, 5e-324]))
    0.75
    >>> weighted_mean(np.array([1.0, 0.5, np.nan]), np.array([1e308, 1e308, 1.0]))
    0.75
    """
    if weights is None and values.size and values.dtype == np.float64:
        # the usual case in one pass and no copy: a finite sum means every value is defined (a NaN would
        # make it NaN) and no partial sum overflowed (inf would stay); else the general path below
        with np.errstate(over="ignore", invalid="ignore"):
            total = values.sum()
        if math.isfinite(total):
            return float(total / values.size)
    ok = ~np.isnan(values)
    if not ok.any():
        return float("nan")
    v = values[ok]
    top = float(np.abs(v).max())
    shift = math.ceil(math.log2(top)) if math.isfinite(top) and top > 1e300 else 0
    if shift:
        v = np.ldexp(v, -shift)
    if weights is None:
        mean = v.mean()
    else:
        w = scaled_weights(weights[ok])
        total = w.sum()
        if not total > 0:
            return float("nan")
        mean = (w * v).sum() / total
    return float(np.ldexp(mean, shift)) if shift else float(mean)


def weighted_summary(per_query: pd.DataFrame, models, metrics, weight: str | None) -> pd.DataFrame:
    """Each model's (weighted) mean of each metric."""
    rows = {}
    for model in models:
        part = per_query[per_query["model"] == model]
        w = part[weight].to_numpy(float) if weight else None
        rows[model] = {m: weighted_mean(part[m].to_numpy(float), w) for m in metrics}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(metrics))
    frame.index.name = "model"
    return frame
