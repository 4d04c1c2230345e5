"""Plackett-Luce rankings: the probability of each candidate at each of the first K positions.

A Plackett-Luce policy over scores ``s`` with temperature ``T`` fills position 1, 2, ... by drawing,
among the candidates not placed yet, candidate ``a`` with probability ``w_a / sum of the remaining
w``, where ``w_a = exp(s_a / T)``. The probability of a given ordered prefix ``a_1 .. a_j`` is the
product of those draws::

    pi(a_1 .. a_j) = prod_{m <= j} w_{a_m} / (W - w_{a_1} - ... - w_{a_{m-1}}),   W = sum of all w

(:func:`prefix_probabilities`, exact). The marginal ``pi(a at position j)`` sums that over every
prefix that ends with ``a``; :func:`marginals` computes it

* exactly, by a recursion over the sets S of candidates that fill the first m positions (in any
  order): ``P(S) = sum_{b in S} P(S - b) w_b / (W - w(S - b))`` and
  ``pi(a at m + 1) = w_a sum_{|S| = m, a not in S} P(S) / (W - w(S))``, when the number of such sets,
  ``sum_{m < K} C(n, m)`` for n candidates, is at most :data:`EXACT_SETS`; every round with the same
  number of candidates at once (arrays of sets x rounds);
* otherwise by Monte Carlo: ``samples`` rankings per round (Rao-Blackwellised, compiled:
  :func:`topkeval.kernels.offpolicy.sample_plackett_luce`), from a generator seeded by ``seed`` and
  the round; each marginal comes with its standard error.

Sharp temperatures and huge scores: no weight is ever formed on its own scale (``exp(s / T)``
under- or overflows as soon as ``|s| / T`` passes about 700). Every ratio of weights is taken
relative to the largest weight still in the draw: the candidates sorted by score, ``f`` the first
one not placed yet, ``E_f(a) = exp((s_a - s_f) / T) <= 1`` for every candidate ``a`` after it and
``R_f(S) = sum_{a not in S} E_f(a) >= 1`` (``f`` itself counts 1), so the chance of ``a`` next is
``E_f(a) / R_f(S)`` without a 0 / 0, and every probability of each position sums to 1 (up to
rounding). A difference of scores is formed as ``2 ((s_a / 2 - s_f / 2) / T)``, which overflows only
where the true value is below -1.8e308 (a chance of exactly 0 in floating point).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

#: The largest number of candidate sets (``sum_{m < K} C(n, m)``) for which the marginals are exact.
EXACT_SETS = 50_000

#: Monte Carlo rankings per round when the marginals cannot be exact and ``samples`` is not given.
#: Rao-Blackwellised (each draw adds the chance of every candidate at each position given the items
#: drawn above it), 1,000 draws give each marginal a standard error below ``0.5 / sqrt(1000)``: the
#: noise they add to an estimate is far below its own (they are independent across rounds).
DEFAULT_SAMPLES = 1_000

#: Elements of the arrays (sets x rounds) of one chunk of rounds of the exact recursion.
_CHUNK = 2_000_000


def exact_sets(n: int, depth: int) -> int:
    """``sum_{m < depth} C(n, m)``: the candidate sets the exact recursion walks."""
    return sum(math.comb(n, m) for m in range(min(depth, n)))


def scaled(a: np.ndarray, b: np.ndarray | float, temperature: float) -> np.ndarray:
    """``(a - b) / T`` formed as ``2 ((a / 2 - b / 2) / T)``: the difference of two finite scores never
    overflows; the quotient only where its true value is beyond +-1.8e308."""
    with np.errstate(over="ignore"):
        return 2.0 * ((np.asarray(a) * 0.5 - np.asarray(b) * 0.5) / temperature)


@lru_cache(maxsize=32)
def _sets(n: int, depth: int):
    """Per level m < depth: the sets of size m (sorted tuples, as rows), for each member the index of
    the set without it in level m - 1, the incidence matrix (sets x candidates), and each set's first
    candidate not in it."""
    levels = []
    previous: dict = {(): 0}
    for m in range(min(depth, n)):
        combos = np.array(list(itertools.combinations(range(n), m)), dtype=np.int64).reshape(math.comb(n, m), m)
        parents = np.array([[previous[c[:t] + c[t + 1:]] for t in range(m)] for c in map(tuple, combos)],
                           dtype=np.int64).reshape(len(combos), m)
        incidence = np.zeros((len(combos), n))
        if m:
            incidence[np.repeat(np.arange(len(combos)), m), combos.ravel()] = 1.0
        # the first candidate not in the set: the number of leading members 0, 1, 2, ...
        first = (np.cumprod(combos == np.arange(m)[None, :], axis=1).sum(axis=1) if m else
                 np.zeros(1, np.int64)).astype(np.int64)
        groups = [np.flatnonzero(first == f) for f in range(m + 1)]
        levels.append((combos, parents, incidence, first, groups))
        previous = {tuple(c): i for i, c in enumerate(combos)}
    return levels


def _exact_block(s: np.ndarray, temperature: float, depth: int) -> np.ndarray:
    """Marginals of rounds with the same number n of candidates: ``s`` (rounds, n) their scores;
    returns (rounds, n, depth), the probability of each candidate at positions 1..depth (0 beyond n).

    The candidates sorted by score, descending, in each round; with ``E_f`` and ``R_f`` of the module
    docstring, ``share(S) = P(S) / R_f(S)`` (``f`` the set's first candidate not in it):
    ``P(S) = sum_{b in S} share(S - b) E_{f(S - b)}(b)`` and ``pi(a at |S| + 1) = sum over the sets S
    without a of E_{f(S)}(a) share(S)``: every factor in [0, 1]."""
    rounds, n = s.shape
    order = np.argsort(-s, axis=1, kind="stable")
    ordered = np.take_along_axis(s, order, axis=1)
    F = min(depth, n)
    # E[f] (n, rounds): exp((s_a - s_f) / T) for the candidates a after f (1 for those before: never used)
    E = np.exp(np.minimum(scaled(ordered.T[None, :, :], ordered.T[:F, None, :], temperature), 0.0))
    out = np.zeros((n, depth, rounds))
    share = np.zeros((1, rounds))
    first_prev = np.zeros(1, np.int64)
    for m, (combos, parents, incidence, first, groups) in enumerate(_sets(n, depth)):
        if m:
            prob = np.zeros((len(combos), rounds))
            for t in range(m):
                prob += share[parents[:, t]] * E[first_prev[parents[:, t]], combos[:, t]]
        else:
            prob = np.ones((1, rounds))
        rest = np.empty((len(combos), rounds))
        for f, members in enumerate(groups):
            if len(members):
                rest[members] = (1.0 - incidence[members]) @ E[f]  # >= 1: f is outside the set
        share = prob / rest
        for f, members in enumerate(groups):
            if len(members):
                out[:, m] += E[f] * ((1.0 - incidence[members].T) @ share[members])
        first_prev = first
    result = np.zeros((rounds, n, depth))
    result[np.arange(rounds)[:, None], order] = np.clip(out.transpose(2, 0, 1), 0.0, 1.0)
    return result


def marginals(scores: np.ndarray, offsets: np.ndarray, temperature: float, depth: int, *,
              samples: int | None = None, seed: int | None = 0) -> tuple[np.ndarray, dict]:
    """The probability of each row's candidate at positions 1..``depth`` under a Plackett-Luce policy
    over its round's candidates (rows ``offsets[i]:offsets[i+1]`` are round i's candidates).

    Returns
    -------
    ndarray of shape (rows, depth), and what was done: ``{"exact": rounds computed exactly,
    "sampled": rounds by Monte Carlo, "samples": draws per sampled round, "largest_standard_error",
    "mean_standard_error"}`` (of the sampled marginals, 0 when none is), with the standard error of
    each marginal (rows, depth; 0 where exact) under ``"_standard_errors"``.

    Examples
    --------
    >>> import numpy as np
    >>> m, how = marginals(np.array([0.0, 0.0, np.log(2.0)]), np.array([0, 3]), 1.0, 2)
    >>> m.round(4).tolist()  # weights 1, 1, 2: the third is first half the time
    [[0.25, 0.3333], [0.25, 0.3333], [0.5, 0.3333]]
    >>> m, how = marginals(np.array([40.0, 30.0, 20.0, 12.0]), np.array([0, 4]), 0.02, 4)
    >>> m.sum(axis=0).tolist()  # exp(-1400) underflows, yet every position's chances sum to 1
    [1.0, 1.0, 1.0, 1.0]
    """
    from ..kernels.offpolicy import sample_plackett_luce

    rows = len(scores)
    out = np.zeros((rows, depth))
    errors = np.zeros((rows, depth))
    sizes = np.diff(offsets)
    how: dict = {"exact": 0, "sampled": 0, "samples": 0}
    sampled_rounds = []
    for n in np.unique(sizes):
        n = int(n)
        if n == 0:
            continue
        rounds = np.flatnonzero(sizes == n)
        if samples is None and exact_sets(n, depth) <= EXACT_SETS:
            widest = max(math.comb(n, m) for m in range(min(depth, n)))
            step = max(1, _CHUNK // max(widest * max(n, depth), 1))
            for start in range(0, len(rounds), step):
                part = rounds[start:start + step]
                take = offsets[part][:, None] + np.arange(n)  # (rounds, n) row indices
                out[take.ravel()] = _exact_block(scores[take], temperature, depth).reshape(-1, depth)
            how["exact"] += len(rounds)
        else:
            sampled_rounds.append(rounds)
    if sampled_rounds:
        draws = samples if samples is not None else DEFAULT_SAMPLES
        which = np.sort(np.concatenate(sampled_rounds))
        sample_plackett_luce(offsets, scores, temperature, depth, draws, 0 if seed is None else int(seed), which,
                             out, errors)
        how["sampled"] = int(len(which))
        how["samples"] = int(draws)
        picked = np.repeat(which, sizes[which])
        rows_of = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in which]) if len(which) else picked
        how["largest_standard_error"] = float(errors[rows_of].max(initial=0.0))
        how["mean_standard_error"] = float(errors[rows_of].mean()) if len(rows_of) else 0.0
    else:
        how["largest_standard_error"] = how["mean_standard_error"] = 0.0
    how["_standard_errors"] = errors
    return out, how


def log_weight_sums(scores: np.ndarray, round_of: np.ndarray, n: int, temperature: float) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """Per round, ``(top, total)`` with the round's weights ``exp(s / T)`` summing to
    ``exp(top / T) * total``: ``top`` the largest score of the rows given (``-inf`` without one) and
    ``total = sum exp((s - top) / T) >= 1`` (0 without a row)."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, round_of, scores)
    total = np.bincount(round_of, weights=np.exp(scaled(scores, top[round_of], temperature)), minlength=n) \
        if len(scores) else np.zeros(n)
    return top, total


def prefix_probabilities(score_of_shown: np.ndarray, top_unshown: np.ndarray, total_unshown: np.ndarray,
                         temperature: float) -> np.ndarray:
    """``pi(a_1 .. a_j)`` for every logged prefix: ``score_of_shown`` is (rounds, positions), the score
    of the item logged at each position (NaN where none), ``top_unshown``, ``total_unshown`` each
    round's other candidates as :func:`log_weight_sums` gives them. Exact: each draw's chance is its
    weight over the weights still in the draw, both relative to the largest of those (a running
    log-sum-exp from the last position up), so no weight under- or overflows; NaN after a position
    without an item.

    >>> s = np.array([[40.0, 12.0, 11.0]])  # exp(-1400) underflows: the second draw is still 1 / (1 + e^-50)
    >>> prefix_probabilities(s, np.array([-np.inf]), np.array([0.0]), 0.02).round(6).tolist()
    [[1.0, 1.0, 1.0]]
    """
    rounds, width = score_of_shown.shape
    top = np.array(top_unshown, dtype=np.float64, copy=True)
    total = np.array(total_unshown, dtype=np.float64, copy=True)
    step = np.full((rounds, width), np.nan)
    for j in range(width - 1, -1, -1):  # fold position j into the weights still in the draw at j
        s = score_of_shown[:, j]
        has = ~np.isnan(s)
        higher = has & (s > top)
        new_top = np.where(higher, s, top)
        with np.errstate(invalid="ignore"):
            total = np.where(has, total * np.where(np.isinf(top) & (top < 0), 0.0,
                                                   np.exp(scaled(top, new_top, temperature)))
                             + np.exp(scaled(np.where(has, s, 0.0), np.where(has, new_top, 0.0), temperature)),
                             total)
        top = new_top
        step[:, j] = np.where(has, np.exp(scaled(np.where(has, s, 0.0), np.where(has, top, 0.0), temperature))
                              / np.where(has, total, 1.0), np.nan)
    return np.cumprod(step, axis=1)
