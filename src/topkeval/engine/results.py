"""One Results from the evaluated batches, whatever path computed them: the means, the per-query
table and the same ``info`` keys for a table in memory, a streamed file, runs with judgments apart
and a score matrix."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .evaluate import Evaluated, LogSource, ModelValues
from .plan import Plan


def mean(values: np.ndarray) -> float:
    """The mean of the defined (not NaN) values; nan when there is none. Values so large that their
    sum would overflow (a DCG of huge grades) are averaged on a scale divided by a power of 2."""
    if not np.isfinite(values).any():
        return math.nan
    top = float(np.nanmax(np.abs(values)))
    if top > 1e300:
        shift = math.ceil(math.log2(top))
        return float(np.ldexp(np.nanmean(np.ldexp(values, -shift)), shift))
    return float(np.nanmean(values))


def build_results(batches: Sequence[Evaluated], plan: Plan, *, query_name: str = "query", info: dict | None = None,
                  sources: LogSource | None = None):
    """One :class:`~topkeval.results.Results` from the batches of an evaluation, whatever the path.

    The summary is each model's mean over its evaluated queries (NaN values left out), the
    per-query table lists each model's queries in batch order, and ``info`` has the same keys on
    every path: ``queries``, ``evaluated``, ``skipped_empty``, ``rows`` (ints: totals),
    ``evaluated_per_model``, ``rows_per_model``, ``ties_at_cutoff`` (per model), ``models``,
    ``metrics`` (the column labels: the names as requested), ``metric_names`` (each label -> the
    canonical name), ``conventions``, and what the front door adds (``info``).
    """
    from ..results import Results

    names = plan.names
    by_model: dict[str, list[ModelValues]] = {}
    for batch in batches:
        for mv in batch.models:
            by_model.setdefault(mv.model, []).append(mv)
    kept = all(p.sums is None for parts in by_model.values() for p in parts)
    summary: dict[str, dict[str, float]] = {}
    for model, parts in by_model.items():
        summary[model] = {}
        for name in names:
            if kept:
                v = np.concatenate([p.values[name] for p in parts]) if len(parts) > 1 else parts[0].values[name]
                summary[model][name] = mean(v)
            else:
                sums = [p.sums[name] for p in parts if p.sums is not None]
                count = sum(c for _, c in sums)
                summary[model][name] = sum(t for t, _ in sums) / count if count else math.nan
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=names)
    summary_df.index.name = "model"
    evaluated = {m: sum(p.evaluated for p in parts) for m, parts in by_model.items()}
    rows = {m: sum(p.rows for p in parts) for m, parts in by_model.items()}
    base = {
        "queries": sum(b.queries for b in batches),
        "evaluated": max(evaluated.values(), default=0),
        "skipped_empty": sum(b.skipped_empty for b in batches),
        "rows": max(rows.values(), default=0),
        "evaluated_per_model": evaluated,
        "rows_per_model": rows,
        "ties_at_cutoff": {m: sum(p.ties for p in parts) for m, parts in by_model.items()},
        "models": list(by_model),
        "metrics": names,
        "metric_names": plan.canonical,
        "conventions": plan.conv.as_dict(),
    }
    base.update(info or {})

    def per_query() -> pd.DataFrame:
        """Model by model, each model's queries in batch order (empty when only sums were kept)."""
        columns: dict = {}
        if not kept:
            return pd.DataFrame({"model": pd.Series([], dtype=object), query_name: pd.Series([], dtype=object),
                                 **{n: pd.Series([], dtype=np.float64) for n in names}})
        queries = [p.queries for parts in by_model.values() for p in parts]
        counts = [sum(len(p.queries) for p in parts) for parts in by_model.values()]
        columns["model"] = pd.Series(np.repeat(np.array(list(by_model), dtype=object), counts), dtype=object)
        columns[query_name] = np.concatenate(queries) if len(queries) > 1 else queries[0]
        for name in names:
            vals = [p.values[name] for parts in by_model.values() for p in parts]
            columns[name] = np.concatenate(vals) if len(vals) > 1 else vals[0]
        return pd.DataFrame(columns)

    return Results(summary_df, per_query, base, query_name=query_name, conventions=plan.conv, sources=sources)
