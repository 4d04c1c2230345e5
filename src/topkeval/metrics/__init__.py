"""Metrics: pure functions from per-query statistics to per-query values.

Nothing here reads data or ranks candidates: each function takes a
:class:`~topkeval.kernels.stats.QueryStats`, a :class:`~topkeval.names.Metric` and the
:class:`~topkeval.conventions.Conventions`, and returns one value per query.
"""

from .rankbased import FUNCTIONS as RANK_FUNCTIONS
from .rankbased import RANK_FAMILIES
from .setbased import SET_FUNCTIONS, metric_values

FUNCTIONS = {**SET_FUNCTIONS, **RANK_FUNCTIONS}

__all__ = ["FUNCTIONS", "RANK_FAMILIES", "metric_values"]
