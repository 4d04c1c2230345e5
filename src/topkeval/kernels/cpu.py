"""The CPU kernel: statistics of every query for every cutoff, in one pass, without sorting.

Algorithm
---------
Only the relevant candidates matter for h(k), and only candidates with a positive grade for DCG:
the kernel looks at these "active" candidates. For each active candidate ``i`` of a query it
counts, over the candidates of that query that survive ``score_threshold``:

* ``g``: candidates scored strictly above it,
* ``e``: candidates scored equal to it (itself included): its tie group,
* ``r``: relevant candidates in that tie group,
* ``b``: members of the tie group that the tie rule puts before it (``first``: earlier rows;
  ``optimistic``: relevant members first, then higher grades, then earlier rows; ``pessimistic``:
  the reverse order of relevance and grade; ``item_desc`` / ``item_asc``: larger / smaller item
  codes).

Its rank under a deterministic rule is ``g + b + 1``; under ``ties="expected"`` its position is
uniform over ``g+1 .. g+e``, so it lands in the top k with probability
``clamp((k - g) / e, 0, 1)``. Summing over relevant candidates gives h(k) exactly, for every
cutoff at once, and for k = R (R-precision). The probability that the top k holds at least one
relevant candidate depends only on the best relevant tie group ``(g0, e0, r0)``: 1 when it lies
entirely in the top k, otherwise ``1 - C(e0-r0, m) / C(e0, m)`` for the ``m = k - g0`` slots it
takes. The rank-aware statistics have closed forms too: expected DCG from prefix sums of the
discount over a group's positions, expected reciprocal rank from the distribution of the first
relevant position in the best group, expected AP from the expected number of relevant group
mates ranked above each member (McSherry & Najork 2008).

Counting costs O(n * r) for a query of n candidates and r active ones, which beats sorting while
r is small (clicks, purchases); a candidate found to have more candidates above it than the
largest cutoff needed is dropped early. A query with many active candidates (more than
:data:`COUNT_MAX_RELEVANT`, and more than one in :data:`COUNT_LIST_SHARE`) takes the other path:
a selection of the top of the list (the whole tie group at the boundary kept), a stable sort of
that top, then a walk over the tie groups. Both paths fill the same ``(g, e, r, b)``, put in rank
order (so that every sum adds in the same order whatever the order of the rows: a query's values
do not depend on it, to the last bit), and share the accumulation; the tests force each path.

Queries are independent: the driver splits them into ranges of about equal row counts and runs
the compiled function (which releases the GIL) on each range in a thread.

The accumulation (:func:`_accumulate`: every cutoff, R-precision, the tie-exact expectations, DCG,
RR, AP from the ``(g, e, r, b)`` of a query's active candidates) is shared by three drivers:
:func:`stats_range` (a grouped log), :func:`matrix_rows` (rows of a score matrix, counted in place)
and :func:`stats_from_counts` (counts made on a GPU by :mod:`topkeval.kernels.torch_counts`).

Speed notes: every loop over a query's rows runs over slices (``scores[lo:hi]``), whose indices
start at 0, so the compiler emits contiguous vector loads (indexing ``scores[j]`` for j from lo
made it emit gathers, 4x slower); the accumulation over cutoffs is branch-free (min / max instead
of data-dependent branches, which mispredict on every other candidate); relevant rows are collected
by a branch-free compaction. On 10M rows this kernel runs in about 0.04 s per model on one core.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .jit import kernel
from .sort import kth_smallest, stable_argsort
from .stats import NO_CUTOFF
from .threads import default_threads, run_parallel

#: Tie rules as the compiled code sees them (numba reads module constants at compile time).
TIE_EXPECTED, TIE_OPTIMISTIC, TIE_PESSIMISTIC, TIE_FIRST, TIE_ITEM_DESC, TIE_ITEM_ASC = range(6)
TIE_CODES = {"expected": TIE_EXPECTED, "optimistic": TIE_OPTIMISTIC, "pessimistic": TIE_PESSIMISTIC,
             "first": TIE_FIRST, "item_desc": TIE_ITEM_DESC, "item_asc": TIE_ITEM_ASC}

#: Kernel paths: choose by the number of active candidates, or force one (tests).
PATH_AUTO, PATH_COUNT, PATH_SORT = range(3)

#: Queries with at most this many relevant candidates are counted, the rest sorted...
COUNT_MAX_RELEVANT = 24

#: ... unless at most one candidate in this many is active: counting costs about n x active
#: compares (vectorised), sorting n log n; on 1,000-candidate lists without ties counting was
#: 2 to 7 times cheaper up to 128 active candidates (the TREC run of benchmarks/trec_bench.py has
#: about 30 per query: its kernel time halved), and ties at most double the counting.
COUNT_LIST_SHARE = 8

#: Rows compared between two checks of the early stop of the counting path.
COUNT_BLOCK = 128


@kernel(outputs=('g', 'e', 'r', 'b', 'w'))
def _count_path(sc, rl, gr, it, act, nact, lo, tie, g, e, r, b, w, limit):
    """Fill (g, e, r, b) for the active candidates of one query by counting; return their number.

    ``sc, rl, gr, it`` are the query's own rows (slices: indices start at 0, so the compiled loops
    read contiguous memory with vector loads instead of gathers); ``act[:nact]`` are the active
    rows that survive ``score_threshold``; ``w`` receives global rows ``lo + i``. The counting
    loop is branch-free; on lists longer than ``COUNT_BLOCK`` rows it runs in blocks, and after a
    block a candidate with ``limit`` or more candidates above it is dropped (it is beyond every
    cutoff needed, so it contributes nothing). ``r`` and the tie rule's ``b`` need a second loop,
    only when the candidate's tie group has more than one member.
    """
    n = sc.shape[0]
    m = 0
    for a in range(nact):
        i = act[a]
        si = sc[i]
        gi = 0
        ei = 0
        if n <= COUNT_BLOCK:  # short lists: one loop, no early stop
            for jj in range(n):  # si >= thr, so sj > si or sj == si implies sj is kept too
                sj = sc[jj]
                gi += sj > si
                ei += sj == si
        else:
            j = 0
            while j < n:
                block = sc[j:min(j + COUNT_BLOCK, n)]
                for jj in range(block.shape[0]):
                    sj = block[jj]
                    gi += sj > si
                    ei += sj == si
                j += COUNT_BLOCK
                if gi >= limit:
                    break
        if gi >= limit:
            continue
        ri = 1 if rl[i] else 0
        bi = 0
        if ei > 1:
            ri = 0
            for jj in range(n):
                ri += (sc[jj] == si) & rl[jj]
            if tie != TIE_EXPECTED:
                for j in range(n):
                    if sc[j] != si:
                        continue
                    if tie == TIE_FIRST:
                        bi += j < i
                    elif tie == TIE_OPTIMISTIC:  # relevant first, then higher grades, then input order
                        if rl[j] != rl[i]:
                            bi += rl[j]
                        elif gr[j] != gr[i]:
                            bi += gr[j] > gr[i]
                        else:
                            bi += j < i
                    elif tie == TIE_PESSIMISTIC:  # non-relevant first, then lower grades, then input order
                        if rl[j] != rl[i]:
                            bi += rl[i]
                        elif gr[j] != gr[i]:
                            bi += gr[j] < gr[i]
                        else:
                            bi += j < i
                    elif tie == TIE_ITEM_DESC:
                        bi += it[j] > it[i] or (it[j] == it[i] and j < i)
                    else:  # item_asc
                        bi += it[j] < it[i] or (it[j] == it[i] and j < i)
        g[m] = gi
        e[m] = ei
        r[m] = ri
        b[m] = bi
        w[m] = lo + i
        m += 1
    return m


@kernel(outputs=('g', 'e', 'r', 'b', 'w'))
def _sort_path(sc, rl, ac, gr, it, lo, thr, tie, g, e, r, b, w, limit):
    """Fill (g, e, r, b) by a stable sort of the query's scores and a walk over tie groups.

    Only ranks up to ``limit`` matter: when the list is longer, a selection (:func:`kth_smallest`)
    finds the limit-th largest score and only the candidates scoring at least that much (the
    whole tie group at the boundary included) are sorted. Their ``g`` and ``e`` stay exact.
    Arguments as in :func:`_count_path`.
    """
    n = 0
    for j in range(sc.shape[0]):
        if sc[j] >= thr:
            n += 1
    rows = np.empty(n, np.int64)
    neg = np.empty(n, np.float64)
    n = 0
    for j in range(sc.shape[0]):
        if sc[j] >= thr:
            rows[n] = j
            neg[n] = -sc[j]
            n += 1
    if limit < n:
        cut = kth_smallest(neg, limit - 1)
        kept = 0
        for p in range(n):
            if neg[p] <= cut:
                rows[kept] = rows[p]
                neg[kept] = neg[p]
                kept += 1
        n = kept
        rows = rows[:n]
        neg = neg[:n]
    order = rows[stable_argsort(neg)]  # score descending, rows in input order
    m = 0
    a = 0
    while a < n:
        z = a + 1
        s = sc[order[a]]
        while z < n and sc[order[z]] == s:
            z += 1
        size = z - a
        nrel = 0
        nact = 0
        for p in range(a, z):
            if rl[order[p]]:
                nrel += 1
            if ac[order[p]]:
                nact += 1
        if nact > 0:
            group = order[a:z]
            if size > 1 and (tie == TIE_OPTIMISTIC or tie == TIE_PESSIMISTIC):
                sign = -1.0 if tie == TIE_OPTIMISTIC else 1.0
                fkey = np.empty(size, np.float64)
                for p in range(size):
                    fkey[p] = sign * gr[group[p]]
                group = group[stable_argsort(fkey)]
                for p in range(size):
                    fkey[p] = (0.0 if rl[group[p]] else 1.0) if tie == TIE_OPTIMISTIC else (1.0 if rl[group[p]] else 0.0)
                group = group[stable_argsort(fkey)]
            elif size > 1 and (tie == TIE_ITEM_DESC or tie == TIE_ITEM_ASC):
                fkey = np.empty(size, np.float64)  # item codes < 2**53: exact as floats
                for p in range(size):
                    fkey[p] = -it[group[p]] if tie == TIE_ITEM_DESC else it[group[p]]
                group = group[stable_argsort(fkey)]
            for p in range(size):
                if ac[group[p]]:
                    g[m] = a
                    e[m] = size
                    r[m] = nrel
                    b[m] = p
                    w[m] = lo + group[p]
                    m += 1
        a = z
    return m


@kernel
def _scratch(offsets, q0, q1):
    """Per-candidate work arrays (g, e, r, b, w) as long as the longest query of q0..q1."""
    longest = 0
    for q in range(q0, q1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    return _work(longest)


@kernel
def _work(n):
    """Per-candidate work arrays (g, e, r, b, w) of ``n`` elements."""
    return (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
            np.empty(n, np.int64))


@kernel
def _accumulate_work(n):
    """The scratch arrays of :func:`_accumulate` (``f``, ``key``, ``ridx``) for ``n`` candidates."""
    return np.empty(n, np.float64), np.empty(n, np.float64), np.empty(n, np.int64)


@kernel(outputs=('g', 'e', 'r', 'b', 'w'))
def _rank_order(g, e, r, b, w, m, tie, gains):
    """Put the ``m`` active candidates in rank order, so that every sum over them adds its terms in
    one order whatever the order of the input rows: a query's values do not depend on how its rows
    were shuffled, to the last bit.

    Rank order: by rank ``g + b`` (the tie group's start ``g`` under ``ties="expected"``, where the
    members of a group share their position), then by gains. The counting path lists candidates in
    input order, the sorting path a tie group's members in input order under "expected"; an
    insertion sort costs little on short or nearly sorted lists, stable sorts take the long ones.
    """
    if m <= 64:
        for i in range(1, m):
            j = i
            while j > 0:
                s, t = j - 1, j  # swap while s comes after t
                ps = g[s] if tie == TIE_EXPECTED else g[s] + b[s]
                pt = g[t] if tie == TIE_EXPECTED else g[t] + b[t]
                after = ps > pt
                if ps == pt:
                    for gv in range(gains.shape[0]):
                        if gains[gv, w[s]] != gains[gv, w[t]]:
                            after = gains[gv, w[s]] > gains[gv, w[t]]
                            break
                if not after:
                    break
                g[j - 1], g[j] = g[j], g[j - 1]
                e[j - 1], e[j] = e[j], e[j - 1]
                r[j - 1], r[j] = r[j], r[j - 1]
                b[j - 1], b[j] = b[j], b[j - 1]
                w[j - 1], w[j] = w[j], w[j - 1]
                j -= 1
        return
    # element by element, without fancy indexing or slice assignment (perm[order], g[:m] = ...):
    # those compile numba's indexing and broadcasting code, seconds of compilation after installation
    perm = np.arange(m)
    tmp = np.empty(m, np.int64)
    fkey = np.empty(m, np.float64)
    if tie == TIE_EXPECTED:  # lexicographic by (g, gains...): stable sorts, last key first
        for gv in range(gains.shape[0] - 1, -1, -1):
            for p in range(m):
                fkey[p] = gains[gv, w[perm[p]]]
            _permute(perm, stable_argsort(fkey), tmp, m)
        for p in range(m):
            fkey[p] = g[perm[p]]  # ranks < 2**53: exact as floats
    else:
        for p in range(m):
            fkey[p] = g[perm[p]] + b[perm[p]]
    _permute(perm, stable_argsort(fkey), tmp, m)
    for arr in (g, e, r, b, w):
        _permute(arr, perm, tmp, m)


@kernel(outputs=('values', 'tmp'))
def _permute(values, order, tmp, m):
    """``values[:m] = values[:m][order]``, in loops (``tmp``: scratch of at least ``m``)."""
    for p in range(m):
        tmp[p] = values[order[p]]
    for p in range(m):
        values[p] = tmp[p]


@kernel
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


@kernel
def _first_relevant_rr(g0, e0, r0, k):
    """E[1/rank of the first relevant, 0 beyond k] for r0 relevant in a tie group of e0 after g0.

    The first relevant member sits at offset x with probability C(e0-x, r0-1) / C(e0, r0).
    """
    total = 0.0
    p = r0 / e0  # x = 1
    for x in range(1, e0 - r0 + 2):
        if g0 + x > k:
            break
        total += p / (g0 + x)
        p *= (e0 - x - r0 + 1) / (e0 - x) if e0 - x > 0 else 0.0
    return total


@kernel
def _expected_ap_group(gg, ee, rr, c, k):
    """Sum over the rr relevant members of a tie group of E[precision at their rank, 0 beyond k].

    A member at offset p (uniform over 1..ee) has c relevant ranked above its group and, in
    expectation, (rr - 1)(p - 1)/(ee - 1) relevant group mates above it.
    """
    total = 0.0
    top = min(ee, k - gg)
    for p in range(1, top + 1):
        mates = (rr - 1) * (p - 1) / (ee - 1) if ee > 1 else 0.0
        total += (c + 1 + mates) / (gg + p)
    return rr * total / ee


class Columns(NamedTuple):
    """The kernel's per-row and per-query inputs (one model of a grouped log).

    ``offsets`` (Q + 1, int64): rows of query q are ``offsets[q]:offsets[q + 1]``; ``scores``
    (float64); ``rel`` (bool): relevant; ``active`` (bool): the candidates the kernel looks at (the
    relevant ones and those with a positive gain); ``grade`` (float64, empty unless the tie rule is
    optimistic / pessimistic, which orders ties by grade); ``items`` (int64 codes, empty unless the
    tie rule orders by item); ``R`` (Q, int64): relevant items per query; ``gains`` (G x rows,
    float64): one row of gains per discounted-gain statistic (G = 0 when none is asked for); ``rw``
    (float64, empty for none): the weight of each relevant row (inverse propensities).
    """

    offsets: np.ndarray
    scores: np.ndarray
    rel: np.ndarray
    active: np.ndarray
    grade: np.ndarray
    items: np.ndarray
    R: np.ndarray
    gains: np.ndarray
    rw: np.ndarray = np.zeros(0)


class Params(NamedTuple):
    """What to compute: ``cutoffs`` (C, int64, ascending; :data:`NO_CUTOFF` for the uncut rank
    metrics), ``thr`` (score threshold, -inf for none), ``tie`` (a ``TIE_*`` code), ``want_r``
    (h(R)), ``want_rank`` (rr and the AP sums), ``disc`` (G x (L + 1)): the discount of rank p of
    each gain statistic at ``[g, p]`` (``disc[g, 0] = 0``), ``cum`` its prefix sums over ranks, and
    ``path`` (a ``PATH_*`` code)."""

    cutoffs: np.ndarray
    thr: float
    tie: int
    want_r: bool
    want_rank: bool
    disc: np.ndarray
    cum: np.ndarray
    path: int


class Outputs(NamedTuple):
    """The kernel's per-query outputs, filled in place (see :class:`~topkeval.kernels.stats.QueryStats`):
    ``h``, ``hit``, ``rr``, ``ap`` (Q x C), ``h_at_r`` (Q), ``n``, ``rel_ret`` (Q, int64), ``tie``
    (Q, bool), ``dcg`` (G x Q x C)."""

    h: np.ndarray
    hit: np.ndarray
    h_at_r: np.ndarray
    n: np.ndarray
    rel_ret: np.ndarray
    tie: np.ndarray
    rr: np.ndarray
    ap: np.ndarray
    dcg: np.ndarray


@kernel(outputs=('g', 'e', 'r', 'b', 'w', 'out', 'f', 'key', 'ridx'))
def _accumulate(q, m, g, e, r, b, w, rel, rw, gains_all, Rq, prm, out, f, key, ridx, full):
    """Query q's statistics into ``out`` from the ``(g, e, r, b)`` of its ``m`` active candidates.

    ``w[t]`` indexes ``rel`` (relevant), ``rw`` and ``gains_all`` (G x rows) of candidate t; ``rw``
    (empty for none) weighs each relevant candidate in h and h(R) (inverse propensity weights:
    :mod:`topkeval.engine.unbiased`; no estimate from clicks reads the others), ``rr``, ``hit`` and
    the AP sum are left unweighted; ``Rq`` is the
    query's relevant count; ``f``, ``key`` and ``ridx`` are scratch arrays of at least ``m``
    elements. Every output of the query is written (zeros when ``m`` is 0). ``full`` is None when
    the plan asks for no discounted gain and no rank metric (RR, AP): then the compiled code has no
    such part at all (numba drops the branch on a None argument), which halves its compilation.
    Shared by
    :func:`stats_range` (counts from a query's rows), :func:`matrix_rows` (counts from a score
    matrix's rows, in place) and :func:`stats_from_counts` (counts made elsewhere: on a GPU).
    """
    cutoffs, tie, want_r, want_rank = prm.cutoffs, prm.tie, prm.want_r, prm.want_rank
    C = cutoffs.shape[0]
    G = gains_all.shape[0]
    for c in range(C):
        out.h[q, c] = 0.0
        out.hit[q, c] = 0.0
        if want_rank:
            out.rr[q, c] = 0.0
            out.ap[q, c] = 0.0
        for gv in range(G):
            out.dcg[gv, q, c] = 0.0
    out.h_at_r[q] = 0.0
    out.tie[q] = False
    if m == 0:
        return
    weighted = rw.shape[0] > 0
    # no active candidate tied with another candidate (e = 1: scores without ties): under "expected" every
    # probability of a top-k place is 0 or 1, so each term of h(k) is whole, its place need not be divided out,
    # and unweighted sums of whole numbers are exact in any order (no rank order needed)
    untied = tie == TIE_EXPECTED
    for t in range(m):
        untied &= e[t] == 1
    if m > 1 and (tie == TIE_EXPECTED and (weighted or not untied) or G > 0):
        _rank_order(g, e, r, b, w, m, tie, gains_all)  # else every sum adds whole numbers: exact in any order
    # the best relevant tie group (hit probabilities, reciprocal rank) and the best rank
    best = -1
    first_rank = 1 << 62
    for t in range(m):
        isrel = rel[w[t]]
        f[t] = (rw[w[t]] if weighted else 1.0) if isrel else 0.0
        if isrel:
            if best < 0 or g[t] < g[best]:
                best = t
            first_rank = min(first_rank, g[t] + b[t] + 1)
    # h(k) for every cutoff and for k = R; branch-free, as the outcomes are unpredictable
    straddle = False
    for c in range(C + 1):
        if c < C:
            k = cutoffs[c]
        else:
            if not want_r:
                break
            k = Rq
        total = 0.0
        if untied:  # min(max((k - g) / 1, 0), 1) is (g < k), and no tie group straddles k
            for t in range(m):
                total += f[t] * (g[t] < k)
        else:
            for t in range(m):
                if tie == TIE_EXPECTED:
                    total += f[t] * min(max((k - g[t]) / e[t], 0.0), 1.0)
                else:
                    total += f[t] * (g[t] + b[t] + 1 <= k)
                straddle |= (f[t] > 0.0) & (g[t] < k) & (k < g[t] + e[t]) & (e[t] > r[t])
        if c < C:
            out.h[q, c] = total
            if best >= 0:
                if tie == TIE_EXPECTED:
                    out.hit[q, c] = _hit_probability(g[best], e[best], r[best], k)
                else:
                    out.hit[q, c] = 1.0 if first_rank <= k else 0.0
        else:
            out.h_at_r[q] = total
    out.tie[q] = straddle
    if full is None:  # no DCG, RR or AP asked for (their outputs are empty)
        return
    # discounted gains over active candidates: a deterministic rank's discount, or the mean
    # discount of the positions of the candidate's tie group that lie in the top k
    for gv in range(G):
        gains = gains_all[gv]
        disc = prm.disc[gv]
        cum = prm.cum[gv]
        for c in range(C):
            k = cutoffs[c]
            total = 0.0
            for t in range(m):
                if tie == TIE_EXPECTED:
                    top = min(g[t] + e[t], k)
                    bottom = min(g[t], k)
                    share = (cum[top] - cum[bottom]) / e[t] if top > bottom else 0.0
                else:
                    rank = g[t] + b[t] + 1
                    share = disc[rank] if rank <= k else 0.0
                total += gains[w[t]] * share
            out.dcg[gv, q, c] = total
    if not want_rank or best < 0:
        return
    # RR and AP over relevant members in rank order (deterministic) or tie-group order (expected)
    nr = 0
    for t in range(m):
        if rel[w[t]]:
            key[nr] = (g[t] + b[t]) if tie != TIE_EXPECTED else g[t]
            ridx[nr] = t
            nr += 1
    order = stable_argsort(key[:nr])
    for c in range(C):
        k = cutoffs[c]
        if tie == TIE_EXPECTED:
            out.rr[q, c] = _first_relevant_rr(g[best], e[best], r[best], k)
            apsum = 0.0
            above = 0
            i = 0
            while i < nr:
                t = ridx[order[i]]
                apsum += _expected_ap_group(g[t], e[t], r[t], above, k)
                above += r[t]
                i += r[t]  # the group's relevant members are consecutive in this order
            out.ap[q, c] = apsum
        else:
            first = key[order[0]] + 1
            out.rr[q, c] = 1.0 / first if first <= k else 0.0
            apsum = 0.0
            for i in range(nr):
                rank = key[order[i]] + 1
                if rank > k:
                    break
                apsum += (i + 1) / rank
            out.ap[q, c] = apsum


@kernel(outputs=('act',))
def _query_rows(sc, rl, ac, thr, act):
    """The candidates of one query that survive ``thr`` (n), the relevant ones among them (nrel),
    and the active ones among them (nact, their rows written to ``act[:nact]``). Two kernels: with the
    threshold's test in the same function, the compiled loops were not vectorised (twice the time)."""
    if thr == -np.inf:  # every candidate kept: the scores need not be read here
        return _rows_all(rl, ac, act)
    return _rows_above(sc, rl, ac, thr, act)


@kernel(outputs=('act',))
def _rows_all(rl, ac, act):
    """:func:`_query_rows` without a score threshold."""
    n = rl.shape[0]
    nrel = 0
    nact = 0
    for j in range(n):  # a loop of its own: vectorised (with the compaction below, it was not)
        nrel += rl[j]
    for j in range(n):  # branch-free: the row is written, kept only if active
        act[nact] = j
        nact += ac[j]
    return n, nrel, nact


@kernel(outputs=('act',))
def _rows_above(sc, rl, ac, thr, act):
    """:func:`_query_rows` with a score threshold."""
    n = 0
    nrel = 0
    nact = 0
    for j in range(sc.shape[0]):
        kept = sc[j] >= thr
        n += kept
        nrel += kept & rl[j]
        act[nact] = j
        nact += kept & ac[j]
    return n, nrel, nact


@kernel
def _rank_limit(prm, n, Rq):
    """Ranks beyond this matter to no requested metric (at least 1)."""
    C = prm.cutoffs.shape[0]
    limit = prm.cutoffs[C - 1] if prm.cutoffs[C - 1] < NO_CUTOFF else n
    if prm.want_r and Rq > limit:
        limit = Rq
    return max(limit, 1)


@kernel(outputs=('out', 'deferred'))
def stats_range(cols, prm, q0, q1, out, deferred, full):
    """Compute the statistics of queries q0..q1 (see the module docstring) into ``out``, by the
    counting path; the queries for the sorting path (many active candidates, or ``PATH_SORT``) are
    written to ``deferred`` for :func:`stats_sorted`, and their number returned. Apart, the sorting
    path compiles only when a log has such queries. ``full``: see :func:`_accumulate`."""
    offsets, rel, active, R = cols.offsets, cols.rel, cols.active, cols.R
    g, e, r, b, w = _scratch(offsets, q0, q1)
    f, key, ridx = _accumulate_work(g.shape[0])
    act = np.empty(g.shape[0], np.int64)
    # the usual case: its queries without ties take _accumulate_untied (where no candidate is tied, every tie rule
    # gives each one the place g + 1)
    plain = not prm.want_rank and cols.gains.shape[0] == 0 and cols.rw.shape[0] == 0
    nd = 0
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        sc = cols.scores[lo:hi]
        rl = rel[lo:hi]
        n, nrel, nact = _query_rows(sc, rl, active[lo:hi], prm.thr, act)
        out.n[q] = n
        out.rel_ret[q] = nrel
        m = nact
        if nact > 0:
            if prm.path == PATH_SORT or (prm.path == PATH_AUTO and nact > COUNT_MAX_RELEVANT
                                         and nact * COUNT_LIST_SHARE > hi - lo):
                deferred[nd] = q
                nd += 1
                continue
            gr = cols.grade[lo:hi] if cols.grade.shape[0] else cols.grade
            it = cols.items[lo:hi] if cols.items.shape[0] else cols.items
            m = _count_path(sc, rl, gr, it, act, nact, lo, prm.tie, g, e, r, b, w, _rank_limit(prm, hi - lo, R[q]))
        if plain and _untied(e, m):
            _accumulate_untied(q, m, g, w, rel, R[q], prm.cutoffs, prm.want_r, out.h, out.hit, out.h_at_r, out.tie)
        else:
            _accumulate(q, m, g, e, r, b, w, rel, cols.rw, cols.gains, R[q], prm, out, f, key, ridx, full)
    return nd


@kernel
def _untied(e, m):
    """Whether none of the ``m`` active candidates is tied with another candidate."""
    for t in range(m):
        if e[t] != 1:
            return False
    return True


@kernel(outputs=('h', 'hit', 'h_at_r', 'tie'))
def _accumulate_untied(q, m, g, w, rel, Rq, cutoffs, want_r, h, hit, h_at_r, tie):
    """:func:`_accumulate` where it is simplest, the usual case of scores without ties: no weights, no
    gains, no rank metric, and no active candidate tied with another (``e = 1``). Each candidate then
    has one place, ``g + 1``, under every tie rule: h(k) counts the relevant ones with ``g < k`` (whole
    numbers, so the sum is exact in any order: the same bits as :func:`_accumulate`), the hit rate is
    whether the best one has ``g < k``, and no tie straddles a cutoff. With few arguments, the call
    costs a fraction of :func:`_accumulate`'s (whose arguments cost as much as its work here)."""
    C = cutoffs.shape[0]
    best = 1 << 62
    for t in range(m):
        if rel[w[t]]:
            best = min(best, g[t])
    for c in range(C + 1):
        if c < C:
            k = cutoffs[c]
        else:
            if not want_r:
                h_at_r[q] = 0.0
                break
            k = Rq
        total = 0.0
        for t in range(m):
            total += rel[w[t]] * (g[t] < k)
        if c < C:
            h[q, c] = total
            hit[q, c] = 1.0 if best < k else 0.0
        else:
            h_at_r[q] = total
    tie[q] = False


@kernel(outputs=('out',))
def stats_sorted(cols, prm, queries, out, full):
    """:func:`stats_range` for the queries it deferred (each with an active candidate), by the
    sorting path."""
    offsets, rel, R = cols.offsets, cols.rel, cols.R
    longest = 0
    for i in range(queries.shape[0]):
        longest = max(longest, offsets[queries[i] + 1] - offsets[queries[i]])
    g, e, r, b, w = _work(longest)
    f, key, ridx = _accumulate_work(longest)
    for i in range(queries.shape[0]):
        q = queries[i]
        lo = offsets[q]
        hi = offsets[q + 1]
        gr = cols.grade[lo:hi] if cols.grade.shape[0] else cols.grade
        it = cols.items[lo:hi] if cols.items.shape[0] else cols.items
        m = _sort_path(cols.scores[lo:hi], rel[lo:hi], cols.active[lo:hi], gr, it, lo, prm.thr, prm.tie, g, e, r, b, w,
                       _rank_limit(prm, hi - lo, R[q]))
        _accumulate(q, m, g, e, r, b, w, rel, cols.rw, cols.gains, R[q], prm, out, f, key, ridx, full)


@kernel(outputs=('out',))
def stats_from_counts(aoff, ga, ea, ra, ba, rel, gains, R, prm, q0, q1, out):
    """Statistics of queries q0..q1 from per-candidate counts made elsewhere (a GPU's torch ops):
    query q's active candidates are ``aoff[q]:aoff[q + 1]`` of ``ga, ea, ra, ba`` (their g, e, r,
    b as in the module docstring), and of ``rel`` and ``gains`` (G x candidates). ``out.n`` and
    ``out.rel_ret`` are left to the caller."""
    g, e, r, b, w = _scratch(aoff, q0, q1)
    f, key, ridx = _accumulate_work(g.shape[0])
    unweighted = np.zeros(0, np.float64)
    for q in range(q0, q1):
        lo = aoff[q]
        m = aoff[q + 1] - lo
        for t in range(m):
            g[t] = ga[lo + t]
            e[t] = ea[lo + t]
            r[t] = ra[lo + t]
            b[t] = ba[lo + t]
            w[t] = lo + t
        _accumulate(q, m, g, e, r, b, w, rel, unweighted, gains, R[q], prm, out, f, key, ridx, True)


#: Rows of a score matrix with at most this many active cells are counted (vectorised, one pass
#: over the row per active cell), the others sorted: rows are long, so counting pays for longer.
ROW_COUNT_MAX_RELEVANT = 512

#: The score of matrix cells that are not candidates (excluded, below ``score_threshold``).
_NOT_CANDIDATE = -np.inf


@kernel(outputs=('out', 'n_kept', 'finite'))
def matrix_rows(S, eptr, eidx, rptr, rcol, rgrade, rrel, ractive, rgain, R, thr, prm, r0, r1, out, n_kept, finite):
    """Statistics of rows r0..r1 of a score matrix in place, without selecting or copying cells
    out: each row is read into a scratch copy (excluded cells and cells below ``thr`` at -inf), its
    judged cells (``rptr``, ``rcol``: CSR) are set in dense scratch rows of relevance, grade and
    gains, and the counting or sorting path and the accumulation run on it as on a query's rows
    (the column is the row order and the item code). For metrics that look at the whole list.
    ``rgain`` is G x judged cells; ``ractive`` marks the relevant or positively gained ones;
    ``finite[u]``: whether every score of row u is finite (checked in the same pass)."""
    n = S.shape[1]
    G = rgain.shape[0]
    C = prm.cutoffs.shape[0]
    tie = prm.tie
    sc = np.empty(n, np.float64)
    rl = np.zeros(n, np.bool_)
    ac = np.zeros(n, np.bool_)
    gr = np.zeros(n, np.float64) if tie == TIE_OPTIMISTIC or tie == TIE_PESSIMISTIC else np.zeros(0, np.float64)
    it = np.arange(n) if tie == TIE_ITEM_DESC or tie == TIE_ITEM_ASC else np.zeros(0, np.int64)
    gains = np.zeros((G, n), np.float64)
    g, e, r, b, w = _work(n)
    f, key, ridx = _accumulate_work(n)
    act = np.empty(n, np.int64)
    unweighted = np.zeros(0, np.float64)
    for u in range(r0, r1):
        row = S[u]
        kept = 0
        ok = True
        for x in range(n):  # branch-free
            v = float(row[x])  # a float32 score compared with thr in float64, interpreted as compiled
            keep = (v >= thr) & (v > _NOT_CANDIDATE)
            sc[x] = v if keep else _NOT_CANDIDATE
            kept += keep
            ok &= abs(v) < np.inf  # false for NaN and infinities (no inf - inf: numpy warns)
        finite[u] = ok
        for p in range(eptr[u], eptr[u + 1]):
            x = eidx[p]
            kept -= sc[x] > _NOT_CANDIDATE
            sc[x] = _NOT_CANDIDATE
        n_kept[u] = kept
        nact = 0
        for p in range(rptr[u], rptr[u + 1]):
            x = rcol[p]
            if sc[x] == _NOT_CANDIDATE:  # below thr: not a candidate, still in R
                continue
            rl[x] = rrel[p]
            ac[x] = ractive[p]
            if gr.shape[0]:
                gr[x] = rgrade[p]
            for gv in range(G):
                gains[gv, x] = rgain[gv, p]
            if ractive[p]:
                act[nact] = x
                nact += 1
        limit = prm.cutoffs[C - 1] if prm.cutoffs[C - 1] < NO_CUTOFF else n
        if prm.want_r and R[u] > limit:
            limit = R[u]
        limit = max(limit, 1)
        m = 0
        if nact > 0:
            if nact <= ROW_COUNT_MAX_RELEVANT:
                m = _count_path(sc, rl, gr, it, act, nact, 0, tie, g, e, r, b, w, limit)
            else:
                m = _sort_path(sc, rl, ac, gr, it, 0, -1.7976931348623157e308, tie, g, e, r, b, w, limit)
        _accumulate(u, m, g, e, r, b, w, rl, unweighted, gains, R[u], prm, out, f, key, ridx, True)
        for p in range(rptr[u], rptr[u + 1]):  # clear the scratch rows for the next row
            x = rcol[p]
            rl[x] = False
            ac[x] = False
            if gr.shape[0]:
                gr[x] = 0.0
            for gv in range(G):
                gains[gv, x] = 0.0


@kernel
def inclusion(offsets, scores, rel, grade, items, thr, tie, kq):
    """Per row: the probability that a relevant row is in its query's top kq[q] (0 for the rest).

    1 or 0 under a deterministic tie rule; ``clamp((k - g) / e, 0, 1)`` under ``ties="expected"``.
    """
    out = np.zeros(scores.shape[0], np.float64)
    g, e, r, b, w = _scratch(offsets, 0, offsets.shape[0] - 1)
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        rl = rel[lo:hi]
        gr = grade[lo:hi] if grade.shape[0] else grade
        it = items[lo:hi] if items.shape[0] else items
        m = _sort_path(scores[lo:hi], rl, rl, gr, it, lo, thr, tie, g, e, r, b, w, max(kq[q], 1))
        k = kq[q]
        for t in range(m):
            if tie == TIE_EXPECTED:
                x = (k - g[t]) / e[t]
                out[w[t]] = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)
            else:
                out[w[t]] = 1.0 if g[t] + b[t] + 1 <= k else 0.0
    return out


@kernel
def exposure(offsets, scores, rel, grade, items, thr, tie, kq):
    """Per row, relevant or not: the probability ``p`` that it is in its query's top kq[q], its tie
    group's start ``g`` (candidates scored above it) and size ``e`` (0 for rows not ranked).

    ``p`` is 1 or 0 under a deterministic tie rule, ``clamp((k - g) / e, 0, 1)`` under
    ``ties="expected"``: the share of the ``s = clamp(k - g, 0, e)`` slots of the top k that the
    group fills, each order of its members equally likely. Two members of one group are both in
    the top k with probability ``s (s - 1) / (e (e - 1))``; members of different groups
    independently (each group's slots are fixed by the scores alone). Rows below ``thr`` or beyond
    the top k (their whole tie group below it) get ``p = 0``.
    """
    n_rows = scores.shape[0]
    p = np.zeros(n_rows, np.float64)
    gs = np.zeros(n_rows, np.int64)
    es = np.zeros(n_rows, np.int64)
    g, e, r, b, w = _scratch(offsets, 0, offsets.shape[0] - 1)
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        every = np.ones(hi - lo, np.bool_)
        gr = grade[lo:hi] if grade.shape[0] else grade
        it = items[lo:hi] if items.shape[0] else items
        k = kq[q]
        m = _sort_path(scores[lo:hi], rel[lo:hi], every, gr, it, lo, thr, tie, g, e, r, b, w, max(k, 1))
        for t in range(m):
            gs[w[t]] = g[t]
            es[w[t]] = e[t]
            if tie == TIE_EXPECTED:
                x = (k - g[t]) / e[t]
                p[w[t]] = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)
            else:
                p[w[t]] = 1.0 if g[t] + b[t] + 1 <= k else 0.0
    return p, gs, es


@kernel
def ranks(offsets, scores, rel, grade, items, tie, depth):
    """Per row: its rank (from 1) within its query under a deterministic tie rule, for the rows
    ranked within ``depth``; 0 for the rows beyond it (the same order as the kernel's)."""
    out = np.zeros(scores.shape[0], np.int64)
    g, e, r, b, w = _scratch(offsets, 0, offsets.shape[0] - 1)
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        every = np.ones(hi - lo, np.bool_)
        gr = grade[lo:hi] if grade.shape[0] else grade
        it = items[lo:hi] if items.shape[0] else items
        m = _sort_path(scores[lo:hi], rel[lo:hi], every, gr, it, lo, -np.inf, tie, g, e, r, b, w, depth)
        for t in range(m):
            rank = g[t] + b[t] + 1
            if rank <= depth:
                out[w[t]] = rank
    return out


@kernel(outputs=('out',))
def _ideal_dcg_range(offsets, gains, cutoffs, disc, zeros, zero_gain, cum, every, q0, q1, out):
    """DCG of the ideal ranking of the judged gains (descending) of queries q0..q1, at every cutoff,
    into ``out`` (zeros where a query has no gain to rank).

    ``disc[p]`` is the discount of rank p (``disc[0]`` unused) and ``cum`` its prefix sums. Only
    positive gains enter the ideal ranking (trec_eval), or every gain, zero and negative ones last,
    when ``every`` (torchmetrics). ``zeros[q]`` (when ``zeros`` is not empty) more judged items of
    query q, not listed in ``gains``, each gain ``zero_gain`` (> 0 unless ``every``): the grade-0
    cells of a score matrix. They take the ranks after the listed gains larger than ``zero_gain``.
    """
    C = cutoffs.shape[0]
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        extra = zeros[q] if zeros.shape[0] else 0
        npos = 0
        for j in range(lo, hi):
            if gains[j] > 0 or every:
                npos += 1
        if npos == 0 and extra == 0:
            continue
        best = np.empty(npos)
        npos = 0
        for j in range(lo, hi):
            if gains[j] > 0 or every:
                best[npos] = -gains[j]
                npos += 1
        best = best[stable_argsort(best)]
        above = 0  # listed gains ranked before the extra items
        while above < npos and -best[above] > zero_gain:
            above += 1
        for c in range(C):
            k = cutoffs[c]
            total = 0.0
            for p in range(min(above, k)):
                total -= best[p] * disc[p + 1]
            if extra > 0 and k > above:
                total += zero_gain * (cum[min(above + extra, k)] - cum[above])
            for p in range(above, npos):
                rank = p + extra + 1
                if rank > k:
                    break
                total -= best[p] * disc[rank]
            out[q, c] = total


def ideal_dcg(offsets: np.ndarray, gains: np.ndarray, cutoffs: np.ndarray, disc: np.ndarray, zeros: np.ndarray,
              zero_gain: float, cum: np.ndarray, every: bool, threads: int | None = None) -> np.ndarray:
    """:func:`_ideal_dcg_range` over every query (Q x C), queries split over threads."""
    out = np.zeros((len(offsets) - 1, len(cutoffs)))
    ranges = _split(offsets, (threads or default_threads()) if len(gains) >= 200_000 else 1)
    run_parallel(lambda qr: _ideal_dcg_range(offsets, gains, cutoffs, disc, zeros, zero_gain, cum, every, qr[0], qr[1],
                                             out), ranges, workers=len(ranges))
    return out


def _split(offsets: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split queries into ``parts`` ranges of about equal row counts."""
    Q = len(offsets) - 1
    if parts <= 1 or Q < 2:
        return [(0, Q)]
    bounds = np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)[1:-1])
    edges = np.unique(np.concatenate([[0], np.clip(bounds, 0, Q), [Q]]))
    return [(int(a), int(z)) for a, z in zip(edges[:-1], edges[1:]) if z > a]


def _outputs(Q: int, prm: Params, G: int) -> Outputs:
    C = len(prm.cutoffs)
    rank_shape = (Q, C) if prm.want_rank else (0, C)
    return Outputs(np.empty((Q, C)), np.empty((Q, C)), np.empty(Q), np.empty(Q, np.int64), np.empty(Q, np.int64),
                   np.empty(Q, np.bool_), np.empty(rank_shape), np.empty(rank_shape), np.empty((G, Q, C)))


def vectorisable(cols: Columns, prm: Params) -> bool:
    """Whether :func:`topkeval.kernels.vectorised.stats` computes what the kernel would: h(k), hits,
    h(R) and the tie flags under ``ties="expected"``, without discounted gains, rank metrics (RR,
    AP) or weights."""
    return (cols.gains.shape[0] == 0 and not prm.want_rank and cols.rw.shape[0] == 0 and prm.tie == TIE_EXPECTED
            and prm.path == PATH_AUTO)


def compute(cols: Columns, prm: Params, threads: int | None = None) -> Outputs:
    """Run the kernel over all queries of ``cols``; return the filled :class:`Outputs` (computed
    by :func:`topkeval.kernels.vectorised.stats` while the kernels are not compiled, when it can)."""
    from . import vectorised
    from .jit import use_vectorised

    if vectorisable(cols, prm) and use_vectorised(len(cols.scores)):
        return vectorised.stats(cols, prm, _outputs(len(cols.offsets) - 1, prm, 0))
    out = _outputs(len(cols.offsets) - 1, prm, cols.gains.shape[0])
    threads = threads or default_threads()
    ranges = _split(cols.offsets, threads if len(cols.scores) >= 200_000 else 1)
    deferred = np.empty(len(cols.offsets) - 1, np.int64)  # each range writes its own part
    full = True if cols.gains.shape[0] or prm.want_rank else None  # None: h(k), hits and ties only

    def counted(qr):
        return deferred[qr[0]:qr[0] + stats_range(cols, prm, qr[0], qr[1], out, deferred[qr[0]:qr[1]], full)]

    sort = np.concatenate(run_parallel(counted, ranges, workers=len(ranges)))
    if len(sort):  # queries with many active candidates: the sorting path, split over threads again
        parts = _split(np.concatenate([[0], np.cumsum(np.diff(cols.offsets)[sort])]), threads if len(cols.scores) >= 200_000 else 1)
        run_parallel(lambda qr: stats_sorted(cols, prm, sort[qr[0]:qr[1]], out, full), parts, workers=len(parts))
    return out


def compute_matrix_rows(S: np.ndarray, eptr: np.ndarray, eidx: np.ndarray, rptr: np.ndarray, rcol: np.ndarray,
                        rgrade: np.ndarray, rrel: np.ndarray, ractive: np.ndarray, rgain: np.ndarray, R: np.ndarray,
                        thr: float, prm: Params, threads: int | None = None) -> tuple[Outputs, np.ndarray]:
    """:func:`matrix_rows` over every row of ``S``, rows split over threads; ``out.n`` holds each
    row's candidates and ``out.rel_ret`` is left to the caller. Returns the outputs and, per row,
    whether every score is finite."""
    U = S.shape[0]
    out = _outputs(U, prm, rgain.shape[0])
    finite = np.empty(U, np.bool_)
    thr = np.float64(thr)  # float32 scores compared in float64 by the interpreted kernel too (as compiled)
    threads = threads or default_threads()
    parts = max(1, min(threads, U)) if S.size >= 1 << 20 else 1
    bounds = [U * p // parts for p in range(parts + 1)]
    ranges = [(a, z) for a, z in zip(bounds[:-1], bounds[1:]) if z > a]
    run_parallel(lambda qr: matrix_rows(S, eptr, eidx, rptr, rcol, rgrade, rrel, ractive, rgain, R, thr, prm,
                                        qr[0], qr[1], out, out.n, finite), ranges, workers=len(ranges))
    return out, finite


def compute_from_counts(aoff: np.ndarray, g: np.ndarray, e: np.ndarray, r: np.ndarray, b: np.ndarray,
                        rel: np.ndarray, gains: np.ndarray, R: np.ndarray, prm: Params) -> Outputs:
    """:func:`compute` from per-candidate counts made elsewhere (see :func:`stats_from_counts`);
    ``n`` and ``rel_ret`` of the outputs are left for the caller to fill."""
    out = _outputs(len(aoff) - 1, prm, gains.shape[0])
    stats_from_counts(aoff, g, e, r, b, rel, gains, R, prm, 0, len(aoff) - 1, out)
    return out
