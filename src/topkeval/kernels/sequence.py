"""Statistics of each list read in rank order: one value per query, under a deterministic tie rule.

The metrics here depend on the order of a whole list in a way that no sum of per-rank terms
captures: a C/W/L user who stops once enough gain is seen, the overlap of each prefix of the list
with the prefix of an ideal ranking, the non-relevant candidates above each relevant one in the
top k. Each takes ``rank`` (per row: its rank from 1 in its query, 0 for a row not ranked:
:func:`topkeval.kernels.cpu.ranks`) and is vectorised over queries with numpy (no compiled kernel).

* :func:`cwl`: the expected utility per item of cwl_eval's C/W/L measures (Moffat et al. 2013;
  Azzopardi, Thomas & Moffat 2019), from the continuation probabilities ``C_i`` of rank i:
  ``sum_i W_i g_i`` with ``W_i = prod_{j<i} C_j / sum_l prod_{j<l} C_j`` over the ranks
  ``1..D`` (cwl_eval pads every list with gain 0 to ``D = 1000`` and cuts it there); or
  cwl_eval's other columns (:data:`COLUMNS`). :func:`cwl_static` gives the weights of the
  measures whose ``C_i`` do not depend on the gains (their values are discounted gains).
* :func:`compat`: Clarke, Vtyurina & Smucker's compatibility (2021): the rank-biased overlap of the
  list with the ideal ranking of the judged relevant items (by grade, ties in the list's order,
  the items the list misses last), normalised by that of the ideal with itself.
* :func:`accuracy`: the share of (relevant, non-relevant) pairs of the top k ranked in that order
  (ir_measures' Accuracy).

A value is NaN where the metric is undefined (the metric function gives the ``undefined``
convention there).
"""

from __future__ import annotations

import functools

import numpy as np

#: Dense blocks of (queries x ranks) hold at most this many values at a time.
BLOCK = 1 << 22

#: cwl_eval's columns, with unit costs (cwl_eval's default): the expected utility per item (EU,
#: ``sum W_i g_i``), the expected total utility (ETU, ``sum L_i G_i``, L_i the chance to stop at rank
#: i: ``prod_{j<i} C_j (1 - C_i)``, G_i the gain of ranks 1..i), the expected cost per item (EC,
#: ``sum W_i``), the expected total cost (ETC, ``sum L_i i``) and the expected depth (ED, ``1 / W_1``).
COLUMNS = ("eu", "etu", "ec", "etc", "ed")


def _columns(reach: np.ndarray, c: np.ndarray, g: np.ndarray, column: str, w: np.ndarray | None = None) -> np.ndarray:
    """One cwl_eval column of each row of a (queries x ranks) block: ``reach`` the products of C over
    the ranks above, ``c`` the continuation probabilities, ``g`` the gains; ``w`` the weights W
    when they are not ``reach`` normalised (TrAP)."""
    if w is None:
        w = reach / reach.sum(axis=1, keepdims=True)
    if column == "eu":
        return (w * g).sum(axis=1)
    if column == "ec":
        return w.sum(axis=1)
    if column == "ed":
        with np.errstate(divide="ignore"):
            return 1.0 / w[:, 0]
    stop = reach * (1.0 - c)
    if column == "etu":
        return (stop * np.cumsum(g, axis=1)).sum(axis=1)
    return (stop * np.arange(1, g.shape[1] + 1, dtype=np.float64)).sum(axis=1)  # etc


@functools.lru_cache(maxsize=64)
def cwl_static(kind: str, k: int, param: float, depth: int) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """``(W, T, EC, ETC, ED)`` of a C/W/L measure whose continuation does not depend on the gains,
    over ranks 1..``depth``: W the weights (EU is ``sum W_i g_i``), T_j the chance to stop at rank j
    or below (ETU is ``sum T_j g_j``), and the three columns that are the same for every list.

    ========  ======================================================================================
    insq      ``C_i = ((i + 2T - 1) / (i + 2T))^2``
    sdcg      ``C_i = log2(i + 1) / log2(i + 2)`` for i < k, 0 at k (cwl_eval's NDCG-k)
    npv       ``C_i = 1 / (1 + rate)`` (cwl_eval's NPV: RBP with p = 1 / (1 + rate))
    tbg       ``W_i`` proportional to ``2^(-(i - 1) / H)`` (Smucker & Clarke's time-biased gain, each
              item costing 1), ``C_i = W_{i+1} / W_i``, 0 at the last rank
    umeasure  ``W_i`` proportional to ``max(0, 1 - (i - 1) / L)`` for i < depth, 0 at the last rank
              (Sakai & Dou's U-measure, each item costing 1), ``C_i = W_{i+1} / W_i``
    ========  ======================================================================================

    >>> W, T, ec, etc, ed = cwl_static("npv", 0, 1.0, 1000)
    >>> round(float(W[0]), 6), round(ec, 6), round(ed, 6)  # RBP with p = 1/2: W_1 = 1/2
    (0.5, 1.0, 2.0)
    """
    i = np.arange(1, depth + 1, dtype=np.float64)
    w = None
    if kind == "insq":
        c = ((i + 2.0 * param - 1.0) / (i + 2.0 * param)) ** 2
    elif kind == "sdcg":
        c = np.where(i < k, np.log2(i + 1.0) / np.log2(i + 2.0), 0.0)
    elif kind == "npv":
        c = np.full(depth, 1.0 / (1.0 + param))
    elif kind in ("tbg", "umeasure"):
        if kind == "tbg":
            w = 2.0 ** (-(i - 1.0) / param)
        else:
            w = np.maximum(0.0, 1.0 - (i - 1.0) / param)
            w[-1] = 0.0
        w = w / w.sum()
        c = np.zeros(depth)
        with np.errstate(divide="ignore", invalid="ignore"):
            c[:-1] = np.where(w[:-1] > 0, w[1:] / np.where(w[:-1] > 0, w[:-1], 1.0), 0.0)
    else:
        raise ValueError(kind)
    reach = np.ones(depth)
    reach[1:] = np.cumprod(c[:-1])
    if w is None:
        w = reach / reach.sum()
    stop = reach * (1.0 - c)
    tail = np.cumsum(stop[::-1])[::-1]  # T_j: stopping at rank j or below, so that gain j counts in G
    w.setflags(write=False)  # kept by the cache: shared by every caller
    tail.setflags(write=False)
    return w, tail, float(w.sum()), float((stop * i).sum()), float(1.0 / w[0])


def _ranked_rows(offsets: np.ndarray, rank: np.ndarray, depth: int | None = None):
    """The ranked rows (rank > 0, and <= ``depth``): their indices, queries and positions (rank - 1)."""
    keep = rank > 0 if depth is None else (rank > 0) & (rank <= depth)
    rows = np.flatnonzero(keep)
    q = np.searchsorted(offsets, rows, side="right") - 1
    return rows, q, rank[rows] - 1


def cwl(offsets: np.ndarray, rank: np.ndarray, gains: np.ndarray, kind: str, k: int, param,
        depth: int, column: str = "eu", total: np.ndarray | None = None) -> np.ndarray:
    """cwl_eval's expected utility per item of each query, or another of its :data:`COLUMNS`
    (see the module docstring).

    ``gains``: per row, in [0, 1]. ``kind`` and its continuation probability at rank i (from 1),
    with ``G_i`` the gain summed over ranks 1..i:

    ========  ==============================================================================
    bpm       1 while ``G_i < T`` and ``i < K`` (K = ``k``), else 0 (Zhang et al. 2017, static)
    inst      ``((i + T + T_i - 1) / (i + T + T_i))^2``, ``T_i = T - G_i`` (Moffat et al. 2015)
    nerr8     ``1 - g_i`` for i < k, else 0 (Azzopardi, Mackenzie & Moffat 2021, eq. 8)
    nerr9     ``i / (i + 1) (1 - g_i)`` for i < k, else 0 (eq. 9)
    nerr10    ``p (1 - g_i)`` (eq. 10)
    nerr11    ``((i + 2T - 1) / (i + 2T))^2 (1 - g_i)`` (eq. 11)
    bpmd      dynamic BPM: 1 while ``G_i < T_i`` and ``i < K``, ``T_i = T + hb (G_{i-1} - (i - 1) m)``
              (the goal moves by ``hb (g - m)`` after each rank, m the median gain), 0 from the first
              rank that fails (cwl_eval's BPMDCWLMetric; its cost limit never moves: its code adds
              ``hc (g - m)`` to T, not to K, after the gain loop has ended)
    iftg      ``1 - 1 / (1 + b1 e^{(T - G_i) R1})`` (Azzopardi, Thomas & Craswell 2018, the goal)
    iftr      ``1 / (1 + b2 e^{(A - G_i / i) R2})`` (the rate of gain, each item costing 1)
    ift       the product of the two
    trap      from the weights ``W_i = G'_i / (i R)``, G' the gain of ranks 1..i with the leading
              ranks before any gain set to 1, R the judged items of positive gain (``total``; W not
              divided when it is 0): ``C_i = W_{i+1} / W_i``, 0 at the last rank (cwl_eval's TrAP,
              Harman's AP over the relevant items; W does not sum to 1)
    ========  ==============================================================================

    ``param`` is T (bpm, inst, nerr11), p (nerr10), ``(T, hb, m)`` (bpmd), ``(T, b1, R1)``
    (iftg), ``(A, b2, R2)`` (iftr) or the six (ift); ``depth`` the ranks every list is padded or
    cut to (cwl_eval's 1000).
    """
    Q = len(offsets) - 1
    D = depth if k <= 0 else min(k, depth)
    rows, q, pos = _ranked_rows(offsets, rank, D)
    out = np.zeros(Q)
    step = max(1, BLOCK // D)
    i = np.arange(1, D + 1, dtype=np.float64)
    starts = np.searchsorted(q, np.arange(0, Q + step, step))
    for a in range(0, Q, step):
        b = min(a + step, Q)
        lo, hi = starts[a // step], starts[a // step + 1]
        g = np.zeros((b - a, D))
        g[q[lo:hi] - a, pos[lo:hi]] = gains[rows[lo:hi]]
        weights = None
        if kind == "trap":
            seen = np.cumsum(g, axis=1)
            leading = np.logical_and.accumulate(seen == 0, axis=1)
            leading[:, -1] = False  # cwl_eval stops one short of the last rank
            seen[leading] = 1.0
            R = np.asarray(total, np.float64)[a:b, None]
            weights = seen / i / np.where(R > 0, R, 1.0)
            c = np.zeros((b - a, D))
            with np.errstate(divide="ignore", invalid="ignore"):
                c[:, :-1] = np.where(weights[:, :-1] > 0, weights[:, 1:] / np.where(weights[:, :-1] > 0,
                                                                                   weights[:, :-1], 1.0), 0.0)
            reach = np.ones((b - a, D))
            reach[:, 1:] = np.cumprod(c[:, :-1], axis=1)
            out[a:b] = _columns(reach, c, g, column, weights)
            continue
        if kind == "bpm":
            c = ((np.cumsum(g, axis=1) < param) & (i < k)).astype(np.float64)
        elif kind == "inst":
            t_i = param - np.cumsum(g, axis=1)
            c = ((i + param + t_i - 1.0) / (i + param + t_i)) ** 2
        elif kind == "nerr8":
            c = np.where(i < k, 1.0 - g, 0.0)
        elif kind == "nerr9":
            c = np.where(i < k, i / (i + 1.0) * (1.0 - g), 0.0)
        elif kind == "nerr10":
            c = param * (1.0 - g)
        elif kind == "nerr11":
            c = ((i + 2.0 * param - 1.0) / (i + 2.0 * param)) ** 2 * (1.0 - g)
        elif kind == "bpmd":
            T, hb, med = param
            seen = np.cumsum(g, axis=1)
            # the goal before rank i, moved by each rank above it in turn as cwl_eval's loop moves it
            # (T + hb (g_1 - m) + hb (g_2 - m) ..., summed in that order: the same rounding at a goal reached exactly)
            steps = np.empty_like(g)
            steps[:, 0] = T
            steps[:, 1:] = hb * (g[:, :-1] - med)
            goal = np.cumsum(steps, axis=1)
            c = (np.logical_and.accumulate(seen < goal, axis=1) & (i < k)).astype(np.float64)
        elif kind in ("iftg", "iftr", "ift"):
            seen = np.cumsum(g, axis=1)
            c = np.ones((b - a, D))
            with np.errstate(over="ignore"):
                if kind in ("iftg", "ift"):
                    T, b1, R1 = param[:3]
                    c *= 1.0 - 1.0 / (1.0 + b1 * np.exp((T - seen) * R1))
                if kind in ("iftr", "ift"):
                    A, b2, R2 = param[-3:]
                    c *= 1.0 / (1.0 + b2 * np.exp((A - seen / i) * R2))
        else:
            raise ValueError(kind)
        reach = np.ones((b - a, D))  # the chance to examine rank i: the product of C_j over j < i
        np.cumprod(c[:, :-1], axis=1, out=reach[:, 1:])
        out[a:b] = (reach * g).sum(axis=1) / reach.sum(axis=1) if column == "eu" else _columns(reach, c, g, column)
    return out


def compat(offsets: np.ndarray, rank: np.ndarray, rel: np.ndarray, grades: np.ndarray, R: np.ndarray,
           judged_offsets: np.ndarray, judged_grades: np.ndarray, judged_rel: np.ndarray, p: float,
           normalize: bool, places: np.ndarray | None = None) -> np.ndarray:
    """Compatibility of each query's list with its ideal ranking (see the module docstring).

    With D = max(n, R), the overlap at depth d is the number of items in both the top d of the list
    and the top d of the ideal; rank-biased overlap sums ``p^(d-1) overlap(d) / d`` over
    d = 1..D, divided by ``sum p^(d-1)`` (or, with ``normalize``, by the same sum for the ideal
    with itself, which is ``min(d, R)`` at depth d). An item at rank r of the list and place i of
    the ideal is in both from depth max(r, i) on. NaN where R = 0.

    The ideal ranks the judged relevant items by grade, equal grades in the list's order (those it
    misses last); ``places`` (per row, from :func:`ideal_places`) gives each ranked relevant row its
    place in another ideal instead.
    """
    Q = len(offsets) - 1
    n = np.bincount(np.searchsorted(offsets, np.flatnonzero(rank > 0), side="right") - 1, minlength=Q)
    R = np.asarray(R, dtype=np.int64)
    D = np.maximum(n, R)
    top = int(D.max()) if Q else 0
    d = np.arange(1, top + 1, dtype=np.float64)
    weight = np.concatenate([[1.0], np.cumprod(np.full(max(top - 1, 0), p))])
    head = np.concatenate([[0.0], np.cumsum(weight / d)])  # head[m]: the sum over depths 1..m
    rows = np.flatnonzero((rank > 0) & rel)
    q = np.searchsorted(offsets, rows, side="right") - 1
    g = np.asarray(grades, dtype=np.float64)[rows]
    r = rank[rows]
    # place in the ideal: judged relevant items of a higher grade, then those of the list with its
    # grade ranked above it, then itself
    jrows = np.flatnonzero(judged_rel)
    jq = np.searchsorted(judged_offsets, jrows, side="right") - 1
    jg = np.asarray(judged_grades, dtype=np.float64)[jrows]
    qs = np.concatenate([jq, q])
    gs = np.concatenate([jg, g])
    kind = np.concatenate([np.ones(len(jq), np.int64), np.zeros(len(q), np.int64)])
    order = np.lexsort((kind, -gs, qs))  # per query by grade descending, the list's items before equal judged ones
    judged_before = np.cumsum(kind[order]) - kind[order]
    first = np.ones(len(order), bool)
    first[1:] = qs[order][1:] != qs[order][:-1]
    base = np.maximum.accumulate(np.where(first, judged_before, 0)) if len(order) else judged_before
    higher = np.empty(len(order), np.int64)
    higher[order] = judged_before - base
    higher = higher[len(jq):]
    mine = np.lexsort((r, -g, q))
    new = np.ones(len(mine), bool)  # the first of its (query, grade) group
    new[1:] = (q[mine][1:] != q[mine][:-1]) | (g[mine][1:] != g[mine][:-1])
    at = np.arange(len(mine))
    above = np.empty(len(mine), np.int64)
    above[mine] = at - np.maximum.accumulate(np.where(new, at, 0)) if len(mine) else at
    place = higher + above + 1 if places is None else np.asarray(places, np.int64)[rows]
    both = np.maximum(place, r)
    walk = np.lexsort((r, q))  # each query's terms added in rank order, whatever the order of its rows
    score = np.bincount(q[walk], weights=(head[D[q]] - head[both - 1])[walk], minlength=Q)
    if normalize:
        # the ideal with itself: the item at place i counts from depth i: sum over i <= R of head[D] - head[i - 1]
        cum_head = np.concatenate([[0.0], np.cumsum(head)])
        best = R * head[D] - cum_head[R]
        den = np.where(best > 0, best, np.concatenate([[0.0], np.cumsum(weight)])[D])
    else:
        den = np.concatenate([[0.0], np.cumsum(weight)])[D]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = score / den
    out[R == 0] = np.nan
    return out


def ideal_places(rank: np.ndarray, scores: np.ndarray, judged_offsets: np.ndarray, judged_grades: np.ndarray,
                 judged_rel: np.ndarray, row_judgment: np.ndarray) -> np.ndarray:
    """Per row, its place (from 1; 0 for a row not in the ideal) in the ideal ranking as ir_measures'
    compat provider orders it: the judged relevant items of a query by grade descending, equal grades
    by the list's score descending (0 for an item the list does not rank), equal scores in the order
    of the judgments (their order within a query). ``row_judgment``: per row, the index of its judgment
    (-1 without one); query q of the rows is query q of the judgments.

    >>> # judged: d9 (grade 1), d10 (grade 1), d5 (grade 2); the list ranks d10 and d9 with equal scores
    >>> ideal_places(np.array([1, 2]), np.array([2.0, 2.0]), np.array([0, 3]), np.array([1.0, 1.0, 2.0]),
    ...              np.array([True, True, True]), np.array([1, 0])).tolist()
    [3, 2]
    """
    J = len(judged_grades)
    jq = np.repeat(np.arange(len(judged_offsets) - 1), np.diff(judged_offsets))
    jscore = np.zeros(J, np.float64)
    ranked = (np.asarray(row_judgment) >= 0) & (np.asarray(rank) > 0)
    jscore[row_judgment[ranked]] = np.asarray(scores, np.float64)[ranked]
    rel_j = np.flatnonzero(judged_rel)
    g = np.asarray(judged_grades, np.float64)[rel_j]
    order = np.lexsort((rel_j, -jscore[rel_j], -g, jq[rel_j]))
    sorted_q = jq[rel_j][order]
    first = np.searchsorted(sorted_q, sorted_q, side="left")
    jplace = np.zeros(J, np.int64)
    jplace[rel_j[order]] = np.arange(len(order)) - first + 1
    places = np.zeros(len(rank), np.int64)
    places[ranked] = jplace[row_judgment[ranked]]
    return places


def accuracy(offsets: np.ndarray, rank: np.ndarray, rel: np.ndarray, k: int) -> np.ndarray:
    """Per query: 1 - (pairs of the top k with a non-relevant candidate above a relevant one) / (r N),
    r and N the relevant and non-relevant candidates of the top k (the whole list when ``k`` is 0);
    NaN where r = 0 or N = 0."""
    Q = len(offsets) - 1
    rows, q, pos = _ranked_rows(offsets, rank, k if k > 0 else None)
    n = np.bincount(q, minlength=Q)
    is_rel = rel[rows]
    rq, rpos = q[is_rel], pos[is_rel]
    r = np.bincount(rq, minlength=Q)
    order = np.lexsort((rpos, rq))
    start = np.concatenate([[0], np.cumsum(r)[:-1]])
    rel_above = np.empty(len(order), np.int64)
    rel_above[order] = np.arange(len(order)) - start[rq[order]]
    wrong = np.bincount(rq, weights=rpos - rel_above, minlength=Q)  # non-relevant above each relevant one
    pairs = r * (n - r)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pairs > 0, 1.0 - wrong / np.where(pairs > 0, pairs, 1), np.nan)
