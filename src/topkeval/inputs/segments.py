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

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import DataError, ParameterError, show

#: the value of the segment columns on the rows of a breakdown that hold every query
ALL = "(all)"

#: column names of the tables segments appear in (per_query, segments, compare, summary_ci): a
#: segment or weight column may not take one of them
RESERVED = ("model", "metric", "verdict", "baseline", "value", "delta", "relative_delta", "ci_low", "ci_high",
            "p_value", "p_adjusted", "significant", "wins", "ties", "losses", "effect_size", "n_queries", "left_out",
            "weight", "queries", "mean")


#: column names of the tables the query column appears in beside fixed columns (per_query: ``model``;
#: Results.diff: ``baseline``, ``model``, ``delta``, ``gained``, ``lost``)
QUERY_TAKEN = ("model", "baseline", "delta", "gained", "lost")


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


def _metric_name(name: str) -> bool:
    """Whether ``name`` is the canonical name of a metric (a column of per_query, of every curve)."""
    from ..errors import TopkevalError
    from ..metrics.names import parse_metric

    try:
        return str(parse_metric(name)) == name
    except TopkevalError:
        return False


def check_result_names(query: str, by: Sequence[str], weight: str | None, metrics: Sequence[str]) -> None:
    """Refuse column names that would collide with the columns of the results.

    ``per_query`` holds ``model``, the query column, the segment and weight columns and one column
    per metric; :meth:`Results.diff` holds the query column beside ``baseline``, ``model``,
    ``delta``, ``gained`` and ``lost``; the segment columns appear beside every column of
    :data:`RESERVED`. A column of the input named like one of them would be overwritten or read as
    the other (a comparison of NaN, an empty diff), so it is refused, with the name to change.
    """
    metric_names = set(metrics)
    clash = (query in QUERY_TAKEN or query in metric_names or _metric_name(query)) and query
    if clash:
        what = "a metric" if clash not in QUERY_TAKEN else f"the column {clash!r} of per_query or Results.diff"
        raise ParameterError(f"The query column is called {clash!r}, which is also the name of {what}: the results "
                             f"could not hold both. Rename the column (for pandas: "
                             f"df.rename(columns={{{clash!r}: 'query'}})) and pass query='query'.")
    taken = sorted({n for n in by if n in RESERVED or n in metric_names or _metric_name(n)}
                   | ({weight} if weight and (weight == "model" or weight in metric_names or _metric_name(weight))
                      else set()))
    if taken:
        raise ParameterError(f"by= and weight= columns appear beside the columns of the results (model, the metrics; "
                             f"for segments also compare's and summary_ci's columns), so they cannot be called "
                             f"{taken!r}: rename the column.")


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


def attach(res, attrs: pd.DataFrame, by: Sequence[str], weight: str | None) -> None:
    """Give ``res`` its query attributes: per_query gains the columns, the summary becomes weighted."""
    res._attrs = attrs
    res.by = list(by)
    res.weight = weight
    build = res._per_query

    def per_query() -> pd.DataFrame:
        frame = build() if callable(build) else build
        qn = res.query_name
        position = frame.columns.get_loc(qn) + 1
        keys = frame[qn]
        known = pd.Index(keys).isin(attrs.index)
        if not known.all():
            q = keys[~known].iloc[0] if hasattr(keys, "iloc") else keys[~known][0]
            raise DataError(f"Query {show(q)} has no segment or weight: it is judged but absent from the run "
                            "(missing_queries='zero' scores it), and its attributes are read from the run's rows. "
                            "Use missing_queries='skip', or add the query to the run.")
        for offset, name in enumerate([*by, *([weight] if weight else [])]):
            frame.insert(position + offset, name, attrs[name].reindex(keys).to_numpy())
        return frame

    res._per_query = per_query
    res.per_query  # noqa: B018 (built now, so that a query without attributes is refused by evaluate itself)
    if weight:
        res.summary = weighted_summary(res.per_query, res.models, res.metrics, weight)
        total = total_weight(attrs[weight])
        res.info["weight"] = {"column": weight, "total": total,
                              "evaluated_per_model": {m: total_weight(res.per_query.loc[res.per_query["model"] == m,
                                                                                        weight])
                                                      for m in res.models}}
    if by:
        res.info["segments"] = {"columns": list(by), "count": int(attrs.groupby(list(by), sort=False).ngroups)}


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


def weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """``sum(w v) / sum(w)`` over the defined values (nan when none, or no weight on them); the mean
    without weights. Exact for any finite weights >= 0 (:func:`scaled_weights`) and for values so
    large that their sum would overflow (averaged on a scale divided by a power of 2).

    >>> weighted_mean(np.array([1.0, 0.5]), np.array([5e-324, 5e-324]))
    0.75
    >>> weighted_mean(np.array([1.0, 0.5, np.nan]), np.array([1e308, 1e308, 1.0]))
    0.75
    """
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


def groups(res):
    """(key, per-query rows) of every segment, then of every query: key is a dict of the segment
    columns (``ALL`` for the overall rows)."""
    pq = res.per_query
    by = getattr(res, "by", [])
    out = []
    if by:
        for key, part in pq.groupby(by, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            out.append((dict(zip(by, key)), part))
    out.append(({name: ALL for name in by}, pq))
    return out


def segment_summary(res) -> pd.DataFrame:
    """Means per segment and model (weighted with ``weight=``), then the overall rows; ``queries``
    counts the queries of positive weight."""
    by = getattr(res, "by", [])
    if not by:
        raise ParameterError("These results have no segments: evaluate with by='<column>' (a query-level column).")
    weight = getattr(res, "weight", None)
    rows = []
    for key, part in groups(res):
        table = weighted_summary(part, res.models, res.metrics, weight)
        for model in res.models:
            mine = part[part["model"] == model]
            if weight:
                mine = mine[mine[weight] > 0]  # a query of weight 0 counts nowhere, as in compare and summary_ci
            rows.append({**key, "model": model, **table.loc[model].to_dict(), "queries": len(mine),
                         **({"weight": total_weight(mine[weight])} if weight else {})})
    return pd.DataFrame(rows).set_index([*by, "model"])
