"""The CPU kernel: statistics of every query for every cutoff, in one pass, without sorting.

Algorithm
---------
Only the relevant candidates matter for h(k). For each relevant candidate ``i`` of a query the
kernel counts, over the candidates of that query that survive ``score_threshold``:

* ``g``: candidates scored strictly above it,
* ``e``: candidates scored equal to it (itself included): its tie group,
* ``r``: relevant candidates in that tie group,
* ``b``: members of the tie group that the tie rule puts before it (``first``: earlier rows;
  ``optimistic``: earlier relevant rows; ``pessimistic``: every non-relevant member and earlier
  relevant rows; ``item_desc`` / ``item_asc``: larger / smaller item codes).

Its rank under a deterministic rule is ``g + b + 1``; under ``ties="expected"`` its position is
uniform over ``g+1 .. g+e``, so it lands in the top k with probability
``clamp((k - g) / e, 0, 1)``. Summing over relevant candidates gives h(k) exactly, for every
cutoff at once, and for k = R (R-precision). The probability that the top k holds at least one
relevant candidate depends only on the best relevant tie group ``(g0, e0, r0)``: 1 when it lies
entirely in the top k, otherwise ``1 - C(e0-r0, m) / C(e0, m)`` for the ``m = k - g0`` slots it
takes.

Counting costs O(n * r) for a query of n candidates and r relevant ones, which beats sorting
while r is small (clicks, purchases). A query with many relevant candidates takes the other
path: a stable sort of its scores, then a walk over the tie groups, O(n log n). Both paths fill
the same ``(g, e, r, b)`` and share the accumulation, and the tests force each path.

Queries are independent: the driver splits them into ranges of about equal row counts and runs
the compiled function (which releases the GIL) on each range in a thread.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

TIE_CODES = {"expected": 0, "optimistic": 1, "pessimistic": 2, "first": 3, "item_desc": 4, "item_asc": 5}

#: Queries with at most this many relevant candidates are counted, the rest sorted.
COUNT_MAX_RELEVANT = 24


@njit(cache=True, nogil=True)
def _count_path(scores, rel, items, lo, hi, thr, tie, g, e, r, b, w):
    """Fill (g, e, r, b) for the relevant candidates of rows lo..hi by counting; return their number.

    The first loop is branch-free (it vectorises); the tie rule's ``b`` needs a second loop only
    over the members of a tie group, and only when the group has more than one member.
    """
    m = 0
    for i in range(lo, hi):
        if not rel[i] or scores[i] < thr:
            continue
        si = scores[i]
        gi = 0
        ei = 0
        ri = 0
        for j in range(lo, hi):
            sj = scores[j]
            keep = sj >= thr
            gi += keep and sj > si
            same = sj == si
            ei += same
            ri += same and rel[j]
        bi = 0
        if tie != 0 and ei > 1:
            for j in range(lo, hi):
                if scores[j] != si:
                    continue
                if tie == 3:  # first
                    bi += j < i
                elif tie == 1:  # optimistic
                    bi += rel[j] and j < i
                elif tie == 2:  # pessimistic
                    bi += (not rel[j]) or j < i
                elif tie == 4:  # item_desc
                    bi += items[j] > items[i] or (items[j] == items[i] and j < i)
                else:  # item_asc
                    bi += items[j] < items[i] or (items[j] == items[i] and j < i)
        g[m] = gi
        e[m] = ei
        r[m] = ri
        b[m] = bi
        w[m] = i
        m += 1
    return m


@njit(cache=True, nogil=True)
def _sort_path(scores, rel, items, lo, hi, thr, tie, g, e, r, b, w):
    """Fill (g, e, r, b) by a stable sort of the query's scores and a walk over tie groups."""
    n = 0
    for j in range(lo, hi):
        if scores[j] >= thr:
            n += 1
    rows = np.empty(n, np.int64)
    neg = np.empty(n, np.float64)
    n = 0
    for j in range(lo, hi):
        if scores[j] >= thr:
            rows[n] = j
            neg[n] = -scores[j]
            n += 1
    order = rows[np.argsort(neg, kind="mergesort")]  # score descending, rows in input order
    m = 0
    a = 0
    while a < n:
        z = a + 1
        s = scores[order[a]]
        while z < n and scores[order[z]] == s:
            z += 1
        size = z - a
        nrel = 0
        for p in range(a, z):
            if rel[order[p]]:
                nrel += 1
        if nrel > 0:
            group = order[a:z]
            if size > 1 and tie != 0 and tie != 3:
                key = np.empty(size, np.int64)
                for p in range(size):
                    row = group[p]
                    if tie == 1:
                        key[p] = 0 if rel[row] else 1
                    elif tie == 2:
                        key[p] = 1 if rel[row] else 0
                    elif tie == 4:
                        key[p] = -items[row]
                    else:
                        key[p] = items[row]
                group = group[np.argsort(key, kind="mergesort")]
            for p in range(size):
                if rel[group[p]]:
                    g[m] = a
                    e[m] = size
                    r[m] = nrel
                    b[m] = p
                    w[m] = group[p]
                    m += 1
        a = z
    return m


@njit(cache=True, nogil=True)
def _hit_probability(g0, e0, r0, k):
    """P(at least one of r0 relevant in a tie group of e0 starting after g0 lands in the top k)."""
    if g0 + e0 <= k:
        return 1.0
    if g0 >= k:
        return 0.0
    slots = k - g0
    if e0 - r0 < slots:
        return 1.0
    none = 1.0
    for x in range(slots):
        none *= (e0 - r0 - x) / (e0 - x)
    return 1.0 - none


@njit(cache=True, nogil=True)
def stats_range(offsets, scores, rel, items, R, cutoffs, thr, tie, want_r, q0, q1,
                h, hit, h_at_r, n_out, relret_out, tie_out, force_path):
    """Compute the statistics of queries q0..q1 (see the module docstring)."""
    longest = 0
    for q in range(q0, q1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    g = np.empty(longest, np.int64)
    e = np.empty(longest, np.int64)
    r = np.empty(longest, np.int64)
    b = np.empty(longest, np.int64)
    w = np.empty(longest, np.int64)
    C = cutoffs.shape[0]
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        n = 0
        nrel = 0
        for j in range(lo, hi):
            if scores[j] >= thr:
                n += 1
                if rel[j]:
                    nrel += 1
        n_out[q] = n
        relret_out[q] = nrel
        for c in range(C):
            h[q, c] = 0.0
            hit[q, c] = 0.0
        h_at_r[q] = 0.0
        tie_out[q] = False
        if nrel == 0:
            continue
        if force_path == 1 or (force_path == 0 and nrel <= COUNT_MAX_RELEVANT):
            m = _count_path(scores, rel, items, lo, hi, thr, tie, g, e, r, b, w)
        else:
            m = _sort_path(scores, rel, items, lo, hi, thr, tie, g, e, r, b, w)
        # the best relevant tie group, for hit probabilities
        best = 0
        for t in range(1, m):
            if g[t] < g[best]:
                best = t
        straddle = False
        for c in range(C + 1):
            if c < C:
                k = cutoffs[c]
            else:
                if not want_r:
                    break
                k = R[q]
            total = 0.0
            first_rank = 1 << 62
            for t in range(m):
                if g[t] < k and k < g[t] + e[t] and e[t] > r[t]:
                    straddle = True
                if tie == 0:
                    x = (k - g[t]) / e[t]
                    if x >= 1.0:
                        total += 1.0
                    elif x > 0.0:
                        total += x
                else:
                    rank = g[t] + b[t] + 1
                    if rank <= k:
                        total += 1.0
                    if rank < first_rank:
                        first_rank = rank
            if c < C:
                h[q, c] = total
                if tie == 0:
                    hit[q, c] = _hit_probability(g[best], e[best], r[best], k)
                else:
                    hit[q, c] = 1.0 if first_rank <= k else 0.0
            else:
                h_at_r[q] = total
        tie_out[q] = straddle


@njit(cache=True, nogil=True)
def inclusion(offsets, scores, rel, items, thr, tie, kq):
    """Per row: the probability that a relevant row is in its query's top kq[q] (0 for the rest).

    1 or 0 under a deterministic tie rule; ``clamp((k - g) / e, 0, 1)`` under ``ties="expected"``.
    """
    out = np.zeros(scores.shape[0], np.float64)
    longest = 0
    for q in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    g = np.empty(longest, np.int64)
    e = np.empty(longest, np.int64)
    r = np.empty(longest, np.int64)
    b = np.empty(longest, np.int64)
    w = np.empty(longest, np.int64)
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        m = _sort_path(scores, rel, items, lo, hi, thr, tie, g, e, r, b, w)
        k = kq[q]
        for t in range(m):
            if tie == 0:
                x = (k - g[t]) / e[t]
                out[w[t]] = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)
            else:
                out[w[t]] = 1.0 if g[t] + b[t] + 1 <= k else 0.0
    return out


def _split(offsets: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split queries into ``parts`` ranges of about equal row counts."""
    Q = len(offsets) - 1
    if parts <= 1 or Q < 2:
        return [(0, Q)]
    bounds = np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)[1:-1])
    edges = np.unique(np.concatenate([[0], np.clip(bounds, 0, Q), [Q]]))
    return [(int(a), int(z)) for a, z in zip(edges[:-1], edges[1:]) if z > a]


def default_threads() -> int:
    """Threads used by the kernel: ``TOPKEVAL_THREADS`` or the CPUs this process may use."""
    env = os.environ.get("TOPKEVAL_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def compute(offsets, scores, rel, items, R, cutoffs, *, thr, tie, want_r, threads=None, force_path=0):
    """Run the kernel over all queries; return the raw arrays (h, hit, h_at_r, n, rel_ret, tie)."""
    Q = len(offsets) - 1
    C = len(cutoffs)
    h = np.empty((Q, C), np.float64)
    hit = np.empty((Q, C), np.float64)
    h_at_r = np.empty(Q, np.float64)
    n = np.empty(Q, np.int64)
    rel_ret = np.empty(Q, np.int64)
    tie_at = np.empty(Q, np.bool_)
    if items is None:
        items = np.zeros(0, np.int64)
    thr = -np.inf if thr is None else float(thr)
    args = (offsets, scores, rel, items, R, cutoffs, thr, TIE_CODES[tie], want_r)
    outs = (h, hit, h_at_r, n, rel_ret, tie_at, force_path)
    threads = threads or default_threads()
    ranges = _split(offsets, threads if len(scores) >= 200_000 else 1)
    if len(ranges) == 1:
        stats_range(*args, 0, Q, *outs)
    else:
        with ThreadPoolExecutor(len(ranges)) as pool:
            list(pool.map(lambda qr: stats_range(*args, qr[0], qr[1], *outs), ranges))
    return h, hit, h_at_r, n, rel_ret, tie_at
