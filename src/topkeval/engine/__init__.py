"""The engine: one plan, one backend call per model, one way from statistics to an Evaluation (shown as Results).

Every front door (``evaluate`` on a table or a file, ``evaluate(run, qrels=...)``,
``evaluate_matrix``, a streamed parquet file, the one-ranking functions) turns its input into one
or more grouped logs (:class:`~topkeval.inputs.grouped.GroupedLog`) and then does exactly this::

    plan = make_plan(metrics, conventions)            # which statistics, cutoffs, gain variants
    batch = evaluate_log(log, plan, ...)              # per model: backend -> QueryStats -> values
    res = build_results([batch, ...], plan, ...)      # summary, per_query, info: the same keys on every path

=================  ====================================================================
``plan.py``        :class:`Plan`: which statistics, cutoffs, gain variants and depth
``rules.py``       :class:`Backend` (the contract a backend implements) and the conventions as kernel inputs
``evaluate.py``    :func:`evaluate_log`: QueryStats -> per-query values, one batch at a time
``results.py``     :func:`build_results`: batches -> :class:`Evaluation`, the same on every path
``aggregate.py``   the means, weighted or not, exact for any finite values and weights
=================  ====================================================================

A backend (:class:`Backend`) turns a batch and a plan into :class:`~topkeval.kernels.stats.QueryStats`;
:class:`~topkeval.backends.cpu.CpuBackend` runs the compiled kernel of :mod:`topkeval.kernels.cpu`. Another backend (a
GPU selection, a Spark partition) implements the same ``compute`` and nothing else changes.
"""

from .aggregate import mean
from .evaluate import (
    Evaluated,
    LogSource,
    ModelValues,
    check_depth_rule,
    evaluate_grouped,
    evaluate_log,
    merge_evaluated,
    truncate,
    warn_if_nothing_relevant,
    warn_if_truncated,
    warn_leaked,
)
from .plan import Plan, conventions_of, judged_only_metrics, make_plan, plan_of
from .results import Evaluation, attach, build_results, check_result_names, from_per_query
from .rules import Backend, Queries, comparable_scores, discounts, gains_of, threshold, tie_items, tie_rule

__all__ = ["Backend", "Evaluated", "Evaluation", "LogSource", "ModelValues", "Plan", "Queries", "attach", "build_results", "check_result_names",
           "check_depth_rule", "comparable_scores", "conventions_of", "discounts", "evaluate_grouped", "evaluate_log",
           "from_per_query", "gains_of", "judged_only_metrics", "make_plan", "merge_evaluated", "mean", "plan_of", "threshold", "tie_items", "tie_rule", "truncate", "warn_if_nothing_relevant", "warn_if_truncated",
           "warn_leaked"]
