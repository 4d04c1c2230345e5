"""Segments and query weights: query-level attributes read beside the log.

``by=`` names one or more columns whose value is the same on every row of a query (device,
market, head/tail): the results are then also broken down by segment. ``weight=`` names a column
of query weights (traffic, revenue): means become weighted means,

    mean_w(v) = sum_q w_q v_q / sum_q w_q        (over the queries where v_q is defined),

and the comparison resamples with the weights (see :mod:`topkeval.compare`). Both are read with
the query column and grouped exactly as the log is (:func:`topkeval.log.group_rows`), so each
attribute lines up with the log's own query ids, whatever their type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .errors import DataError, ParameterError, show

#: the value of the segment columns on the rows of a breakdown that hold every query
ALL = "(all)"

#: column names of the tables segments appear in (per_query, segments, compare, summary_ci): a
#: segment or weight column may not take one of them
RESERVED = ("model", "metric", "verdict", "baseline", "value", "delta", "relative_delta", "ci_low", "ci_high",
            "p_value", "p_adjusted", "significant", "wins", "ties", "losses", "effect_size", "n_queries", "left_out",
            "weight", "queries", "mean")


def names(by) -> list[str]:
    """The segment columns as a list (``by`` is None, a column name, or a sequence of names)."""
    if by is None:
        return []
    out = [by] if isinstance(by, str) else list(by)
    for name in out:
        if not isinstance(name, str) or not name:
            raise ParameterError(f"by names query-level columns (a name or a list of names); got {by!r}.")
    if len(set(out)) != len(out):
        raise ParameterError(f"by lists a column twice: {out!r}.")
    return out


def query_attributes(query_values, columns: dict, by: list[str], weight: str | None, query_name: str,
                     whole: bool = True) -> pd.DataFrame:
    """One row per query (indexed by the log's query ids, in the log's order): the segment columns
    and the weight. Refuses an attribute that varies within a query, missing segment values, and
    weights that are negative, not finite, or (``whole``: these are all the queries) all zero."""
    from .log import group_rows

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
        total = float(attrs[weight].sum())
        res.info["weight"] = {"column": weight, "total": total,
                              "evaluated_per_model": {m: float(res.per_query.loc[res.per_query["model"] == m,
                                                                                   weight].sum())
                                                      for m in res.models}}
    if by:
        res.info["segments"] = {"columns": list(by), "count": int(attrs.groupby(list(by), sort=False).ngroups)}


def weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """``sum(w v) / sum(w)`` over the defined values (nan when none, or no weight on them)."""
    ok = ~np.isnan(values)
    if weights is None:
        return float(values[ok].mean()) if ok.any() else float("nan")
    w = weights[ok]
    total = w.sum()
    return float((w * values[ok]).sum() / total) if total > 0 else float("nan")


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
                         **({"weight": float(mine[weight].sum())} if weight else {})})
    return pd.DataFrame(rows).set_index([*by, "model"])
