"""The second pass: statistics that need the order of a whole list, or candidates that are not relevant.

The main kernel (:mod:`topkeval.kernels.cpu`) looks only at relevant candidates and those with a
gain. The metrics here also look at judged candidates that are not relevant (Judged@k, bpref), at
every rank of the relevant ones together (interpolated precision, AUC) or at a product over the
ranks above (ERR). For each query this pass runs the sorting path of the main kernel
(:func:`~topkeval.kernels.cpu._sort_path`, the same order under every tie rule) on the candidates it
needs, which gives each of them ``g`` (candidates above), ``e`` (its tie group), ``r`` (relevant
in the group) and ``b`` (group mates the tie rule puts first), in rank order. Then:

* ``judged`` at k: the sum over judged candidates of their chance to be in the top k
  (``clamp((k - g) / e, 0, 1)`` under ``ties="expected"``, else ``g + b + 1 <= k``).
* ``bpref``: for each relevant candidate, ``1 - min(X, R) / min(NJ, R)`` with X the judged
  non-relevant candidates ranked above it (trec_eval ``m_bpref.c``). Under ``ties="expected"``
  X = A + U, with A the judged non-relevant candidates of the groups above and U uniform on
  0..j for j judged non-relevant group mates (its place among them is uniform): the mean of the
  j + 1 values is exact.
* ``iprec`` at recall level x: with c = lround(x R) (C's rounding, half away from zero), 0 if
  fewer than c relevant candidates are in the list, else the largest precision at a rank at or
  beyond the max(c, 1)-th relevant one (trec_eval ``m_iprec_at_recall.c``). Deterministic tie
  rules only.
* ``infap``: trec_eval's inferred AP sum (``m_infap.c``; Yilmaz & Aslam, CIKM 2006). A retrieved
  candidate is relevant, judged non-relevant (``jnr``), in the pool but unjudged (``unj``: a
  negative grade) or outside the pool (no judgment). For the relevant candidate at rank i (from
  1), with a relevant, b judged non-relevant and u pool-unjudged candidates above it, the term is
  1 at rank 1, else ``1/i + ((i-1)/i) ((a + b + u)/(i-1)) (a + eps)/(a + b + 2 eps)``,
  eps = :data:`INFAP_EPSILON`. Deterministic tie rules only.
* ``auc``: for each relevant candidate, the non-relevant candidates ranked below it, plus half
  of its non-relevant group mates under ``ties="expected"``.
* ``err`` at k: sum over ranks i <= k of ``R_i / i * prod_{j < i} (1 - R_j)``, with
  ``R = (2**grade - 1) / 2**max_grade``. Under ``ties="expected"`` the product over a whole tie
  group does not depend on its order; inside a group the member at position p has a uniformly
  random set of p - 1 mates before it, whose mean product is the normalised elementary symmetric
  mean ``E_{p-1}`` of the mates' ``1 - R`` (built one mate at a time,
  ``E'_s = (m+1-s)/(m+1) E_s + s/(m+1) v E_{s-1}``, a convex combination: no overflow).

* ``h_mult`` for multiplier x: h(c) at the query's own cutoff c = floor(x R + 0.9) (trec_eval
  ``m_Rprec_mult.c``), the relevant candidates' chances of being in the top c summed as for
  ``judged``.
* ``bin_g``: for each relevant candidate, ``1 / log2(2 + X)``, X the candidates ranked above it that
  are not relevant (trec_eval ``m_binG.c``). Under ``ties="expected"`` X = A + U, U uniform on 0..j
  for j non-relevant group mates, as for bpref.
* ``walk``: trec_eval's G, Rndcg and ndcg_rel (``m_G.c``, ``m_Rndcg.c``, ``m_ndcg_rel.c``) of each gain
  variant: a walk over the ranks of the list (the gain at each rank: under ``ties="expected"`` the
  mean gain of the rank's tie group, which makes Rndcg, linear in the gains, its expected value)
  beside the query's ideal gains, the positive gains of its judged items in decreasing order
  (:func:`_walk_values`).

Each sum runs in rank order (members of a tie group by grade), so a query's values do not depend
on the order of its rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cpu import NO_CUTOFF, TIE_EXPECTED, _rank_order, _scratch, _sort_path
from .jit import kernel
from .threads import default_threads, run_parallel

#: trec_eval's smoothing of the estimated share of relevant items among the judged ones (INFAP_EPSILON).
INFAP_EPSILON = 0.00001


class RankedColumns(NamedTuple):
    """Inputs per row and per query: ``offsets``, ``scores``, ``rel`` (relevant), ``active`` (the
    candidates this pass looks at), ``judged`` (has a judgment), ``jnr`` (judged, grade >= 0, not
    relevant), ``unj`` (a judgment with a negative grade, not relevant: in the pool but not
    judged), ``grade`` (float, for the optimistic / pessimistic tie rules, else empty),
    ``items`` (codes for the item tie rules, else empty), ``err_gain`` (V x rows: R of each row
    under each maximum grade), ``order`` (rows of keys to order tie mates: grades, gains), ``R`` and
    ``NJ`` (Q: relevant and judged non-relevant items of each query), ``wgain`` (W x rows: the gain of
    each row under each gain variant of the walk), ``ioff`` (W x (Q + 1)), ``ival`` and ``icnt``: the
    ideal gains of query q under variant v, as runs of equal positive gains in decreasing order,
    ``ival[ioff[v, q]:ioff[v, q + 1]]`` each taken ``icnt[...]`` times."""

    offsets: np.ndarray
    scores: np.ndarray
    rel: np.ndarray
    active: np.ndarray
    judged: np.ndarray
    jnr: np.ndarray
    unj: np.ndarray
    grade: np.ndarray
    items: np.ndarray
    err_gain: np.ndarray
    order: np.ndarray
    R: np.ndarray
    NJ: np.ndarray
    wgain: np.ndarray
    ioff: np.ndarray
    ival: np.ndarray
    icnt: np.ndarray


class RankedParams(NamedTuple):
    """``cutoffs`` (C, ascending, :data:`~topkeval.kernels.cpu.NO_CUTOFF` for the whole list),
    ``thr`` (score threshold), ``tie`` (a ``TIE_*`` code), ``whole`` (look at the whole list),
    ``want_judged``, ``want_bpref``, ``want_auc``, ``want_infap``, ``levels`` (L recall levels),
    ``mults`` (M multipliers of R), ``want_bin_g``, ``wdisc`` (W x (D + 1): the discount of ranks
    0..D of each gain variant of the walk, D at least the longest list and the most ideal gains)."""

    cutoffs: np.ndarray
    thr: float
    tie: int
    whole: bool
    want_judged: bool
    want_bpref: bool
    want_auc: bool
    want_infap: bool
    levels: np.ndarray
    mults: np.ndarray
    want_bin_g: bool
    wdisc: np.ndarray


class RankedOutputs(NamedTuple):
    """``judged`` (Q x C), ``bpref`` (Q), ``iprec`` (Q x L), ``auc`` (Q), ``err`` (V x Q x C),
    ``infap`` (Q), ``h_mult`` (Q x M), ``bin_g`` (Q), ``walk`` (3 x W x Q: G, Rndcg, ndcg_rel)."""

    judged: np.ndarray
    bpref: np.ndarray
    iprec: np.ndarray
    auc: np.ndarray
    err: np.ndarray
    infap: np.ndarray
    h_mult: np.ndarray
    bin_g: np.ndarray
    walk: np.ndarray


@kernel
def _infap_term(rank, rel_above, jnr_above, unj_above):
    """trec_eval's inferred precision at the relevant candidate of rank ``rank`` (from 1): the
    candidate itself, plus the share of the ranks above that are in the pool times the smoothed
    share of relevant items among the judged ones above."""
    if rank == 1:
        return 1.0
    above = float(rank - 1)
    pooled = rel_above + jnr_above + unj_above
    return 1.0 / rank + (above / rank) * (pooled / above) * (
        (rel_above + INFAP_EPSILON) / (rel_above + jnr_above + 2 * INFAP_EPSILON))


@kernel
def _c_round(x):
    """C's lround for x >= 0: half away from zero (x - floor(x) is exact)."""
    f = np.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


@kernel
def _bpref_term(x, R, den):
    if den == 0:
        return 1.0
    return 1.0 - min(x, R) / den


@kernel
def _bin_g_term(nonrel_above):
    """trec_eval's binG term of a relevant candidate with ``nonrel_above`` non-relevant candidates above it."""
    return 1.0 / np.log2(2.0 + nonrel_above)


@kernel
def _group_end(g, t, m, grouped):
    """The end of the tie group that starts at place ``t`` of a query's ``m`` candidates (``g``: each
    one's group start, in rank order): one past its last member, or ``t + 1`` when ranks are not
    grouped (a deterministic tie rule)."""
    z = t + 1
    if grouped:
        while z < m and g[z] == g[t]:
            z += 1
    return z


@kernel
def _walk_values(eg, n, vals, cnts, disc):
    """trec_eval's G, Rndcg and ndcg_rel of one ranked list; NaN for each when no ideal gain is positive.

    ``eg[p]``: the gain at rank p = 1..n; ``vals`` / ``cnts``: the ideal gains, runs of equal
    positive gains in decreasing order (P ranks in all); ``disc[p]``: the discount of rank p.

    * G (``m_G.c``): the sum over ranks p <= n of ``eg[p] / log2(2 + C(p) - S(p))``, S(p) the gains
      of ranks 1..p and C(p) the sum over ideal ranks j <= p of max(ideal gain, 1) (1 past the
      ideal gains), divided by the sum of the ideal gains.
    * Rndcg (``m_Rndcg.c``): the mean of DCG@min(L, n) / IDCG@L at the end L of each run of equal
      ideal gains, and, when the list is longer than P + 1, of DCG@n / IDCG@P.
    * ndcg_rel (``m_ndcg_rel.c``): the sum of DCG@p / IDCG@min(p, P) over the ranks p of positive
      gain, plus DCG@n / IDCG@P for each of the P - (those ranks) ideal gains left, over P; 0
      when that sum is not positive.
    """
    runs = vals.shape[0]
    if runs == 0:
        return np.nan, np.nan, np.nan
    P = 0
    for j in range(runs):
        P += cnts[j]
    S = 0.0  # gains of the ranks so far
    cost = 0.0  # G's ideal cost of the ranks so far
    gsum = 0.0
    ideal_sum = 0.0
    dcg = 0.0
    idcg = 0.0
    rsum = 0.0
    rcount = 0
    nsum = 0.0
    npos = 0
    run = 0
    left = cnts[0]
    for p in range(1, max(n, P) + 1):
        iv = vals[run] if run < runs else 0.0
        gp = eg[p] if p <= n else 0.0
        if p <= n:
            S += gp
            cost += iv if iv >= 1.0 else 1.0
            if gp != 0.0:
                gsum += gp / np.log2(2.0 + cost - S)
            dcg += gp * disc[p]
        if run < runs:
            ideal_sum += iv
            idcg += iv * disc[p]
        if gp > 0.0:
            nsum += dcg / idcg
            npos += 1
        if run < runs:
            left -= 1
            if left == 0:  # the end of a run of equal ideal gains: an R level of Rndcg
                rsum += dcg / idcg
                rcount += 1
                run += 1
                if run < runs:
                    left = cnts[run]
    if n >= P + 2:  # the list goes on past the ideal gains: trec_eval's last level, at n
        rsum += dcg / idcg
        rcount += 1
    nsum += (P - npos) * dcg / idcg
    return gsum / ideal_sum, rsum / rcount, (nsum / P if nsum > 0.0 else 0.0)


@kernel(outputs=('mean',))
def _symmetric_means(vals, skip, ones, smax, mean):
    """``mean[s]`` for s = 0..smax: the mean over s-subsets of the multiset (``ones`` values 1 and
    ``vals`` except index ``skip``) of the product of the subset's values (0 beyond its size)."""
    for s in range(smax + 1):
        mean[s] = 1.0 if s <= ones else 0.0
    m = ones
    for y in range(vals.shape[0]):
        if y == skip:
            continue
        v = vals[y]
        top = min(m + 1, smax)
        for s in range(top, 0, -1):
            mean[s] = ((m + 1 - s) * mean[s] + s * v * mean[s - 1]) / (m + 1)
        m += 1


@kernel(outputs=('out',))
def ranked_range(cols, prm, q0, q1, out):
    """Compute the second-pass statistics of queries q0..q1 (see the module docstring) into ``out``."""
    offsets, scores, rel = cols.offsets, cols.scores, cols.rel
    cutoffs, thr, tie = prm.cutoffs, prm.thr, prm.tie
    C = cutoffs.shape[0]
    L = prm.levels.shape[0]
    V = cols.err_gain.shape[0]
    M = prm.mults.shape[0]
    W = cols.wgain.shape[0]
    g, e, r, b, w = _scratch(offsets, q0, q1)
    eg = np.zeros(g.shape[0] + 1)
    cut = np.empty(M, np.int64)
    relrank = np.empty(g.shape[0], np.int64)
    best = np.empty(g.shape[0] + 1)
    kmax = cutoffs[C - 1]
    mean = np.empty(max(min(kmax, g.shape[0]), 1) + 1)
    vals = np.empty(g.shape[0])
    for q in range(q0, q1):
        lo = offsets[q]
        hi = offsets[q + 1]
        sc = scores[lo:hi]
        n = 0
        nrel = 0
        for j in range(hi - lo):
            if sc[j] >= thr:
                n += 1
                nrel += rel[lo + j]
        for c in range(C):
            if prm.want_judged:
                out.judged[q, c] = 0.0
            for v in range(V):
                out.err[v, q, c] = 0.0
        if prm.want_bpref:
            out.bpref[q] = 0.0
        if prm.want_auc:
            out.auc[q] = 0.0
        if prm.want_infap:
            out.infap[q] = 0.0
        for x in range(L):
            out.iprec[q, x] = 0.0
        for x in range(M):
            out.h_mult[q, x] = 0.0
            cut[x] = int(np.floor(prm.mults[x] * cols.R[q] + 0.9))  # trec_eval's (long)(x R + 0.9)
        if prm.want_bin_g:
            out.bin_g[q] = 0.0
        if n == 0:
            for v in range(W):  # no gain at any rank: the values of the ideal gains alone
                i0, i1 = cols.ioff[v, q], cols.ioff[v, q + 1]
                out.walk[0, v, q], out.walk[1, v, q], out.walk[2, v, q] = _walk_values(
                    eg, 0, cols.ival[i0:i1], cols.icnt[i0:i1], prm.wdisc[v])
            continue
        limit = n if prm.whole or kmax >= NO_CUTOFF else min(kmax, n)
        gr = cols.grade[lo:hi] if cols.grade.shape[0] else cols.grade
        it = cols.items[lo:hi] if cols.items.shape[0] else cols.items
        m = _sort_path(sc, rel[lo:hi], cols.active[lo:hi], gr, it, lo, thr, tie, g, e, r, b, w, max(limit, 1))
        if m > 1 and tie == TIE_EXPECTED and (V > 0 or W > 0):  # tie mates by grade: sums in one order
            _rank_order(g, e, r, b, w, m, tie, cols.order)
        # Judged@k
        if prm.want_judged:
            for c in range(C):
                k = cutoffs[c]
                total = 0.0
                for t in range(m):
                    if cols.judged[w[t]]:
                        if tie == TIE_EXPECTED:
                            total += min(max((k - g[t]) / e[t], 0.0), 1.0)
                        else:
                            total += 1.0 if g[t] + b[t] + 1 <= k else 0.0
                out.judged[q, c] = total
        # h(c) at each query's own cutoff c = floor(x R + 0.9)
        for x in range(M):
            total = 0.0
            for t in range(m):
                if rel[w[t]]:
                    if tie == TIE_EXPECTED:
                        total += min(max((cut[x] - g[t]) / e[t], 0.0), 1.0)
                    else:
                        total += 1.0 if g[t] + b[t] + 1 <= cut[x] else 0.0
            out.h_mult[q, x] = total
        # the gain at each rank (under "expected", the mean gain of the rank's tie group), and the walk
        for v in range(W):
            gains = cols.wgain[v]
            for p in range(n + 1):
                eg[p] = 0.0
            t = 0
            while t < m:
                z = _group_end(g, t, m, tie == TIE_EXPECTED)
                if tie == TIE_EXPECTED:
                    total = 0.0
                    for u in range(t, z):
                        total += gains[w[u]]
                    if total != 0.0:
                        for p in range(g[t] + 1, g[t] + e[t] + 1):
                            eg[p] = total / e[t]
                else:
                    eg[g[t] + b[t] + 1] = gains[w[t]]
                t = z
            i0, i1 = cols.ioff[v, q], cols.ioff[v, q + 1]
            out.walk[0, v, q], out.walk[1, v, q], out.walk[2, v, q] = _walk_values(
                eg, n, cols.ival[i0:i1], cols.icnt[i0:i1], prm.wdisc[v])
        # walk the tie groups (expected) or the ranks (deterministic) once
        R = cols.R[q]
        den = float(min(cols.NJ[q], R))
        N = n - nrel
        jnr_above = 0  # judged non-relevant candidates of the groups (ranks) above
        unj_above = 0  # pool-unjudged candidates (negative grades) of the ranks above (deterministic rules)
        isum = 0.0
        rel_above = 0  # relevant candidates of the groups (ranks) above
        bsum = 0.0
        asum = 0.0
        gsum_bin = 0.0
        t = 0
        while t < m:
            z = _group_end(g, t, m, tie == TIE_EXPECTED)
            nj = 0
            nr = 0
            for u in range(t, z):
                nj += cols.jnr[w[u]]
                nr += rel[w[u]]
            if nr > 0 and prm.want_bin_g:
                if tie == TIE_EXPECTED:  # X = A + U, U uniform on 0..j for j non-relevant mates
                    part = 0.0
                    for x in range(e[t] - r[t] + 1):
                        part += _bin_g_term(float(g[t] - rel_above + x))
                    gsum_bin += nr * part / (e[t] - r[t] + 1)
                else:
                    gsum_bin += _bin_g_term(float(g[t] + b[t] - rel_above))
            if nr > 0:
                if tie == TIE_EXPECTED:
                    part = 0.0
                    for x in range(nj + 1):
                        part += _bpref_term(float(jnr_above + x), R, den)
                    bsum += nr * part / (nj + 1)
                    below = N - (g[t] - rel_above) - (e[t] - r[t])
                    asum += nr * (below + 0.5 * (e[t] - r[t]))
                else:  # one candidate: rank g + b + 1
                    bsum += _bpref_term(float(jnr_above), R, den)
                    asum += N - (g[t] + b[t] - rel_above)
            if L > 0 and nr > 0:  # deterministic rules only (the plan refuses "expected"): one candidate
                relrank[rel_above] = g[t] + b[t] + 1
            if prm.want_infap and tie != TIE_EXPECTED:  # the plan refuses "expected": one candidate
                if nr > 0:
                    isum += _infap_term(g[t] + b[t] + 1, rel_above, jnr_above, unj_above)
                unj_above += cols.unj[w[t]]
            jnr_above += nj
            rel_above += nr
            t = z
        if prm.want_bpref:
            out.bpref[q] = bsum
        if prm.want_auc:
            out.auc[q] = asum
        if prm.want_infap:
            out.infap[q] = isum
        if prm.want_bin_g:
            out.bin_g[q] = gsum_bin
        # interpolated precision (deterministic rules): best[j] = max precision at ranks of the j-th
        # relevant candidate and beyond
        if L > 0 and rel_above > 0:
            best[rel_above] = 0.0
            for j in range(rel_above, 0, -1):
                best[j - 1] = max(best[j], j / relrank[j - 1])
            for x in range(L):
                c = _c_round(prm.levels[x] * R)
                if c <= rel_above:
                    out.iprec[q, x] = best[max(c, 1) - 1]
        # ERR
        for v in range(V):
            gains = cols.err_gain[v]
            if tie != TIE_EXPECTED:
                decay = 1.0
                for t in range(m):
                    rv = gains[w[t]]
                    if rv > 0.0:
                        rank = g[t] + b[t] + 1
                        for c in range(C):
                            if rank <= cutoffs[c]:
                                out.err[v, q, c] += rv * decay / rank
                        decay *= 1.0 - rv
                continue
            decay = 1.0
            t = 0
            while t < m:
                z = _group_end(g, t, m, True)
                if g[t] >= kmax:
                    break
                na = 0
                for u in range(t, z):
                    if gains[w[u]] > 0.0:
                        vals[na] = 1.0 - gains[w[u]]
                        na += 1
                if na > 0:
                    size = e[t]
                    smax = min(size, kmax - g[t]) - 1
                    a = 0
                    last = -1.0
                    for u in range(t, z):
                        rv = gains[w[u]]
                        if rv <= 0.0:
                            continue
                        if rv != last:  # tie mates of equal gain share their means
                            _symmetric_means(vals[:na], a, size - na, smax, mean)
                            last = rv
                        a += 1
                        for c in range(C):
                            top = min(size, cutoffs[c] - g[t])
                            term = 0.0
                            for p in range(1, top + 1):
                                term += mean[p - 1] / (g[t] + p)
                            out.err[v, q, c] += decay * rv * term / size
                    for y in range(na):
                        decay *= vals[y]
                t = z


def _split(offsets: np.ndarray, parts: int) -> list[tuple[int, int]]:
    from .cpu import _split as split

    return split(offsets, parts)


def compute(cols: RankedColumns, prm: RankedParams, threads: int | None = None) -> RankedOutputs:
    """Run the second pass over all queries of ``cols``; return the filled :class:`RankedOutputs`."""
    Q = len(cols.offsets) - 1
    C = len(prm.cutoffs)
    V = cols.err_gain.shape[0]
    out = RankedOutputs(np.zeros((Q, C) if prm.want_judged else (0, C)), np.zeros(Q if prm.want_bpref else 0),
                        np.zeros((Q, len(prm.levels))), np.zeros(Q if prm.want_auc else 0), np.zeros((V, Q, C)),
                        np.zeros(Q if prm.want_infap else 0), np.zeros((Q, len(prm.mults))),
                        np.zeros(Q if prm.want_bin_g else 0), np.zeros((3, cols.wgain.shape[0], Q)))
    threads = threads or default_threads()
    ranges = _split(cols.offsets, threads if len(cols.scores) >= 200_000 else 1)
    run_parallel(lambda qr: ranked_range(cols, prm, qr[0], qr[1], out), ranges, workers=len(ranges))
    return out
