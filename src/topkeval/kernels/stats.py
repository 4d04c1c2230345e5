"""The per-query statistics that every backend produces and every metric consumes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

#: A cutoff larger than any list: the uncut metrics (``ap``, ``rr``, ``ndcg``) use it.
NO_CUTOFF = 1 << 40


@dataclass
class QueryStats:
    """Statistics of one model over the queries of a grouped log.

    Attributes
    ----------
    cutoffs : ndarray of int64, shape (C,)
        The distinct cutoffs requested, ascending (:data:`NO_CUTOFF` stands for the whole list).
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
    rr, ap_sum : ndarray of float64, shape (Q, C), or (0, C) when no metric needs them
        Reciprocal rank of the first relevant candidate (0 beyond k) and the sum of the precisions
        at the relevant ranks up to k (AP times R). Expected values under ``ties="expected"``.
    dcg, ideal_dcg : ndarray of float64, shape (G, Q, C)
        One discounted gain per :class:`~topkeval.metrics.registry.DcgSpec` of ``dcg_specs``, and
        the DCG of the ideal order of every judged gain of the query. Each variant is stored
        divided by ``2 ** dcg_shift[g]`` (0 unless its gains are so large that sums would overflow).
    dcg_specs : tuple of DcgSpec
    dcg_shift : ndarray of int64, shape (G,)
    judged : ndarray of float64, shape (Q, C), or (0, C) when no metric needs it
        Judged candidates (those with a judgment, relevant or not) among the top min(k, n);
        expected values under ``ties="expected"``.
    bpref_sum : ndarray of float64, shape (Q,), or (0,)
        trec_eval's bpref times R: the sum over relevant candidates of
        ``1 - min(X, R) / min(NJ, R)`` (1 when ``min(NJ, R) = 0``), X the judged non-relevant
        candidates ranked above it and NJ the judged non-relevant items of the query.
    iprec : ndarray of float64, shape (Q, L), or (Q, 0)
        trec_eval's interpolated precision at each recall level of ``iprec_levels``.
    auc_sum : ndarray of float64, shape (Q,), or (0,)
        Pairs (relevant, non-relevant candidate) ranked in that order (a tied pair counts 1/2
        under ``ties="expected"``).
    infap_sum : ndarray of float64, shape (Q,), or (0,)
        trec_eval's inferred AP times R: the sum over relevant candidates of their inferred
        precision (:mod:`topkeval.kernels.ranked`).
    err : ndarray of float64, shape (V, Q, C)
        Expected reciprocal rank at each cutoff, one per maximum grade of ``err_grades``.
    h_mult : ndarray of float64, shape (Q, M), or (Q, 0)
        h(c) at each query's own cutoff c = floor(x R + 0.9), one column per multiplier x of
        ``mults`` (trec_eval's Rprec_mult); expected values under ``ties="expected"``.
    bin_g_sum : ndarray of float64, shape (Q,), or (0,)
        trec_eval's binG times R: the sum over relevant candidates of ``1 / log2(2 + X)``, X the
        candidates ranked above it that are not relevant (expected values under ``ties="expected"``).
    walk : ndarray of float64, shape (3, W, Q)
        trec_eval's G, Rndcg and ndcg_rel (in that order) under each gain variant of
        ``walk_specs`` (:mod:`topkeval.kernels.ranked`); NaN where a query has no positive ideal
        gain. Rndcg is an expected value under ``ties="expected"``; G and ndcg_rel are computed
        under deterministic tie rules only.
    nonrel_judged : ndarray of float64, shape (Q,), or (0,)
        Judged non-relevant candidates retrieved (a judgment of grade >= 0, not relevant).
    seq : ndarray of float64, shape (S, Q)
        One value per query for each spec of ``seq_specs``: a statistic of the list in rank order
        (:mod:`topkeval.kernels.sequence`; deterministic tie rules only).
    iprec_levels : tuple of float
    err_grades : tuple of float
    mults : tuple of float
    walk_specs : tuple of DcgSpec
    seq_specs : tuple
    relevant_weight : ndarray of float64, shape (Q,), or None
        Under inverse propensity weights (:mod:`topkeval.engine.unbiased`), the weight of each
        query's relevant items (h, h(R) and DCG are weighted sums then); None without.
    """

    cutoffs: np.ndarray
    h: np.ndarray
    hit: np.ndarray
    h_at_r: np.ndarray
    n: np.ndarray
    rel_ret: np.ndarray
    R: np.ndarray
    tie_at_cutoff: np.ndarray
    rr: np.ndarray
    ap_sum: np.ndarray
    dcg: np.ndarray
    ideal_dcg: np.ndarray
    dcg_specs: tuple = ()
    dcg_shift: np.ndarray | None = None
    judged: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    bpref_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iprec: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    auc_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    err: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    infap_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iprec_levels: tuple = ()
    err_grades: tuple = ()
    seq: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    seq_specs: tuple = ()
    relevant_weight: np.ndarray | None = None
    h_mult: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    bin_g_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    walk: np.ndarray = field(default_factory=lambda: np.zeros((3, 0, 0)))
    nonrel_judged: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mults: tuple = ()
    walk_specs: tuple = ()

    _PER_QUERY = ("h", "hit", "h_at_r", "n", "rel_ret", "R", "tie_at_cutoff", "rr", "ap_sum", "judged", "bpref_sum",
                  "iprec", "auc_sum", "infap_sum", "relevant_weight", "h_mult", "bin_g_sum", "nonrel_judged")
    _PER_VARIANT = ("dcg", "ideal_dcg", "err", "seq")

    @property
    def n_queries(self) -> int:
        return len(self.R)

    @property
    def Rw(self) -> np.ndarray:
        """R, or the relevant items' weight under inverse propensity weights: the denominator of the
        ratios pooled over the queries (:mod:`topkeval.metrics.pooled`)."""
        return self.R if self.relevant_weight is None else self.relevant_weight

    @property
    def N(self) -> np.ndarray:
        """Non-relevant candidates of each query."""
        return self.n - self.rel_ret

    def column(self, k: int | None) -> int:
        """Index of cutoff ``k`` in :attr:`cutoffs` (None: the whole list)."""
        return int(np.searchsorted(self.cutoffs, NO_CUTOFF if k is None else k))

    def _variant(self, spec) -> int:
        return self.dcg_specs.index(spec)

    def dcg_at(self, spec, k: int | None) -> np.ndarray:
        """DCG of variant ``spec`` at cutoff ``k`` (inf where the true value exceeds float64)."""
        g = self._variant(spec)
        values = self.dcg[g, :, self.column(k)]
        shift = int(self.dcg_shift[g]) if self.dcg_shift is not None else 0
        if shift:
            with np.errstate(over="ignore"):
                return np.ldexp(values, shift)
        return values

    def ideal_at(self, spec, k: int | None) -> np.ndarray:
        """The ideal DCG of variant ``spec`` at cutoff ``k`` (inf where it exceeds float64)."""
        g = self._variant(spec)
        ideal = self.ideal_dcg[g, :, self.column(k)]
        shift = int(self.dcg_shift[g]) if self.dcg_shift is not None else 0
        with np.errstate(over="ignore"):
            return np.ldexp(ideal, shift) if shift else ideal

    def ndcg_terms(self, spec, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """DCG and ideal DCG of variant ``spec`` at cutoff ``k``, both divided by the same power of 2
        (their ratio is exact even when the unscaled values would overflow)."""
        g, c = self._variant(spec), self.column(k)
        return self.dcg[g, :, c], self.ideal_dcg[g, :, c]

    def level(self, recall: float) -> int:
        """Index of recall level ``recall`` in :attr:`iprec_levels`."""
        return self.iprec_levels.index(recall)

    def mult(self, x: float) -> int:
        """Index of multiplier ``x`` in :attr:`mults`."""
        return self.mults.index(x)

    def walk_at(self, measure: str, spec) -> np.ndarray:
        """trec_eval's ``"G"``, ``"Rndcg"`` or ``"ndcg_rel"`` under gain variant ``spec`` (NaN: no
        positive ideal gain)."""
        return self.walk[("G", "Rndcg", "ndcg_rel").index(measure), self.walk_specs.index(spec)]

    def err_at(self, max_grade: float, k: int | None) -> np.ndarray:
        """Expected reciprocal rank with maximum grade ``max_grade`` at cutoff ``k``."""
        return self.err[self.err_grades.index(max_grade), :, self.column(k)]

    def seq_at(self, spec) -> np.ndarray:
        """The per-query values of the sequence statistic ``spec`` (a spec of ``seq_specs``)."""
        return self.seq[self.seq_specs.index(spec)]

    def take(self, rows: np.ndarray) -> QueryStats:
        """The statistics of a subset of queries (a boolean mask or indices)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in self._PER_QUERY:
                v = v[rows] if v is not None and len(v) else v
            elif f.name in self._PER_VARIANT:
                v = v[:, rows] if v.shape[0] or f.name != "seq" else v  # no sequence: nothing to take
            elif f.name == "walk":
                v = v[:, :, rows] if v.shape[1] else v
            out[f.name] = v
        return QueryStats(**out)

    @staticmethod
    def concat(parts: list[QueryStats]) -> QueryStats:
        """The statistics of consecutive batches of queries, one after the other."""
        first = parts[0]
        if len(parts) == 1:
            return first
        out: dict[str, Any] = {}
        for f in fields(first):
            values = [getattr(p, f.name) for p in parts]
            if any(v is None for v in values):
                out[f.name] = None
            elif f.name in first._PER_QUERY:
                out[f.name] = np.concatenate(values)
            elif f.name in first._PER_VARIANT:
                out[f.name] = np.concatenate(values, axis=1)
            elif f.name == "walk":
                out[f.name] = np.concatenate(values, axis=2)
            else:
                out[f.name] = values[0]
        return QueryStats(**out)
