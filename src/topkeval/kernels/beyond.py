"""Kernels of the beyond-accuracy metrics: each query's top k read again, then per-query sums.

:func:`top_rows` ranks every query's candidates as the main kernel does (the same selection, sort
and walk over tie groups: :func:`topkeval.kernels.cpu._sort_path`) and gives each row ``p``, its
chance of being in the top k (0 or 1 under a deterministic tie rule, ``clamp((k - g) / e, 0, 1)``
under ``ties="expected"``), ``g`` (candidates above its tie group), ``e`` (the group's size) and
``b`` (its place in the group under a deterministic rule: its rank is ``g + b + 1``). Under
``ties="expected"`` at most one tie group of a query straddles the cutoff: its ``e`` members each
have ``p = s / e`` for the ``s`` slots it fills, two of them are both shown with probability
``s (s - 1) / (e (e - 1))``, and members of different groups independently.

The per-query kernels take the rows shown (``p > 0``) of each query as one run (``soff``: the rows
of query q are ``soff[q]:soff[q + 1]``) and reduce them: intra-list diversity over unit feature
vectors in O(rows x dimensions) (no pairs: ``sum_{i<j} p_i p_j u_i.u_j = (|sum p u|^2 - sum p^2) / 2``,
and the one straddling group's pairs corrected to their joint probability), the expected number
of distinct categories, and the rank terms of serendipity and RBP averaged over a tie group's
ranks. :func:`auc_sums` walks each query's ranking as deep as partial AUC needs (its relevant
candidates and k non-relevant ones).

The drivers split the queries over threads as :func:`topkeval.kernels.cpu.compute` does.
"""

from __future__ import annotations

import math

import numpy as np

from .cpu import TIE_EXPECTED, TIE_FIRST, _scratch, _sort_path, _split
from .jit import kernel
from .sort import stable_argsort
from .threads import default_threads, run_parallel

#: Queries of at most this many candidates are ranked by an insertion sort into one scratch array
#: (no allocation per query) under ``ties="expected"`` and ``"first"``; the others by the main
#: kernel's selection and sort (:func:`topkeval.kernels.cpu._sort_path`), which applies every tie rule.
SHORT = 64


@kernel(outputs=("rows", "p", "g", "e", "b", "rels", "its", "count"))
def top_rows(offsets, scores, rel, grade, items, codes, thr, tie, k, depth, keep, q0, q1,
             rows, p, g, e, b, rels, its, count):
    """For the kept queries of q0..q1: the rows shown (``p > 0``), in rank order, at
    ``offsets[q]:offsets[q] + count[q]``: each one's row, ``p``, ``g``, ``e``, ``b`` (see the module
    docstring), relevance and item code (``codes``). The rows shown are the first ranks of a query
    (its tie groups that start within the top k), so they fill the start of its slice; rows below
    ``thr``, groups beyond the first ``depth[q]`` ranks and queries not kept are left out."""
    gs, es, rs, bs, ws = _scratch(offsets, q0, q1)
    order = np.empty(gs.shape[0], np.int64)  # the longest query of the range: enough for any short one
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        count[q] = 0
        if hi == lo or not keep[q]:
            continue
        limit = max(depth[q], 1)
        if hi - lo <= SHORT and (tie == TIE_EXPECTED or tie == TIE_FIRST):
            m = 0
            for j in range(lo, hi):  # insertion by score, descending; equal scores in row order
                s = scores[j]
                if s >= thr:
                    t = m
                    while t > 0 and scores[order[t - 1]] < s:
                        order[t] = order[t - 1]
                        t -= 1
                    order[t] = j
                    m += 1
            a = 0
            while a < m and a < limit and a < k:
                z = a + 1
                s = scores[order[a]]
                while z < m and scores[order[z]] == s:
                    z += 1
                size = z - a
                x = (k - a) / size
                share = 1.0 if x >= 1.0 else x
                for t in range(a, z):
                    if tie != TIE_EXPECTED and t >= k:
                        break
                    row = order[t]
                    at = lo + t
                    rows[at] = row
                    p[at] = share if tie == TIE_EXPECTED else 1.0
                    g[at] = a
                    e[at] = size
                    b[at] = t - a
                    rels[at] = rel[row]
                    its[at] = codes[row]
                    count[q] += 1
                a = z
            continue
        every = np.ones(hi - lo, np.bool_)
        gr = grade[lo:hi] if grade.shape[0] else grade
        it = items[lo:hi] if items.shape[0] else items
        m = _sort_path(scores[lo:hi], rel[lo:hi], every, gr, it, lo, thr, tie, gs, es, rs, bs, ws, limit)
        for t in range(m):
            if tie == TIE_EXPECTED:
                x = (k - gs[t]) / es[t]
                share = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)
            else:
                share = 1.0 if gs[t] + bs[t] + 1 <= k else 0.0
            if share <= 0.0:
                break  # rank order: every later row is below the top k too
            row = ws[t]
            at = lo + count[q]
            rows[at] = row
            p[at] = share
            g[at] = gs[t]
            e[at] = es[t]
            b[at] = bs[t]
            rels[at] = rel[row]
            its[at] = codes[row]
            count[q] += 1


@kernel(outputs=("out",))
def _pack(offsets, soff, source, q0, q1, out):
    """``out[soff[q] + t] = source[offsets[q] + t]`` for the ``soff[q + 1] - soff[q]`` first rows of each
    query of q0..q1: the slices of :func:`top_rows` made contiguous."""
    for q in range(q0, q1):
        lo = offsets[q]
        start = soff[q]
        for t in range(soff[q + 1] - start):
            out[start + t] = source[lo + t]


def ranked_rows(offsets, scores, rel, grade, items, codes, thr, tie, k, depth, keep, threads=None):
    """:func:`top_rows` over every query, the queries split over threads, then the rows shown made
    contiguous: ``(soff, rows, qix, p, g, e, b, rel, item)``, query q's at ``soff[q]:soff[q + 1]``,
    in rank order."""
    n = scores.shape[0]
    n_q = offsets.shape[0] - 1
    out = (np.empty(n, np.int64), np.empty(n), np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int32),
           np.empty(n, np.bool_), np.empty(n, np.int64))
    count = np.zeros(n_q, np.int64)
    threads = threads or default_threads()
    ranges = _split(offsets, threads if n >= 200_000 else 1)
    run_parallel(lambda r: top_rows(offsets, scores, rel, grade, items, codes, thr, tie, k, depth, keep, r[0], r[1],
                                    *out, count), ranges, workers=len(ranges))
    soff = np.zeros(n_q + 1, np.int64)
    np.cumsum(count, out=soff[1:])
    total = int(soff[-1])
    if total < n:  # gaps: the rows below the top k, and queries left out
        packed = tuple(np.empty(total, a.dtype) for a in out)
        for source, target in zip(out, packed):
            run_parallel(lambda r, s=source, t=target: _pack(offsets, soff, s, r[0], r[1], t), ranges,
                         workers=len(ranges))
        out = packed
    qix = np.repeat(np.arange(n_q), count)
    rows, p, g, e, b, rel_, item = out
    return soff, rows, qix, p, g, e, b, rel_, item


@kernel
def serendipity_terms(g, e, b, expected, k, n_items, pu):
    """Per row: the mean over its possible ranks r <= k of ``max((N + 1 - r) / N - pu, 0)``, over
    the e ranks of its tie group (``expected``), or at its rank ``g + b + 1`` (RecTools' chance of
    recommending an item at rank r to this user, less its chance for any user)."""
    out = np.zeros(g.shape[0], np.float64)
    for j in range(g.shape[0]):
        if expected:
            total = 0.0
            top = min(g[j] + e[j], k)
            for r in range(g[j] + 1, top + 1):
                x = (n_items + 1.0 - r) / n_items - pu[j]
                if x > 0.0:
                    total += x
            out[j] = total / e[j]
        else:
            x = (n_items + 1.0 - (g[j] + b[j] + 1)) / n_items - pu[j]
            out[j] = x if x > 0.0 else 0.0
    return out


@kernel(outputs=("out",))
def cosine_diversity(soff, p, e, item, unit, L, out):
    """Per query: the expected mean of ``1 - u_i . u_j`` over the pairs of its top k (unit vectors
    ``unit[item]``), NaN for a list of fewer than 2 items."""
    d = unit.shape[1]
    s = np.zeros(d)
    grp = np.zeros(d)
    for q in range(soff.shape[0] - 1):
        lq = L[q]
        if lq < 2:
            out[q] = np.nan
            continue
        s[:] = 0.0
        grp[:] = 0.0
        own = 0.0
        n_frac = 0
        p_frac = 0.0
        e_frac = 0
        for j in range(soff[q], soff[q + 1]):
            pj = p[j]
            u = unit[item[j]]
            for c in range(d):
                s[c] += pj * u[c]
            own += pj * pj
            if pj < 1.0:  # a member of the one group straddling the cutoff
                for c in range(d):
                    grp[c] += u[c]
                n_frac += 1
                p_frac = pj
                e_frac = e[j]
        sim = 0.0
        for c in range(d):
            sim += s[c] * s[c]
        sim = 0.5 * (sim - own)
        if n_frac > 1:
            slots = round(p_frac * e_frac)
            both = slots * (slots - 1) / (e_frac * (e_frac - 1))
            within = 0.0
            for c in range(d):
                within += grp[c] * grp[c]
            sim += (both - p_frac * p_frac) * 0.5 * (within - n_frac)
        out[q] = 1.0 - sim / (lq * (lq - 1) / 2.0)


@kernel(outputs=("out",))
def distinct_categories(soff, p, e, cat, out):
    """Per query: the expected number of distinct categories ``cat`` among its top k. A category
    with a member surely shown counts 1; one whose m members all belong to the straddling group
    (s of its e members shown) counts ``1 - prod_{j<m} (e - s - j) / (e - j)``."""
    for q in range(soff.shape[0] - 1):
        a = soff[q]
        z = soff[q + 1]
        if z == a:
            out[q] = 0.0
            continue
        keys = np.empty(z - a, np.float64)
        for j in range(a, z):
            keys[j - a] = cat[j]
        order = stable_argsort(keys)
        count = 0.0
        i = 0
        while i < z - a:
            c = keys[order[i]]
            sure = False
            m = 0
            pf = 0.0
            ef = 0
            while i < z - a and keys[order[i]] == c:
                j = a + order[i]
                if p[j] >= 1.0:
                    sure = True
                else:
                    m += 1
                    pf = p[j]
                    ef = e[j]
                i += 1
            if sure:
                count += 1.0
            else:
                slots = round(pf * ef)
                none = 1.0
                for t in range(m):
                    none *= (ef - slots - t) / (ef - t)
                count += 1.0 - none
        out[q] = count


@kernel(outputs=("out",))
def row_dots(qix, item, unit, hist, out):
    """Per row: ``unit[item[j]] . hist[qix[j]]`` (an item against the sum of its query's history)."""
    d = unit.shape[1]
    for j in range(qix.shape[0]):
        total = 0.0
        u = unit[item[j]]
        h = hist[qix[j]]
        for c in range(d):
            total += u[c] * h[c]
        out[j] = total


@kernel(outputs=("out",))
def add_rows(target, source, values, out):
    """``out[target[j]] += values[source[j]]`` for every j (sums of rows, such as a query's history)."""
    d = values.shape[1] if values.shape[0] else 0
    for j in range(target.shape[0]):
        v = values[source[j]]
        o = out[target[j]]
        for c in range(d):
            o[c] += v[c]


@kernel
def _hypergeometric(x, population, successes, draws):
    """P(x successes in ``draws`` draws without replacement from ``population`` holding ``successes``)."""
    if x < 0 or x > draws or x > successes or draws - x > population - successes:
        return 0.0
    return math.exp(math.lgamma(successes + 1) - math.lgamma(x + 1) - math.lgamma(successes - x + 1)
                    + math.lgamma(population - successes + 1) - math.lgamma(draws - x + 1)
                    - math.lgamma(population - successes - draws + x + 1)
                    - math.lgamma(population + 1) + math.lgamma(draws + 1) + math.lgamma(population - draws + 1))


@kernel(outputs=("pauc", "pap"))
def auc_sums(offsets, scores, rel, grade, items, thr, tie, k, depth, q0, q1, pauc, pap):
    """For the queries q0..q1, RecTools' numerators: ``pauc[q]``, the sum over relevant candidates
    with f < k non-relevant candidates above them of ``k - f``; ``pap[q]``, the same sum over the
    first k relevant candidates only. Under ``ties="expected"`` the exact means over the orders of
    each tie group (of r relevant and nb non-relevant members, after F non-relevant and ra relevant
    candidates): a relevant member has x ~ uniform{0..nb} non-relevant mates above it, and, at
    place t of the group, a hypergeometric x of its t mates above it."""
    gs, es, rs, bs, ws = _scratch(offsets, q0, q1)
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        pauc[q] = 0.0
        pap[q] = 0.0
        if hi == lo:
            continue
        every = np.ones(hi - lo, np.bool_)
        gr = grade[lo:hi] if grade.shape[0] else grade
        it = items[lo:hi] if items.shape[0] else items
        m = _sort_path(scores[lo:hi], rel[lo:hi], every, gr, it, lo, thr, tie, gs, es, rs, bs, ws, max(depth[q], 1))
        f = 0  # non-relevant candidates above
        ra = 0  # relevant candidates above
        t = 0
        sum_auc = 0.0
        sum_ap = 0.0
        while t < m and f < k:
            size = es[t]
            nrel = rs[t]
            nb = size - nrel
            if tie == TIE_EXPECTED:
                if nrel > 0:
                    mean = 0.0
                    for x in range(nb + 1):
                        if k - f - x > 0:
                            mean += k - f - x
                    group_auc = nrel * mean / (nb + 1)
                    sum_auc += group_auc
                    if ra + nrel <= k:
                        sum_ap += group_auc
                    elif ra < k:
                        total = 0.0
                        top = min(size - 1, 2 * k - ra - f - 2)
                        for place in range(top + 1):
                            for x in range(max(0, place - (nrel - 1)), min(place, nb) + 1):
                                if ra + place - x < k and k - f - x > 0:
                                    total += _hypergeometric(x, size - 1, nb, place) * (k - f - x)
                        sum_ap += nrel * total / size
                f += nb
                ra += nrel
            else:
                for u in range(t, t + size):
                    if rel[ws[u]]:
                        if f < k:
                            sum_auc += k - f
                            if ra < k:
                                sum_ap += k - f
                        ra += 1
                    else:
                        f += 1
            t += size
        pauc[q] = sum_auc
        pap[q] = sum_ap


def auc_numerators(offsets, scores, rel, grade, items, thr, tie, k, depth, threads=None):
    """:func:`auc_sums` over every query, the queries split over threads: ``(pauc, pap)``."""
    n_q = offsets.shape[0] - 1
    pauc = np.zeros(n_q, np.float64)
    pap = np.zeros(n_q, np.float64)
    threads = threads or default_threads()
    ranges = _split(offsets, threads if scores.shape[0] >= 200_000 else 1)
    run_parallel(lambda r: auc_sums(offsets, scores, rel, grade, items, thr, tie, k, depth, r[0], r[1], pauc, pap),
                 ranges, workers=len(ranges))
    return pauc, pap
