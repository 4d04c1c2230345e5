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
  number of candidates at once (arrays of rounds x sets);
* otherwise by Monte Carlo: ``samples`` rankings per round drawn with the Gumbel-max trick (the
  order of ``s / T + G``, G standard Gumbel, is a Plackett-Luce draw), from a seeded generator; the
  standard error of a marginal p is ``sqrt(p (1 - p) / samples)``.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

#: The largest number of candidate sets (``sum_{m < K} C(n, m)``) for which the marginals are exact.
EXACT_SETS = 50_000

#: Elements of the arrays of one Monte Carlo chunk (rounds x draws x candidates).
_CHUNK = 4_000_000


def exact_sets(n: int, depth: int) -> int:
    """``sum_{m < depth} C(n, m)``: the candidate sets the exact recursion walks."""
    return sum(math.comb(n, m) for m in range(min(depth, n)))


def weights(scores: np.ndarray, offsets: np.ndarray, temperature: float) -> np.ndarray:
    """``exp((s - max of its round) / T)`` per row: each round's largest weight is 1 (no overflow)."""
    starts = offsets[:-1]
    top = np.maximum.reduceat(scores, starts) if len(scores) else np.zeros(0)
    sizes = np.diff(offsets)
    return np.exp((scores - np.repeat(top, sizes)) / temperature)


@lru_cache(maxsize=32)
def _sets(n: int, depth: int):
    """Per level m < depth: the sets of size m (sorted tuples, as rows), for each member the index of
    the set without it in level m - 1, and the incidence matrix (sets x candidates)."""
    levels = []
    previous: dict = {(): 0}
    for m in range(min(depth, n)):
        combos = np.array(list(itertools.combinations(range(n), m)), dtype=np.int64).reshape(math.comb(n, m), m)
        parents = np.array([[previous[c[:t] + c[t + 1:]] for t in range(m)] for c in map(tuple, combos)],
                           dtype=np.int64).reshape(len(combos), m)
        incidence = np.zeros((len(combos), n))
        if m:
            incidence[np.repeat(np.arange(len(combos)), m), combos.ravel()] = 1.0
        levels.append((combos, parents, incidence))
        previous = {tuple(c): i for i, c in enumerate(combos)}
    return levels


def _exact_block(w: np.ndarray, depth: int) -> np.ndarray:
    """Marginals of rounds with the same number n of candidates: ``w`` is (rounds, n); returns
    (rounds, n, depth), the probability of each candidate at positions 1..depth (0 beyond n).

    With ``share(S) = P(S) / (W - w(S))``: ``P(S) = sum_{b in S} share(S - b) w_b`` and
    ``pi(a at |S| + 1) = w_a sum_{S not holding a} share(S)`` (summed over those sets, not as a difference
    of sums, which would cancel). Arrays are (sets, rounds): a gather of sets copies whole rows."""
    rounds, n = w.shape
    out = np.zeros((rounds, n, depth))
    wt = np.ascontiguousarray(w.T)  # (n, rounds)
    share = np.zeros((1, rounds))
    for m, (combos, parents, incidence) in enumerate(_sets(n, depth)):
        if m:
            prob = share[parents[:, 0]] * wt[combos[:, 0]]
            for t in range(1, m):
                prob += share[parents[:, t]] * wt[combos[:, t]]
            rest = (1.0 - incidence) @ wt  # W - w(S), summed over the candidates outside S (no cancellation)
        else:
            prob, rest = np.ones((1, rounds)), wt.sum(axis=0)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(rest > 0, prob / rest, 0.0)  # (sets, rounds)
        out[:, :, m] = (wt * ((1.0 - incidence.T) @ share)).T  # the sets without a, summed directly
    return np.clip(out, 0.0, 1.0)


def _sampled_block(s: np.ndarray, temperature: float, depth: int, samples: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Monte Carlo marginals of rounds with the same number n of candidates: ``s`` is (rounds, n)."""
    rounds, n = s.shape
    keep = min(depth, n)
    counts = np.zeros((rounds, n, depth))
    per_chunk = max(1, _CHUNK // max(1, rounds * n))
    done = 0
    row = np.arange(rounds)[:, None, None]
    while done < samples:
        d = min(per_chunk, samples - done)
        keys = s[:, None, :] / temperature + rng.gumbel(size=(rounds, d, n))
        top = np.argsort(-keys, axis=2, kind="stable")[:, :, :keep]  # (rounds, d, keep): candidates by position
        pos = np.broadcast_to(np.arange(keep), top.shape)
        np.add.at(counts, (np.broadcast_to(row, top.shape), top, pos), 1.0)
        done += d
    return counts / samples


def marginals(scores: np.ndarray, offsets: np.ndarray, temperature: float, depth: int, *,
              samples: int | None = None, seed: int | None = 0) -> tuple[np.ndarray, dict]:
    """The probability of each row's candidate at positions 1..``depth`` under a Plackett-Luce policy
    over its round's candidates (rows ``offsets[i]:offsets[i+1]`` are round i's candidates).

    Returns
    -------
    ndarray of shape (rows, depth), and what was done: ``{"exact": rounds computed exactly,
    "sampled": rounds by Monte Carlo, "samples": draws per sampled round}``.

    Examples
    --------
    >>> import numpy as np
    >>> m, how = marginals(np.array([0.0, 0.0, np.log(2.0)]), np.array([0, 3]), 1.0, 2)
    >>> m.round(4).tolist()  # weights 1, 1, 2: the third is first half the time
    [[0.25, 0.3333], [0.25, 0.3333], [0.5, 0.3333]]
    """
    rows = len(scores)
    out = np.zeros((rows, depth))
    sizes = np.diff(offsets)
    w = weights(scores, offsets, temperature)
    how = {"exact": 0, "sampled": 0, "samples": 0}
    rng = np.random.default_rng(seed)
    for n in np.unique(sizes):
        n = int(n)
        if n == 0:
            continue
        rounds = np.flatnonzero(sizes == n)
        take = offsets[rounds][:, None] + np.arange(n)  # (rounds, n) row indices
        if samples is None and exact_sets(n, depth) <= EXACT_SETS:
            block = _exact_block(w[take], depth)
            how["exact"] += len(rounds)
        else:
            draws = samples if samples is not None else 10_000
            block = _sampled_block(scores[take], temperature, depth, draws, rng)
            how["sampled"] += len(rounds)
            how["samples"] = draws
        out[take.ravel()] = block.reshape(-1, depth)
    return out, how


def prefix_probabilities(weight_of_shown: np.ndarray, unshown: np.ndarray) -> np.ndarray:
    """``pi(a_1 .. a_j)`` for every logged prefix: ``weight_of_shown`` is (rounds, positions), the
    weight of the item logged at each position (NaN where none), ``unshown`` each round's sum of the
    weights of its other candidates. Exact (a product of draws; the weight left before position j is
    summed over what is left, never a difference); NaN after a position without an item."""
    w = np.nan_to_num(weight_of_shown)
    left = np.cumsum(w[:, ::-1], axis=1)[:, ::-1] + unshown[:, None]  # the weights of positions >= j and the rest
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(left > 0, weight_of_shown / left, 0.0)
    step = np.where(np.isnan(weight_of_shown), np.nan, step)
    return np.cumprod(step, axis=1)
