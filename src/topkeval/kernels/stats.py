"""The per-query statistics that every kernel produces and every metric consumes."""

from __future__ import annotations

from dataclasses import dataclass, fields

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
    rr, ap, dcg, dcg_exp, idcg, idcg_exp : ndarray of float64, shape (Q, C), optional
        Rank-aware statistics (present when a rank-aware metric was asked for): reciprocal rank,
        the sum of precisions at relevant ranks (AP times R), DCG with linear and exponential
        gains, and the ideal DCGs. Expected values under ``ties="expected"``.
    """

    cutoffs: np.ndarray
    h: np.ndarray
    hit: np.ndarray
    h_at_r: np.ndarray
    n: np.ndarray
    rel_ret: np.ndarray
    R: np.ndarray
    tie_at_cutoff: np.ndarray
    rr: np.ndarray | None = None
    ap: np.ndarray | None = None
    dcg: np.ndarray | None = None
    dcg_exp: np.ndarray | None = None
    idcg: np.ndarray | None = None
    idcg_exp: np.ndarray | None = None

    @property
    def N(self) -> np.ndarray:
        """Non-relevant candidates of each query."""
        return self.n - self.rel_ret

    def column(self, k: int | None) -> int:
        """Index of cutoff ``k`` in :attr:`cutoffs` (None: the uncut column)."""
        from .cpu import NO_CUTOFF

        return int(np.searchsorted(self.cutoffs, NO_CUTOFF if k is None else k))

    def take(self, rows: np.ndarray) -> QueryStats:
        """The statistics of a subset of queries (a boolean mask or indices)."""
        return QueryStats(**{f.name: (v if f.name == "cutoffs" or v is None else v[rows])
                             for f in fields(self) for v in [getattr(self, f.name)]})
