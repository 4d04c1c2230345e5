"""Kernels: per-query statistics for every requested cutoff, in one pass over a grouped log.

``cpu`` is the default (numba, compiled once and cached on disk). Every kernel returns the same
:class:`~topkeval.kernels.stats.QueryStats`, from which ``topkeval.metrics`` computes values.
"""
