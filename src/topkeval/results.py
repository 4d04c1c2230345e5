"""Results: the one return type of every evaluation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


class Results:
    """What an evaluation returns.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per model (the index, named ``model``), one column per metric: the mean over the
        evaluated queries (a metric's undefined values, under ``undefined=nan``, left out).
    per_query : pandas.DataFrame
        One row per (model, query) evaluated: columns ``model``, ``query``, then one per metric.
        Queries skipped as empty are not in it; they are counted in ``info``.
    info : dict
        ``queries`` (distinct in the input), ``evaluated``, ``skipped_empty``, ``ties_at_cutoff``
        (per model: queries where a tie group of relevant and non-relevant candidates straddles a
        requested cutoff, R included for r_precision, so that the tie rule decides the value),
        ``rows``, ``models``, ``metrics`` and ``conventions``.
    """

    def __init__(self, summary: pd.DataFrame, per_query: pd.DataFrame, info: dict):
        self.summary = summary
        self.per_query = per_query
        self.info = info

    @property
    def models(self) -> list[str]:
        """Model names, in the order given."""
        return list(self.summary.index)

    @property
    def metrics(self) -> list[str]:
        """Canonical metric names, in the order requested."""
        return list(self.summary.columns)

    def to_dict(self) -> dict:
        """A JSON-ready dict: ``{"summary": {model: {metric: value}}, "info": {...}}`` (NaN as None)."""

        def clean(v):
            if isinstance(v, (float, np.floating)):
                return None if math.isnan(v) else float(v)
            if isinstance(v, np.integer):
                return int(v)
            if isinstance(v, dict):
                return {str(k): clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        summary = {str(m): {c: clean(self.summary.loc[m, c]) for c in self.summary.columns}
                   for m in self.summary.index}
        return {"summary": summary, "info": clean(self.info)}

    def __repr__(self) -> str:
        info = self.info
        head = (f"Results: {len(self.models)} model(s), {info['evaluated']} of {info['queries']} queries "
                f"evaluated ({info['skipped_empty']} skipped as empty)")
        return head + "\n" + self.summary.to_string()
