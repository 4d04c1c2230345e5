"""Metrics: pure functions from per-query statistics to per-query values, and their registry.

Nothing here reads data or ranks candidates: each function takes a
:class:`~topkeval.kernels.stats.QueryStats`, a :class:`~topkeval.metrics.names.Metric` and the
:class:`~topkeval.conventions.Conventions`, and returns one value per query. Each is registered
in :data:`FAMILIES` (see :mod:`topkeval.metrics.registry`) by the module that defines it:
``setbased`` (top-k and whole-list set metrics, counts), ``rankbased`` (rr, ap, dcg, ndcg, rbp),
``judged`` (judged@k, bpref, iprec, iprec_avg, auc, err), ``trec`` (trec_eval's other measures:
utility, gm_map, gm_bpref, Rprec_mult, binG, G, Rndcg, ndcg_rel, num_nonrel_judged_ret; and its measure
sets, all_trec and official)
and ``sequence`` (cwl_eval's C/W/L measures, compat, accuracy); ``pooled`` the ratios pooled over the
queries of a click log (recall_micro, f1_micro, fbeta_micro: estimates from clicks).
``beyond`` registers the beyond-accuracy families (novelty, diversity, coverage...), which read
each top k's items again instead (:mod:`topkeval.analysis.beyond`).
"""

import numpy as np

from . import beyond, judged, pooled, rankbased, sequence, setbased, trec  # noqa: F401  (each registers its families)
from .registry import FAMILIES, DcgSpec, Family, Param


def metric_values(st, metric, conv) -> np.ndarray:
    """Per-query values of one metric (float64, one per query of ``st``)."""
    return np.asarray(FAMILIES[metric.family].function(st, metric, conv), dtype=np.float64)


__all__ = ["FAMILIES", "DcgSpec", "Family", "Param", "metric_values"]
