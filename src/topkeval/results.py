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
        Queries skipped as empty are not in it; they are counted in ``info``. Queries come in input
        order when the rows arrive grouped by query (each query one run of rows), otherwise in
        ascending order of query id.
    info : dict
        ``queries`` (distinct in the input), ``evaluated``, ``skipped_empty``, ``ties_at_cutoff``
        (per model: queries where a tie group of relevant and non-relevant candidates straddles a
        requested cutoff, R included for r_precision, so that the tie rule decides the value),
        ``rows``, ``models``, ``metrics`` and ``conventions``.
    """

    def __init__(self, summary: pd.DataFrame, per_query, info: dict, context=None):
        self.summary = summary
        self._per_query = per_query  # a DataFrame, or a function that builds it on first access
        self.info = info
        self._context = context  # what diff() needs to name items: the grouped log and conventions

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per (model, query) evaluated (see the class docstring); built on first access."""
        if callable(self._per_query):
            self._per_query = self._per_query()
        return self._per_query

    @per_query.setter
    def per_query(self, frame: pd.DataFrame) -> None:
        self._per_query = frame

    def compare(self, baseline: str | None = None, **options) -> pd.DataFrame:
        """Paired comparison of every model with ``baseline``: deltas, intervals, tests.

        ``delta = mean(M - B)`` over the queries both models have, with a paired bootstrap
        interval, a p-value (``test="permutation"``, ``"t"``, ``"wilcoxon"`` or ``"bootstrap"``)
        and its correction across all rows (``correction="holm"``, ``"bonferroni"``, ``"bh"``,
        None). See :func:`topkeval.compare.compare` for every option and column.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1],
        ...                    "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]},
        ...                   metrics=["precision@1"], score=["a", "b"])
        >>> res.compare(baseline="a")[["model", "metric", "delta", "wins", "losses"]]
          model       metric  delta  wins  losses
        0     b  precision@1    0.0     1       1
        """
        from .compare import compare

        return compare(self, baseline, **options)

    def summary_ci(self, confidence: float = 0.95, n_resamples: int = 10_000, seed: int | None = 0) -> pd.DataFrame:
        """Each model's mean of each metric with a bootstrap percentile confidence interval.

        Returns
        -------
        pandas.DataFrame
            Columns ``model, metric, mean, ci_low, ci_high, n_queries``.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.9, 0.1]},
        ...                   metrics=["precision@1"], score="s")
        >>> res.summary_ci()[["model", "metric", "mean", "ci_low", "ci_high"]]
          model       metric  mean  ci_low  ci_high
        0     s  precision@1   0.5     0.0      1.0
        """
        from .compare import mean_cis
        from .errors import ParameterError

        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
            raise ParameterError(f"The 'confidence' parameter of summary_ci must be in (0, 1). Got {confidence!r} instead.")
        keys, columns = [], []
        for model in self.models:
            part = self.per_query[self.per_query["model"] == model]
            for metric in self.metrics:
                keys.append((model, metric))
                columns.append(part[metric].to_numpy(float))
        bounds = mean_cis(columns, confidence, n_resamples, np.random.default_rng(seed))
        rows = [{"model": model, "metric": metric, "mean": float(self.summary.loc[model, metric]),
                 "ci_low": lo, "ci_high": hi, "n_queries": int((~np.isnan(v)).sum())}
                for (model, metric), v, (lo, hi) in zip(keys, columns, bounds)]
        return pd.DataFrame(rows)

    def diff(self, baseline: str, model: str, metric: str) -> pd.DataFrame:
        """Per query, what changed from ``baseline`` to ``model`` on ``metric``, worst regressions first.

        Returns
        -------
        pandas.DataFrame
            Columns ``query, baseline, model, delta`` and, when item ids were given, ``gained`` and
            ``lost``: the relevant items that entered / left the top k (k = R for r_precision).
            Under ``ties="expected"`` an item counts as gained or lost when its chance of being in
            the top k went up or down.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 1, 0], "item": ["x", "y", "z"],
        ...                    "a": [0.9, 0.1, 0.5], "b": [0.1, 0.9, 0.5]},
        ...                   metrics=["recall@1"], score=["a", "b"], item="item")
        >>> res.diff("a", "b", "recall@1")[["query", "delta", "gained", "lost"]]
           query  delta gained lost
        0      1    0.0    [y]  [x]
        """
        from .errors import ParameterError, did_you_mean
        from .names import parse_metric

        for name, value in (("baseline", baseline), ("model", model)):
            if value not in self.models:
                raise ParameterError(f"{name} {value!r} is not a model of these results.{did_you_mean(str(value), self.models)}")
        metric = str(parse_metric(metric))
        if metric not in self.metrics:
            raise ParameterError(f"metric {metric!r} was not evaluated; these results have {', '.join(self.metrics)}.")
        pq = self.per_query
        a = pq[pq["model"] == baseline].set_index("query")[metric]
        b = pq[pq["model"] == model].set_index("query")[metric]
        queries = a.index.intersection(b.index, sort=False)
        out = pd.DataFrame({"query": queries, "baseline": a.loc[queries].to_numpy(),
                            "model": b.loc[queries].to_numpy()})
        out["delta"] = out["model"] - out["baseline"]
        ctx = self._context
        if ctx is not None and ctx["log"].items is not None:
            gained, lost = _gained_lost(ctx, baseline, model, parse_metric(metric))
            out["gained"] = [gained.get(q, []) for q in out["query"]]
            out["lost"] = [lost.get(q, []) for q in out["query"]]
        return out.sort_values("delta", kind="stable").reset_index(drop=True)

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

        summary = {str(m): {c: json_ready(self.summary.loc[m, c]) for c in self.summary.columns}
                   for m in self.summary.index}
        return {"summary": summary, "info": json_ready(self.info)}

    def __repr__(self) -> str:
        info = self.info
        head = (f"Results: {len(self.models)} model(s), {info['evaluated']} of {info['queries']} queries "
                f"evaluated ({info['skipped_empty']} skipped as empty)")
        return head + "\n" + self.summary.to_string()


def json_ready(v):
    """Plain Python values for JSON: numpy scalars unwrapped, NaN as None, dict keys as text."""
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {str(k): json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_ready(x) for x in v]
    return v


def _gained_lost(ctx, baseline: str, model: str, metric) -> tuple[dict, dict]:
    """{query: [items]} of relevant items whose chance of being in the top k rose / fell."""
    from .kernels import cpu

    log, conv, rel, R = ctx["log"], ctx["conv"], ctx["rel"], ctx["R"]
    kq = R.astype(np.int64) if metric.k is None else np.full(log.n_queries, metric.k, np.int64)
    thr = -np.inf if conv.score_threshold is None else conv.score_threshold
    tie = cpu.TIE_CODES[conv.ties]
    grades = log.grades.astype(np.float64, copy=False)
    p_base = cpu.inclusion(log.offsets, log.scores[baseline], rel, grades, log.items, thr, tie, kq)
    p_model = cpu.inclusion(log.offsets, log.scores[model], rel, grades, log.items, thr, tie, kq)
    q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    result = []
    for mask in (p_model > p_base + 1e-12, p_base > p_model + 1e-12):
        rows = np.flatnonzero(mask)
        items = log.item_labels[log.items[rows]]
        groups = pd.Series(items).groupby(log.queries[q_of_row[rows]], sort=False).agg(list)
        result.append(groups.to_dict())
    return result[0], result[1]
