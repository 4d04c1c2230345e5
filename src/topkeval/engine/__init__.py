"""The engine: one plan, one backend call per model, one way from statistics to Results.

Every front door (``evaluate`` on a table or a file, ``evaluate(run, qrels=...)``,
``evaluate_matrix``, a streamed parquet file, the one-ranking functions) turns its input into one
or more grouped logs (:class:`~topkeval.inputs.grouped.GroupedLog`) and then does exactly this::

    plan = make_plan(metrics, conventions)            # which statistics, cutoffs, gain variants
    batch = evaluate_log(log, plan, ...)              # per model: backend -> QueryStats -> values
    res = build_results([batch, ...], plan, ...)      # summary, per_query, info: the same keys on every path

=================  ====================================================================
``plan.py``        :class:`Plan`: which statistics, cutoffs, gain variants and depth
``backends.py``    :class:`Backend` (the contract), :class:`CpuBackend`: batch -> QueryStats
``evaluate.py``    :func:`evaluate_log`: QueryStats -> per-query values, one batch at a time
``results.py``     :func:`build_results`: batches -> Results, the same on every path
=================  ====================================================================

A backend (:class:`Backend`) turns a batch and a plan into :class:`~topkeval.kernels.stats.QueryStats`;
:class:`CpuBackend` runs the compiled kernel of :mod:`topkeval.kernels.cpu`. Another backend (a
GPU selection, a Spark partition) implements the same ``compute`` and nothing else changes.
"""

from .backends import CPU, Backend, CpuBackend, Queries, comparable_scores, discounts, gains_of, tie_items, tie_rule
from .evaluate import (
    Evaluated,
    LogSource,
    ModelValues,
    check_depth_rule,
    evaluate_grouped,
    evaluate_log,
    items_changed,
    truncate,
    warn_if_nothing_relevant,
)
from .plan import Plan, make_plan
from .results import build_results, mean

__all__ = ["CPU", "Backend", "CpuBackend", "Evaluated", "LogSource", "ModelValues", "Plan", "Queries", "build_results",
           "check_depth_rule", "comparable_scores", "discounts", "evaluate_grouped", "evaluate_log", "gains_of", "items_changed",
           "make_plan", "mean", "tie_items", "tie_rule", "truncate", "warn_if_nothing_relevant"]
