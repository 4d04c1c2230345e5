"""Metrics: pure functions from per-query statistics to per-query values.

Nothing here reads data or ranks candidates: each function takes a
:class:`~topkeval.kernels.stats.QueryStats`, a :class:`~topkeval.names.Metric` and the
:class:`~topkeval.conventions.Conventions`, and returns one value per query.
"""

from .setbased import FUNCTIONS, metric_values

__all__ = ["FUNCTIONS", "metric_values"]
