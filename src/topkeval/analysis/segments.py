"""Results broken down by segment (``evaluate(..., by=)``): each segment's rows, and its means.

The segment columns hold a query-level attribute (device, market); each segment's means are those
of its queries, weighted with ``weight=`` (a query of weight 0 counts nowhere, as in compare and
summary_ci); the overall rows, segment :data:`ALL`, hold every query.
"""

from __future__ import annotations

import pandas as pd

from ..engine.aggregate import total_weight, weighted_summary
from ..errors import ParameterError
from ..inputs.segments import ALL

__all__ = ["ALL", "groups", "segment_summary"]



def groups(ev):
    """(key, per-query rows) of every segment, then of every query: key is a dict of the segment
    columns (``ALL`` for the overall rows)."""
    pq = ev.per_query
    by = list(ev.by)
    out = []
    if by:
        for key, part in pq.groupby(by, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            out.append((dict(zip(by, key)), part))
    out.append(({name: ALL for name in by}, pq))
    return out


def segment_summary(ev) -> pd.DataFrame:
    """Means per segment and model (weighted with ``weight=``), then the overall rows; ``queries``
    counts the queries of positive weight."""
    by = list(ev.by)
    if not by:
        raise ParameterError("These results have no segments: evaluate with by='<column>' (a query-level column).")
    weight = ev.weight
    rows = []
    for key, part in groups(ev):
        table = weighted_summary(part, ev.models, ev.metrics, weight)
        for model in ev.models:
            mine = part[part["model"] == model]
            if weight:
                mine = mine[mine[weight] > 0]  # a query of weight 0 counts nowhere, as in compare and summary_ci
            rows.append({**key, "model": model, **table.loc[model].to_dict(), "queries": len(mine),
                         **({"weight": total_weight(mine[weight])} if weight else {})})
    return pd.DataFrame(rows).set_index([*by, "model"])
