"""Segments and query weights: query-level attributes read beside the log.

``by=`` names one or more columns whose value is the same on every row of a query (device,
market, head/tail): the results are then also broken down by segment. ``weight=`` names a column
of query weights (traffic, revenue): means become weighted means,

    mean_w(v) = sum_q w_q v_q / sum_q w_q        (over the queries where v_q is defined),

and the comparison resamples with the weights (see :mod:`topkeval.analysis.compare`). Both are read with
the query column and grouped exactly as the log is (:func:`topkeval.inputs.grouped.group_rows`), so each
attribute lines up with the log's own query ids, whatever their type.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DataError, ParameterError, show

#: the value of the segment columns on the rows of a breakdown that hold every query (a segment may not take it)
ALL = "(all)"


def names(by) -> list[str]:
    """The segment columns as a list (``by`` is None, a column name, or a sequence of names)."""
    if by is None:
        return []
    if not isinstance(by, (str, list, tuple)):
        raise ParameterError(f"The 'by' parameter must be a column name (a string) or a list of them. Got {by!r} "
                             f"({type(by).__name__}) instead." + (" Column names are strings: rename the columns "
                                                                   "of a table whose columns are numbers (for pandas: "
                                                                   "df.columns = df.columns.astype(str))."
                                                                   if isinstance(by, (int, float)) else ""))
    out = [by] if isinstance(by, str) else list(by)
    for name in out:
        if not isinstance(name, str) or not name:
            raise ParameterError(f"The 'by' parameter names query-level columns (a name or a list of names); "
                                 f"{name!r} is not a column name (a non-empty string). Got {by!r}.")
    if len(set(out)) != len(out):
        raise ParameterError(f"by lists a column twice: {out!r}.")
    return out


def query_attributes(query_values, columns: dict, by: list[str], weight: str | None, query_name: str,
                     whole: bool = True) -> pd.DataFrame:
    """One row per query (indexed by the log's query ids, in the log's order): the segment columns
    and the weight. Refuses an attribute that varies within a query, missing segment values, and
    weights that are negative, not finite, or (``whole``: these are all the queries) all zero."""
    from .grouped import group_rows

    offsets, grouping, labels = group_rows(query_values, query_name)
    return _attributes(offsets, grouping, labels, columns, by, weight, query_name, whole)


def attributes_by_code(codes: np.ndarray, labels, columns: dict, by: list[str], weight: str | None,
                       query_name: str) -> pd.DataFrame:
    """As :func:`query_attributes`, for rows given as query codes into ``labels`` (judgments apart)."""

    class _Order:  # the rows sorted by code, as a grouping
        def __init__(self, order):
            self.order = order

        def apply(self, values):
            return values[self.order]

    order = np.argsort(codes, kind="stable")
    offsets = np.searchsorted(codes[order], np.arange(len(labels) + 1)).astype(np.int64)
    return _attributes(offsets, _Order(order), labels, columns, by, weight, query_name)


def _attributes(offsets, grouping, labels, columns: dict, by: list[str], weight: str | None,
                query_name: str, whole: bool = True) -> pd.DataFrame:
    sizes = np.diff(offsets)
    present = sizes > 0
    starts = offsets[:-1][present]
    labels = np.asarray(labels)[present]
    out = {}
    for name in by + ([weight] if weight else []):
        raw = columns[name]
        if hasattr(raw, "to_numpy") and not isinstance(raw, np.ndarray):
            raw = raw.to_numpy(zero_copy_only=False) if "pyarrow" in type(raw).__module__ else raw.to_numpy()
        raw = np.asarray(raw)
        if name == weight:
            if raw.dtype.kind not in "iuf":
                raise DataError(f"The weight column {name!r} must hold numbers (query weights such as traffic); "
                                f"it holds {raw.dtype}.")
            values = raw.astype(np.float64)
            codes = values
        else:
            if raw.dtype.kind == "O":  # lists, dicts, arrays (polars List columns), or 1 beside "1"
                from .ids import _ID_KINDS, _check_kinds

                if pd.api.types.infer_dtype(raw, skipna=True) not in _ID_KINDS:
                    _check_kinds(raw[~pd.isna(raw)] if _hashable(raw) else raw, name, "segment")
            elif raw.ndim != 1:
                raise DataError(f"The segment column {name!r} holds arrays (shape {raw.shape}); a segment is one "
                                "value per query (text or a number).")
            codes, uniques = pd.factorize(raw, use_na_sentinel=True)
            if (codes < 0).any():
                raise DataError(f"The segment column {name!r} has missing values ({int((codes < 0).sum()):,} rows): "
                                "fill them (for example with 'unknown') so that every query belongs to a segment.")
            codes = codes.astype(np.int64)
        grouped = codes if grouping is None else grouping.apply(codes)
        lo = np.minimum.reduceat(grouped, starts) if len(starts) else grouped[:0]
        hi = np.maximum.reduceat(grouped, starts) if len(starts) else grouped[:0]
        varies = (lo != hi) & ~(np.isnan(lo) & np.isnan(hi)) if grouped.dtype.kind == "f" else lo != hi
        if varies.any():
            q = int(np.argmax(varies))
            role = "weight" if name == weight else "segment"
            raise DataError(f"The {role} column {name!r} must be the same on every row of a query, but query "
                            f"{show(labels[q])} has more than one value ({int(varies.sum()):,} queries do). "
                            f"{'Weights' if name == weight else 'Segments'} are query-level attributes.")
        if name == weight:
            if not np.isfinite(lo).all() or (lo < 0).any():
                bad = int(np.argmax(~np.isfinite(lo) | (lo < 0)))
                raise DataError(f"The weight column {name!r} must hold finite weights >= 0; query {show(labels[bad])} "
                                f"has {float(lo[bad])!r}.")
            out[name] = lo
        else:
            out[name] = uniques.take(lo) if hasattr(uniques, "take") else np.asarray(uniques)[lo]
            if (np.asarray(out[name], dtype=object) == ALL).any():
                raise DataError(f"The segment column {name!r} has the value {ALL!r}, which names every query in "
                                "a breakdown: rename that segment.")
    frame = pd.DataFrame(out, index=pd.Index(labels, name=query_name))
    if whole and weight and not (frame[weight] > 0).any():
        raise DataError(f"Every query weight in {weight!r} is 0: a weighted mean needs a positive total weight.")
    return frame


def _hashable(values: np.ndarray) -> bool:
    """Whether pd.isna can look at every value (it fails on nested arrays of other shapes)."""
    try:
        pd.isna(values)
    except (TypeError, ValueError):
        return False
    return True
