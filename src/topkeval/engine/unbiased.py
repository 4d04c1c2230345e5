"""Clicks are not relevance: inverse propensity weights for a log of the old ranker's clicks.

A click on the item the logging ranker showed at position ``j`` is observed with probability
``p_j`` (the examination probability of that position) times the item's relevance. Weighting each
click by ``1 / p_j`` makes every sum of per-item terms unbiased for the same sum over relevant
items (Joachims, Swaminathan & Schnabel 2017):

* ``"ips"`` families (precision@k, tp@k, dcg@k, rbp): ``sum over clicked i of w_i term(rank_i)``,
  unbiased when the propensities are right and every relevant item had ``p > 0``;
* ``"snips"`` families (recall@k, F1@k, R-precision, ap, ndcg): a ratio of two such sums (the
  clicked items' weight ``sum w_i`` stands for R; the ideal DCG is that of the weighted gains):
  self-normalised, consistent rather than unbiased;
* the others (hit rate, rr, specificity, ...) have no per-item form and are refused.

The kernel takes the weights (``Columns.rw``); this module checks the inputs and makes them.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import ColumnError, DataError, ParameterError, plural
from ..metrics import FAMILIES


def check_families(metrics) -> None:
    """Refuse a metric without an inverse propensity estimator (its family's ``ips`` is None)."""
    bad = [str(m) for m in metrics if FAMILIES[m.family].ips is None]
    if bad:
        ok = sorted(f.name for f in FAMILIES.values() if f.ips)
        raise ParameterError(f"{', '.join(bad)} cannot be estimated from clicks with propensity=: only a sum of per-item "
                             f"terms (or a ratio of such sums) has an inverse propensity estimator. Families that do: "
                             f"{', '.join(ok)}. Evaluate the others without propensity= (as clicks), or bound them "
                             "(Results.bounds(); on the command line --bounds).")


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
            position_column: str) -> tuple[np.ndarray, dict]:
    """Per-row inverse propensity weights (1 on rows without a click, which never weigh) and what
    to report: the effective sample size and the clicks whose weight ``clip`` capped.

    ``propensity``: per clicked row (in row order), the probability that its candidate was
    examined where it was shown (NaN where unknown). Effective sample size (Kish): ``(sum w)^2 / sum w^2`` over the clicks.

    Raises
    ------
    DataError
        A click on a candidate never shown, a clicked row without a propensity, or a propensity
        outside (0, 1].
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
    w = 1.0 / p
    clipped = 0
    if clip is not None:
        clipped = int((w > clip).sum())
        w = np.minimum(w, clip)
    out = np.ones(len(clicked))
    out[clicked] = w
    ess = float(w.sum() ** 2 / (w * w).sum()) if len(w) else 0.0
    return out, {"clicks": int(clicked.sum()), "effective_sample_size": ess, "clipped": clipped,
                 "clip": clip, "max_weight": float(w.max()) if len(w) else None}
