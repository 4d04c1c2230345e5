"""The examination curve's fit, for the estimate and for every bootstrap resample of the queries.

``harvest`` (intervention harvesting, Agarwal et al., WSDM 2019) by conditional likelihood: a
(query, item) pair g shown ``n_gj`` times at position j is clicked ``c_gj`` times with expectation
``n_gj p_j r_g`` (position-based model: examined with probability ``p_j``, clicked when examined
with probability ``r_g``, its relevance). Given the pair's total clicks ``T_g``, its clicks fall on
its positions with probabilities ``pi_gj = n_gj p_j / sum_l n_gl p_l``, free of ``r_g``; the curve
maximises ``sum_g sum_j c_gj log pi_gj`` (the Poisson fixed-effects quasi-likelihood of Hausman,
Hall & Griliches 1984; by Wooldridge 1999 its score ``sum_g (c_gj - T_g pi_gj)`` has expectation 0
whenever the mean is right, so Bernoulli clicks need no Poisson assumption). Every pair counts,
those without a click included (their terms are 0 whatever the curve: nothing is selected on the
outcome), and every position that shares a pair with another enters one joint fit (no equation of
two positions is solved alone). ``form="power"`` restricts ``log p_j = -eta log j``.

``randomized`` (results shown in random order, so relevance does not depend on position): the
clicks at j, ``C_j``, have expectation ``N_j p_j rbar`` (``N_j`` impressions), and the maximum
likelihood curve is ``p_j = (C_j / N_j) / (C_1 / N_1)``; the power form is the Poisson regression
``log E C_j = log N_j + a - eta log j``.

What no log can say is said, not guessed: a position without a click among the pairs that inform it
has the maximum likelihood value 0 (no finite weight); one that no pair links to position 1 (through
pairs with a click) has none. Each gets NaN and the reason.

Every fit runs on a block of resamples at once (``counts``: how many times each query is drawn), by
Newton's method on the log curve, so that re-estimating the curve 10,000 times costs seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataError

#: Newton iterations at most; a fit that has not converged by then is left NaN (it diverges: a
#: position whose pairs' other positions were never clicked has no finite maximum).
_ITERATIONS = 60
#: Numbers a block of resamples may hold in each of its arrays (resamples x positions x positions for
#: the Hessians, resamples x entries for the clicks): more resamples are fitted block by block.
_BLOCK = 4_000_000
#: A log propensity above this (p above e**25 times position 1's) is a divergence, not an estimate.
_RUNAWAY = 25.0


@dataclass(frozen=True, eq=False)
class Statistics:
    """The per-query sufficient statistics of the fit (picklable): what re-estimating the curve on
    resampled queries needs. ``clicks``: a sparse (queries with information x entries) matrix of
    clicks; ``rows``: those queries' codes among the log's ``n_queries``."""

    method: str
    form: str
    positions: np.ndarray  # every position of the curve (sorted); index 0 is position 1 when present
    n_queries: int
    rows: np.ndarray
    clicks: Any  # scipy.sparse.csr_matrix
    entry_position: np.ndarray  # per entry, the index of its position in ``positions``
    entry_shown: np.ndarray  # per entry, its impressions (n)
    entry_pattern: np.ndarray  # per entry, its pattern (harvest) ; unused by randomized
    shown: Any = None  # randomized: a sparse (queries x positions) matrix of impressions

    def fit(self, counts: np.ndarray | None = None, start: np.ndarray | None = None) -> np.ndarray:
        """Propensities (resamples x positions): 1 at position 1, 0 where no click, NaN where none
        can be placed. ``counts``: (resamples x n_queries) query weights, None for the estimate;
        ``start``: a curve to start Newton's method from (the estimate, for resamples)."""
        if counts is None:
            w = np.ones((1, len(self.rows)))
        else:
            w = np.asarray(counts, np.float64)[:, self.rows]
        J, E = len(self.positions), len(self.entry_position)
        per = max(1, _BLOCK // (J * J + 6 * E + 1))  # resamples fitted at once: their arrays within _BLOCK numbers
        out = []
        for part in range(0, len(w), per):
            block = w[part:part + per]
            clicks = np.asarray((self.clicks.T @ block.T).T)  # resamples x entries
            if self.method == "randomized":
                shown = np.asarray((self.shown.T @ block.T).T)
                out.append(_randomized(clicks, shown, self.positions, self.form))
            else:
                out.append(_harvest(clicks, self, self.form, start))
        return np.vstack(out)


def harvest_statistics(agg: pd.DataFrame, n_queries: int, positions: np.ndarray, form: str) -> Statistics:
    """From one row per (pair, position) with the pair's query ``q``, impressions ``n`` and clicks
    ``c``: the pairs shown at two positions or more, grouped by their pattern (the positions and
    impressions of the pair), and per query the clicks of each (pattern, slot) entry."""
    from scipy import sparse

    agg = agg.sort_values(["pair", "pos"], kind="stable")
    size = agg.groupby("pair", sort=False)["pos"].transform("size").to_numpy()
    agg = agg[size > 1]
    size = size[size > 1]
    if not len(agg):
        raise DataError("No (query, item) was shown at two different positions, so position bias cannot be harvested: "
                        "the log needs several rankers, A/B arms or natural variation (the same query and item at "
                        "different positions). With one ranker's log only: a randomisation experiment "
                        "(method='randomized'), or an assumed curve such as propensity={k: 1 / k} in evaluate.")
    pair = agg["pair"].to_numpy()
    first = np.ones(len(pair), bool)
    first[1:] = pair[1:] != pair[:-1]
    start = np.flatnonzero(first)
    slot = np.arange(len(pair)) - np.repeat(start, np.diff(np.append(start, len(pair))))
    pos_index = np.searchsorted(positions, agg["pos"].to_numpy())
    shown = agg["n"].to_numpy(np.float64)
    entry_of_row = np.empty(len(pair), np.int64)
    entry_position, entry_shown, entry_pattern = [], [], []
    n_entries = n_patterns = 0
    for m in np.unique(size):  # pairs of m positions: their patterns, found at once
        rows_m = np.flatnonzero(size == m)
        starts = rows_m[slot[rows_m] == 0]
        at = starts[:, None] + np.arange(m)
        keys = np.column_stack([pos_index[at], shown[at]])
        patterns, which = np.unique(keys, axis=0, return_inverse=True)
        which = which.ravel()
        entry_of_row[at] = n_entries + which[:, None] * m + np.arange(m)
        entry_position.append(patterns[:, :m].astype(np.int64).ravel())
        entry_shown.append(patterns[:, m:].ravel())
        entry_pattern.append(np.repeat(np.arange(n_patterns, n_patterns + len(patterns)), m))
        n_entries += len(patterns) * m
        n_patterns += len(patterns)
    clicked = agg["c"].to_numpy(np.float64) > 0
    q = agg["q"].to_numpy()[clicked]
    rows, q_row = np.unique(q, return_inverse=True)
    matrix = sparse.csr_matrix((agg["c"].to_numpy(np.float64)[clicked], (q_row, entry_of_row[clicked])),
                               shape=(len(rows), n_entries))
    matrix.sum_duplicates()
    return Statistics("harvest", form, positions, n_queries, rows, matrix, np.concatenate(entry_position),
                      np.concatenate(entry_shown), np.concatenate(entry_pattern))


def randomized_statistics(agg: pd.DataFrame, n_queries: int, positions: np.ndarray, form: str) -> Statistics:
    """Per query and position: the clicks and the impressions (a randomisation experiment)."""
    from scipy import sparse

    q = agg["q"].to_numpy()
    rows, q_row = np.unique(q, return_inverse=True)
    at = np.searchsorted(positions, agg["pos"].to_numpy())
    shape = (len(rows), len(positions))
    clicks = sparse.csr_matrix((agg["c"].to_numpy(np.float64), (q_row, at)), shape=shape)
    shown = sparse.csr_matrix((agg["n"].to_numpy(np.float64), (q_row, at)), shape=shape)
    clicks.sum_duplicates()
    shown.sum_duplicates()
    index = np.arange(len(positions))
    return Statistics("randomized", form, positions, n_queries, rows, clicks, index, np.ones(len(positions)), index,
                      shown)


def _randomized(clicks: np.ndarray, shown: np.ndarray, positions: np.ndarray, form: str) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        ctr = clicks / shown
        if form == "free":
            out = ctr / ctr[:, :1]
            return np.where(ctr[:, :1] > 0, out, np.nan)
    # power: Poisson regression of the clicks on log position, an intercept and log impressions
    x = np.log(positions.astype(np.float64))
    out = np.full(clicks.shape, np.nan)
    ok = (clicks.sum(axis=1) > 0) & ((clicks > 0) & (x > 0)).any(axis=1)
    c, n = clicks[ok], shown[ok]
    a = np.log(c.sum(axis=1) / n.sum(axis=1))
    eta = np.zeros(len(c))
    for _ in range(_ITERATIONS):
        mu = n * np.exp(a[:, None] - eta[:, None] * x)
        g = np.column_stack([(c - mu).sum(axis=1), -((c - mu) * x).sum(axis=1)])
        h = np.stack([np.column_stack([mu.sum(axis=1), -(mu * x).sum(axis=1)]),
                      np.column_stack([-(mu * x).sum(axis=1), (mu * x * x).sum(axis=1)])], axis=1)
        step = np.clip(np.linalg.solve(h, g[:, :, None])[:, :, 0], -1.0, 1.0)
        a, eta = a + step[:, 0], eta + step[:, 1]
        if np.abs(step).max(initial=0.0) < 1e-12:
            break
    out[ok] = np.exp(-eta[:, None] * x)
    return out


def _harvest(clicks: np.ndarray, s: Statistics, form: str, start: np.ndarray | None = None) -> np.ndarray:
    """Maximum conditional likelihood curves, one per row of ``clicks`` (resamples x entries)."""
    from scipy import sparse

    B, E = clicks.shape
    J = len(s.positions)
    n_patterns = int(s.entry_pattern.max()) + 1
    to_position = sparse.csr_matrix((np.ones(E), (np.arange(E), s.entry_position)), shape=(E, J))
    to_pattern = sparse.csr_matrix((np.ones(E), (np.arange(E), s.entry_pattern)), shape=(E, n_patterns))
    totals = np.asarray((to_pattern.T @ clicks.T).T)  # resamples x patterns: T
    t_entry = totals[:, s.entry_pattern]
    x = np.log(s.positions.astype(np.float64))
    out = np.full((B, J), np.nan)
    if s.positions[0] != 1:
        return out
    if form == "power":
        ok = np.ones(B, bool)
        eta = np.zeros(B)
        for _ in range(_ITERATIONS):
            pi = _shares(-eta[:, None] * x[s.entry_position], s, to_pattern, np.ones((B, E), bool))
            resid = clicks - t_entry * pi
            xe = x[s.entry_position]
            mean_x = np.asarray((to_pattern.T @ (pi * xe).T).T)[:, s.entry_pattern]
            info = (t_entry * pi * (xe - mean_x) ** 2).sum(axis=1)
            ok &= info > 0
            step = np.clip(np.where(ok, -(resid * xe).sum(axis=1) / np.where(ok, info, 1.0), 0.0), -1.0, 1.0)
            eta = eta + step
            if np.abs(step).max(initial=0.0) < 1e-12:
                break
        ok &= np.abs(eta) < _RUNAWAY
        out[ok] = np.exp(-eta[ok, None] * x)
        return out
    at_position = np.asarray((to_position.T @ clicks.T).T)  # resamples x positions: clicks at each
    zero = at_position <= 0
    live = ~zero[:, s.entry_position] & (s.entry_shown > 0)  # resamples x entries
    e1, e2 = _entry_pairs(s)
    cells = s.entry_position[e1] * J + s.entry_position[e2]
    to_cell = sparse.csr_matrix((np.ones(len(e1)), (np.arange(len(e1)), cells)), shape=(len(e1), J * J))
    reached = _reached(live & (t_entry > 0), e1, e2, to_cell, J)
    free = reached & ~zero
    free[:, 0] = False
    anchored = reached[:, 0] & ~zero[:, 0]
    use = live & reached[:, s.entry_position]
    theta = np.zeros((B, J)) if start is None else np.where(np.isfinite(start) & (start > 0),
                                                             np.log(np.where(start > 0, start, 1.0)), 0.0)[None, :]
    theta = np.where(free, theta, 0.0)
    converged = ~anchored  # nothing to fit without position 1: left NaN below
    for _ in range(_ITERATIONS):
        pi = _shares(theta[:, s.entry_position], s, to_pattern, use)
        tp = t_entry * pi
        grad = np.where(free, np.asarray((to_position.T @ (clicks - tp).T).T), 0.0)
        outer = totals[:, s.entry_pattern[e1]] * pi[:, e1] * pi[:, e2]
        hess = -np.asarray((to_cell.T @ outer.T).T).reshape(B, J, J)
        hess[:, np.arange(J), np.arange(J)] += np.asarray((to_position.T @ tp.T).T)
        fixed = ~free
        hess[fixed[:, :, None] | fixed[:, None, :]] = 0.0
        hess[:, np.arange(J), np.arange(J)] += fixed
        step = _solve(hess, grad)
        step = np.where(np.isfinite(step), np.clip(step, -1.0, 1.0), np.nan)
        step[converged] = 0.0
        theta += np.nan_to_num(step, nan=0.0)
        converged |= np.isfinite(step).all(axis=1) & (np.abs(step).max(axis=1, initial=0.0) < 1e-9)
        runaway = free & (np.abs(theta) > _RUNAWAY)  # no finite maximum: frozen where it ran, NaN below
        free &= ~runaway
        if converged.all():
            break
    # a position without a click next to a placed one in a pair with a click: its maximum is 0
    informed = np.zeros((B, J), bool)
    pattern_clicked = totals[:, s.entry_pattern[e1]] > 0
    hit = pattern_clicked & zero[:, s.entry_position[e1]] & reached[:, s.entry_position[e2]] & ~zero[:, s.entry_position[e2]]
    b, li = np.nonzero(hit)
    informed[b, s.entry_position[e1[li]]] = True
    p = np.exp(theta)
    p[~reached | (np.abs(theta) > _RUNAWAY)] = np.nan
    p[zero & informed] = 0.0
    good = anchored & converged
    out[good] = p[good]
    return out


def _solve(hess: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Newton's steps of a block of resamples; a Hessian that is singular in floating point (a
    position whose pairs' other entries have all but none of the weight) gets its least-squares step."""
    with np.errstate(all="ignore"):
        try:
            return np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            return (np.linalg.pinv(hess) @ grad[:, :, None])[:, :, 0]


def _shares(log_p: np.ndarray, s: Statistics, to_pattern, use: np.ndarray) -> np.ndarray:
    """``pi`` per entry: its share ``n p`` of its pattern's total (0 for entries left out). The log
    propensities stay within +-_RUNAWAY (+-1 per step beyond), so ``exp`` neither overflows nor
    underflows."""
    weight = np.exp(log_p) * s.entry_shown
    weight *= use
    total = np.asarray((to_pattern.T @ weight.T).T)[:, s.entry_pattern]
    total[total == 0] = 1.0  # a pattern with no entry left: every share 0
    return weight / total


def _entry_pairs(s: Statistics) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (e, e') of entries of the same pattern, e = e' included."""
    order = np.argsort(s.entry_pattern, kind="stable")
    pat = s.entry_pattern[order]
    first = np.ones(len(pat), bool)
    first[1:] = pat[1:] != pat[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(pat)))
    e1, e2 = [], []
    for m in np.unique(sizes):
        st = starts[sizes == m]
        block = order[st[:, None] + np.arange(m)]
        e1.append(np.repeat(block, m, axis=1).ravel())
        e2.append(np.tile(block, (1, m)).ravel())
    return np.concatenate(e1), np.concatenate(e2)


def _reached(linked: np.ndarray, e1: np.ndarray, e2: np.ndarray, to_cell, J: int) -> np.ndarray:
    """Per resample, the positions linked to position 1 (index 0) through patterns with a click
    whose entries are ``linked`` (resamples x entries)."""
    both = (linked[:, e1] & linked[:, e2]).astype(np.float64)
    adjacency = (np.asarray((to_cell.T @ both.T).T) > 0).reshape(-1, J, J).astype(np.float64)
    reach = np.zeros((len(linked), J), bool)
    reach[:, 0] = True
    for _ in range(J):
        grown = reach | (np.einsum("bj,bjk->bk", reach.astype(np.float64), adjacency) > 0)
        if (grown == reach).all():
            break
        reach = grown
    return reach
