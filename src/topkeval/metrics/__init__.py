"""Metrics: pure functions from per-query statistics to per-query values, and their registry.

Nothing here reads data or ranks candidates: each function takes a
:class:`~topkeval.kernels.stats.QueryStats`, a :class:`~topkeval.metrics.names.Metric` and the
:class:`~topkeval.conventions.Conventions`, and returns one value per query. Each is registered
in :data:`FAMILIES` (see :mod:`topkeval.metrics.registry`) by the module that defines it:
``setbased`` (top-k and whole-list set metrics, counts), ``rankbased`` (rr, ap, dcg, ndcg, rbp) and
``judged`` (judged@k, bpref, iprec, iprec_avg, auc, err) and ``sequence`` (cwl_eval's C/W/L measures,
compat, accuracy).
"""

import numpy as np

from . import judged, rankbased, sequence, setbased  # noqa: F401  (each registers its families)
from .registry import FAMILIES, DcgSpec, Family, Param


def metric_values(st, metric, conv) -> np.ndarray:
    """Per-query values of one metric (float64, one per query of ``st``)."""
    return np.asarray(FAMILIES[metric.family].function(st, metric, conv), dtype=np.float64)


__all__ = ["FAMILIES", "DcgSpec", "Family", "Param", "metric_values"]
