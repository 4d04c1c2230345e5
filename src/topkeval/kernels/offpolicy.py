"""Off-policy kernels: where each candidate of a round lands under a ranker, in one pass per round.

For every round (rows ``offsets[q]:offsets[q+1]``) the candidates are ordered by score, descending
(a stable merge sort: equal scores keep their row order). ``above`` is the number of candidates
placed before a candidate's tie group and ``tied`` the group's size under ``ties="expected"`` (the
group is spread over ranks ``above + 1 .. above + tied``); under a strict rule each tie group is put
in ascending order of ``tiebreak`` (the row for ``"first"``, the item code for ``"item_asc"``, its
negation for ``"item_desc"``) and every candidate gets its own rank (``tied`` 1).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .jit import kernel

#: Fewer rows than this per thread are not worth a thread.
THREAD_ROWS = 500_000


@kernel(outputs=("above", "tied"))
def _rank_range(offsets, scores, tiebreak, expected, above, tied, q0, q1):
    for q in range(q0, q1):
        lo = offsets[q]
        n = offsets[q + 1] - lo
        if n == 0:
            continue
        order = np.argsort(-scores[lo:lo + n], kind="mergesort")
        i = 0
        while i < n:
            j = i + 1
            s = scores[lo + order[i]]
            while j < n and scores[lo + order[j]] == s:
                j += 1
            if expected:
                for t in range(i, j):
                    above[lo + order[t]] = i
                    tied[lo + order[t]] = j - i
            else:
                for t in range(i + 1, j):  # the run in ascending tiebreak (runs are short: insertion)
                    key = order[t]
                    u = t - 1
                    while u >= i and tiebreak[lo + order[u]] > tiebreak[lo + key]:
                        order[u + 1] = order[u]
                        u -= 1
                    order[u + 1] = key
                for t in range(i, j):
                    above[lo + order[t]] = t
                    tied[lo + order[t]] = 1
            i = j


def rank_in_rounds(offsets: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray, expected: bool,
                   threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(above, tied)`` per row (see the module docstring), threaded over ranges of rounds.

    >>> above, tied = rank_in_rounds(np.array([0, 3]), np.array([0.5, 0.9, 0.5]), np.arange(3), True)
    >>> above.tolist(), tied.tolist()
    ([1, 0, 1], [2, 1, 2])
    """
    from .threads import default_threads, run_parallel

    n = len(scores)
    above = np.zeros(n, np.int64)
    tied = np.ones(n, np.int64)
    Q = len(offsets) - 1
    parts = max(1, min(threads or default_threads(), n // THREAD_ROWS))
    bounds = np.unique(np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)).clip(0, Q))
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a] or [(0, Q)]
    offsets = np.ascontiguousarray(offsets, np.int64)
    scores = np.ascontiguousarray(scores, np.float64)
    tiebreak = np.ascontiguousarray(tiebreak, np.int64)
    run_parallel(lambda r: _rank_range(offsets, scores, tiebreak, bool(expected), above, tied, r[0], r[1]), ranges)
    return above, tied


# ---------------------------------------------------------------------------------------------
# Plackett-Luce marginals by Monte Carlo (rounds with too many candidates for the exact recursion)

_M1 = 4294967087
_M2 = 4294944443
_NORM = 1.0 / (_M1 + 1.0)


@kernel(outputs=("state",))
def _mrg_next(state):
    """One step of L'Ecuyer's MRG32k3a (``state``: six int64 components, updated in place): a
    uniform in (0, 1). Integer arithmetic that stays within int64, the same interpreted and compiled."""
    p1 = (1403580 * state[1] - 810728 * state[0]) % _M1
    state[0] = state[1]
    state[1] = state[2]
    state[2] = p1
    p2 = (527612 * state[5] - 1370589 * state[3]) % _M2
    state[3] = state[4]
    state[4] = state[5]
    state[5] = p2
    d = p1 - p2
    if d <= 0:
        d += _M1
    return d * _NORM


@kernel(outputs=("marg", "err"))
def _pl_sample_range(offsets, scores, temperature, depth, samples, seed, which, marg, err, r0, r1):
    """Rao-Blackwellised Monte Carlo marginals of the rounds ``which[r0:r1]`` (see
    :func:`sample_plackett_luce`)."""
    state = np.zeros(6, np.int64)
    for r in range(r0, r1):
        q = which[r]
        lo = offsets[q]
        n = offsets[q + 1] - lo
        if n == 0:
            continue
        K = min(depth, n)
        order = np.argsort(-scores[lo:lo + n], kind="mergesort")
        ordered = np.empty(n)
        for a in range(n):
            ordered[a] = scores[lo + order[a]]
        temp = float(temperature)
        # E[f, a] = exp((s_a - s_f) / T) for a >= f (<= 1), cum[f, a] their running sum from f
        E = np.zeros((K, n))
        cum = np.zeros((K, n + 1))
        for f in range(K):
            for a in range(f, n):
                x = 2.0 * ((float(ordered[a]) * 0.5 - float(ordered[f]) * 0.5) / temp)
                E[f, a] = math.exp(x) if x < 0.0 else 1.0
                cum[f, a + 1] = cum[f, a] + E[f, a]
        coef = np.zeros((K, K))  # per (f, j): the sum over draws of 1 / R (R: the weights left, relative to f)
        coef2 = np.zeros((K, K))
        corr = np.zeros((n, K))  # the drawn items after f: not drawable, their E_f / R taken back
        corr2 = np.zeros((n, K))
        # the generator of this round: its components from the seed and the round, warmed up
        state[0] = (seed % 1000003) * 7919 + 12345
        state[1] = q % _M1 + 1
        state[2] = (q // _M1) % _M1 + 987654321
        state[3] = (seed % 1000033) * 104729 + 54321
        state[4] = (q * 69069 + 1) % _M2 + 1
        state[5] = 362436069
        for _ in range(20):
            _mrg_next(state)
        drawn = np.zeros(n, np.bool_)
        prefix = np.zeros(K, np.int64)
        after = np.zeros(K, np.int64)  # the drawn items after f, ascending
        for _ in range(samples):
            f = 0
            for j in range(K):
                while drawn[f]:
                    f += 1
                m = 0
                for t in range(j):
                    b = prefix[t]
                    if b > f:
                        u = m
                        while u > 0 and after[u - 1] > b:
                            after[u] = after[u - 1]
                            u -= 1
                        after[u] = b
                        m += 1
                rest = cum[f, n]
                for t in range(m):
                    rest -= E[f, after[t]]
                inv = 1.0 / rest
                coef[f, j] += inv
                coef2[f, j] += inv * inv
                for t in range(m):
                    b = after[t]
                    x = E[f, b] * inv
                    corr[b, j] -= x
                    corr2[b, j] -= x * x
                # the next item: the first whose running sum of drawable weights reaches u * R
                target = _mrg_next(state) * rest
                acc = 0.0
                start = f
                pick = -1
                for t in range(m + 1):
                    stop = after[t] if t < m else n
                    seg = cum[f, stop] - cum[f, start]
                    if stop > start and acc + seg >= target:
                        a, z = start, stop - 1  # smallest x in [start, stop) with cum[f, x + 1] - cum[f, start] + acc >= target
                        while a < z:
                            mid = (a + z) // 2
                            if cum[f, mid + 1] - cum[f, start] + acc >= target:
                                z = mid
                            else:
                                a = mid + 1
                        pick = a
                        break
                    acc += seg
                    start = stop + 1
                if pick < 0:  # rounding left the target past the last sum: the last drawable item
                    pick = n - 1
                    while drawn[pick]:
                        pick -= 1
                prefix[j] = pick
                drawn[pick] = True
            for t in range(K):
                drawn[prefix[t]] = False
        for j in range(K):
            for a in range(n):
                v = corr[a, j]
                v2 = corr2[a, j]
                for f in range(min(a, K - 1) + 1):
                    v += E[f, a] * coef[f, j]
                    v2 += E[f, a] * E[f, a] * coef2[f, j]
                mean = v / samples
                spread = v2 / samples - mean * mean
                row = lo + order[a]
                marg[row, j] = min(max(mean, 0.0), 1.0)
                err[row, j] = math.sqrt(max(spread, 0.0) / (samples - 1)) if samples > 1 else math.inf


def sample_plackett_luce(offsets: np.ndarray, scores: np.ndarray, temperature: float, depth: int, samples: int,
                         seed: int, which: np.ndarray, marg: np.ndarray, err: np.ndarray,
                         threads: int | None = None) -> None:
    """Monte Carlo marginals of a Plackett-Luce policy in the rounds ``which``, written into ``marg``
    and their standard errors into ``err`` (rows x depth).

    Each of ``samples`` draws per round fills positions 1..depth one after another (the item at j
    drawn among those left with chance ``w_a / sum of the w left``, by inverse transform on the
    running sums of the weights relative to the largest left, as in
    :mod:`topkeval.analysis.plackett_luce`), and adds, for every position j, the chance of each
    item to be drawn there given the items above: ``w_a / sum of the w left`` (Rao-Blackwell: the
    expectation of the indicator given the draw's prefix, unbiased with less variance; position 1 is
    exact). A draw costs O(depth^2 + depth log n), not O(n): 100 candidates cost little more than 10.
    The generator of each round (MRG32k3a) is seeded by ``seed`` and the round, so the numbers do not
    depend on the threads nor on which other rounds are sampled. The standard error of a marginal is
    that of the mean of its draws' terms.

    >>> m = np.zeros((3, 2)); e = np.zeros((3, 2))
    >>> sample_plackett_luce(np.array([0, 3]), np.array([0.0, 0.0, np.log(2.0)]), 1.0, 2, 4000, 0,
    ...                      np.array([0]), m, e)
    >>> m[:, 0].round(6).tolist(), bool(abs(m[2, 1] - 1 / 3) < 4 * e[2, 1])  # position 1 exact: 1/4, 1/4, 1/2
    ([0.25, 0.25, 0.5], True)
    """
    from .jit import compile_all, is_compiled
    from .threads import default_threads, run_parallel

    which = np.ascontiguousarray(which, np.int64)
    sizes = np.diff(offsets)[which]
    work = int(samples) * int(min(depth, int(sizes.max(initial=0))) ** 2 + 1) * len(which)
    if not is_compiled() and os.environ.get("TOPKEVAL_JIT", "") != "0" and work > 200_000:
        compile_all()  # a Monte Carlo of this size interpreted would take minutes
    parts = max(1, min(threads or default_threads(), len(which) // 50))
    bounds = np.linspace(0, len(which), parts + 1).astype(np.int64)
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a]
    offsets = np.ascontiguousarray(offsets, np.int64)
    scores = np.ascontiguousarray(scores, np.float64)
    run_parallel(lambda r: _pl_sample_range(offsets, scores, float(temperature), int(depth), int(samples),
                                            int(seed), which, marg, err, r[0], r[1]), ranges)
