"""The per-query statistics that every kernel produces and every metric consumes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class QueryStats:
    """Statistics of one model over the queries of a grouped log.

    Attributes
    ----------
    cutoffs : ndarray of int64, shape (C,)
        The distinct cutoffs requested, ascending.
    h : ndarray of float64, shape (Q, C)
        h(k): relevant candidates among the top min(k, n); under ``ties="expected"`` the exact
        expected value over the orders of tied candidates.
    hit : ndarray of float64, shape (Q, C)
        1 if a relevant candidate is in the top k (a probability under ``ties="expected"``).
    h_at_r : ndarray of float64, shape (Q,)
        h(R), for R-precision.
    n : ndarray of int64, shape (Q,)
        Candidates of the query left after ``score_threshold``.
    rel_ret : ndarray of int64, shape (Q,)
        Relevant candidates among those n.
    R : ndarray of int64, shape (Q,)
        Relevant items of the query (candidates removed by ``score_threshold`` included).
    tie_at_cutoff : ndarray of bool, shape (Q,)
        A tie group of relevant and non-relevant candidates straddles a requested cutoff (or R),
        so the tie rule decides the value.
    """

    cutoffs: np.ndarray
    h: np.ndarray
    hit: np.ndarray
    h_at_r: np.ndarray
    n: np.ndarray
    rel_ret: np.ndarray
    R: np.ndarray
    tie_at_cutoff: np.ndarray

    @property
    def N(self) -> np.ndarray:
        """Non-relevant candidates of each query."""
        return self.n - self.rel_ret

    def column(self, k: int) -> int:
        """Index of cutoff ``k`` in :attr:`cutoffs`."""
        return int(np.searchsorted(self.cutoffs, k))

    def take(self, rows: np.ndarray) -> QueryStats:
        """The statistics of a subset of queries (a boolean mask or indices)."""
        return QueryStats(self.cutoffs, self.h[rows], self.hit[rows], self.h_at_r[rows],
                          self.n[rows], self.rel_ret[rows], self.R[rows], self.tie_at_cutoff[rows])
