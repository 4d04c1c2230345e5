"""Numpy versions of the kernels a usual evaluation needs, for calls made before numba is loaded.

Compiling the kernels takes seconds once after installation (numba's cache keeps them), loading
them from the cache about half a second in every new process: far more than evaluating a log of
a few hundred thousand rows with whole-array numpy operations. So, until the kernels are compiled
(:mod:`topkeval.kernels.jit`), a call of up to :data:`~topkeval.kernels.jit.VECTOR_MAX` elements
whose kernel has a numpy version here runs that version; a larger call, or one that needs a
kernel without one (discounted gains, RR, AP, the tie rules other than ``"expected"``, shuffled
rows), compiles.

Every function here gives the numbers of its kernel to the last bit: the statistics of
:func:`stats` add the same terms in the same order (rank order: the tie group's start, then the
row; ``numpy.bincount`` adds its weights one after the other, as the kernel's loop does), with
the same operations on the same integers. The tests compare them with the compiled kernels.
"""

from __future__ import annotations

import numpy as np


def nonfinite(values: np.ndarray) -> int:
    """:func:`topkeval.kernels.grouping.count_nonfinite`."""
    return int(values.shape[0] - np.count_nonzero(np.isfinite(values)))


def per_group(offsets: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """:func:`topkeval.kernels.grouping.count_per_group`."""
    csum = np.zeros(len(flags) + 1, np.int64)
    np.cumsum(flags, dtype=np.int64, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def run_starts_range(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """:func:`topkeval.kernels.grouping._run_starts_range`."""
    first = [0] if lo == 0 and hi > 0 else []
    start = max(lo, 1)
    if hi <= start:
        return np.asarray(first, np.int64)
    return np.concatenate([first, np.flatnonzero(values[start:hi] != values[start - 1:hi - 1]) + start]).astype(np.int64)


def count_runs(values: np.ndarray, stop_above: int) -> int:
    """:func:`topkeval.kernels.grouping.count_runs`, with its early stop: the count once it
    exceeds ``stop_above`` (after the second row at the earliest)."""
    if len(values) < 2:
        return len(values)
    if stop_above < 1:
        return 1 + int(values[1] != values[0])
    return min(int(np.count_nonzero(values[1:] != values[:-1])) + 1, stop_above + 1)


def duplicates(offsets: np.ndarray, keys: np.ndarray) -> tuple[int, int]:
    """:func:`topkeval.kernels.grouping.count_duplicates`: the rows whose key repeats an earlier
    key of their group, and the first of them (-1 for none)."""
    n = len(keys)
    if n < 2:
        return 0, -1
    group = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    order = np.lexsort((keys, group))  # stable: a key's rows in row order
    sk, sg = keys[order], group[order]
    again = (sk[1:] == sk[:-1]) & (sg[1:] == sg[:-1])
    count = int(np.count_nonzero(again))
    return count, (int(order[1:][again].min()) if count else -1)


def text_duplicates(offsets: np.ndarray, text) -> tuple[int, int]:
    """:func:`topkeval.kernels.grouping.count_text_duplicates`: the strings hashed by Arrow."""
    import pyarrow.compute as pc

    from .arrow import one_chunk

    codes = pc.dictionary_encode(one_chunk(text)).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return duplicates(offsets, codes)


def _hit_probability(g0: np.ndarray, e0: np.ndarray, r0: np.ndarray, k) -> np.ndarray:
    """:func:`topkeval.kernels.cpu._hit_probability` of many tie groups at once (the same
    operations, in the same order, on each)."""
    out = np.zeros(len(g0))
    k = np.broadcast_to(np.asarray(k, np.int64), g0.shape)
    whole = g0 + e0 <= k
    slots = k - g0
    out[whole | (~whole & (g0 < k) & (e0 - r0 < slots))] = 1.0
    loop = ~whole & (g0 < k) & (e0 - r0 >= slots)
    if loop.any():
        at = np.flatnonzero(loop)
        ge, gr, gs = e0[at], r0[at], slots[at]
        none = np.ones(len(at))
        for x in range(int(gs.max())):
            on = gs > x
            none[on] *= (ge[on] - gr[on] - x) / (ge[on] - x)
        out[at] = 1.0 - none
    return out


def stats(cols, prm, out):
    """:func:`topkeval.kernels.cpu.compute` into ``out`` (its outputs) for the inputs
    :func:`topkeval.kernels.cpu.vectorisable` accepts (h(k), hits, h(R) and the tie flags under
    ``ties="expected"``, without discounted gains, rank metrics or weights), with whole-array
    operations: the candidates of every query sorted by score (descending, rows in order within a
    score), each relevant one's (g, e, r) read from its tie group, then the sums over them."""
    offsets, scores, rel = cols.offsets, cols.scores, cols.rel
    Q = len(offsets) - 1
    C = len(prm.cutoffs)
    sizes = np.diff(offsets)
    query = np.repeat(np.arange(Q, dtype=np.int64), sizes)
    if prm.thr == -np.inf:
        rows = None
        out.n[:] = sizes
    else:
        kept = scores >= prm.thr
        rows = np.flatnonzero(kept)
        out.n[:] = per_group(offsets, kept)
    q = query if rows is None else query[rows]
    s = scores if rows is None else scores[rows]
    rl = rel if rows is None else rel[rows]
    out.rel_ret[:] = np.bincount(q, weights=rl, minlength=Q).astype(np.int64) if len(q) else 0
    order = np.lexsort((-s, q))  # by query, score descending, row
    q, s, rl = q[order], s[order], rl[order]
    m = len(q)
    starts = np.ones(m, bool)
    starts[1:] = (q[1:] != q[:-1]) | (s[1:] != s[:-1])  # a tie group begins (== as the kernel compares)
    first = np.flatnonzero(starts)
    group = np.cumsum(starts) - 1
    ends = np.append(first[1:], m)
    rel_before = np.zeros(m + 1, np.int64)
    np.cumsum(rl, dtype=np.int64, out=rel_before[1:])
    kept_before = np.zeros(Q + 1, np.int64)
    np.cumsum(out.n, out=kept_before[1:])
    at = np.flatnonzero(rl)  # the relevant candidates, in rank order: (query, g, row)
    gq = group[at]
    qr = q[at]
    g = first[gq] - kept_before[qr]
    e = ends[gq] - first[gq]
    r = rel_before[ends[gq]] - rel_before[first[gq]]
    tie = np.zeros(Q, bool)
    ks = [(c, prm.cutoffs[c]) for c in range(C)] + ([(C, cols.R[qr])] if prm.want_r else [])
    for c, k in ks:
        total = np.bincount(qr, weights=np.minimum(np.maximum((k - g) / e, 0.0), 1.0), minlength=Q) if len(qr) \
            else np.zeros(Q)
        straddle = (g < k) & (k < g + e) & (e > r)
        if straddle.any():
            tie[qr[straddle]] = True
        if c < C:
            out.h[:, c] = total
        else:
            out.h_at_r[:] = total
    if not prm.want_r:
        out.h_at_r[:] = 0.0
    out.tie[:] = tie
    out.hit[:] = 0.0
    if len(qr):  # each query's best relevant tie group: its first relevant candidate in rank order
        best = np.flatnonzero(np.append(True, qr[1:] != qr[:-1]))
        for c in range(C):
            out.hit[qr[best], c] = _hit_probability(g[best], e[best], r[best], prm.cutoffs[c])
    return out
