"""Selection of each row's top T of a score matrix by a threshold, in about one read of the matrix.

For each row, the T-th largest score ``v`` and the cells scoring ``>= v`` (the whole tie group at
the boundary: ties are resolved later, exactly, by the kernel), columns ascending. This is what
``numpy.partition`` followed by a comparison and ``numpy.nonzero`` gives, without their three
passes over the matrix and their copies:

1. a threshold ``t`` from a strided sample of the row (about :data:`SAMPLE` cells): the j-th
   largest sampled score, with j chosen so that about ``2 T + 4 n / SAMPLE`` cells score ``>= t``;
2. one pass over the row collects the columns scoring ``>= t``, in blocks of :data:`BLOCK` cells:
   a block is walked only when a branch-free scan finds such a cell in it (rare by design);
3. a selection among those few finds ``v`` exactly; if fewer than T cells passed ``t`` (a sample
   that happened to land high), the pass is repeated with no threshold, so the result never
   depends on the sample, only the time does.

The cells of rows whose selection fits in :data:`CAP` ``+ 4 T`` slots are kept from that pass;
the others (heavy ties at the boundary) are read again. Rows are split over threads. Excluded
cells (a sorted list of columns per row, checked only for the few cells above the threshold) and
cells below ``score_threshold`` are never selected, without a masked copy of the matrix.
"""

from __future__ import annotations

import numpy as np

from .jit import kernel
from .sort import kth_smallest
from .threads import default_threads, row_ranges, run_parallel

#: Cells sampled per row to choose the threshold.
SAMPLE = 1024

#: Slots per row (beyond 4 T) kept from the first pass; rows selecting more are read again.
CAP = 64


#: Cells per block of the first pass: a block with no cell at or above the threshold is skipped
#: after a branch-free scan (which the compiler vectorises); only the few others are walked.
BLOCK = 64


@kernel
def _collect(row, t, ex, cand):
    """Columns of ``row`` scoring ``>= t`` and above -inf, not in ``ex`` (sorted excluded
    columns), into ``cand``; return their number."""
    c = 0
    p = 0
    n = row.shape[0]
    for x0 in range(0, n, BLOCK):
        block = row[x0:min(x0 + BLOCK, n)]
        hit = False
        for i in range(block.shape[0]):
            hit |= block[i] >= t
        if not hit:
            continue
        for i in range(block.shape[0]):
            v = block[i]
            if v >= t and v > -np.inf:
                x = x0 + i
                while p < ex.shape[0] and ex[p] < x:
                    p += 1
                if p < ex.shape[0] and ex[p] == x:
                    continue
                cand[c] = x
                c += 1
    return c


@kernel(outputs=("kth", "count", "slots", "below"))
def _thresholds(S, depth, eptr, eidx, thr, r0, r1, kth, count, slots, below):
    """Rows r0..r1: the depth-th largest score ``kth[u]`` among the candidates (cells not excluded,
    scoring at least ``thr``; -inf when every candidate is selected), the number of cells
    selected, their columns in ``slots[u]`` when they fit, and the non-excluded cells below ``thr``."""
    n = S.shape[1]
    cap = slots.shape[1]
    cand = np.empty(n, np.int64)
    neg = np.empty(n, np.float64)
    stride = max(1, n // SAMPLE)
    for u in range(r0, r1):
        row = S[u]
        ex = eidx[eptr[u]:eptr[u + 1]]
        nb = 0
        if thr > -np.inf:
            for x in range(n):  # branch-free: vectorised
                nb += row[x] < thr
            for p in range(ex.shape[0]):
                nb -= row[ex[p]] < thr
        below[u] = nb
        m = 0
        p = 0
        for x in range(0, n, stride):
            while p < ex.shape[0] and ex[p] < x:
                p += 1
            v = row[x]
            if v >= thr and v > -np.inf and not (p < ex.shape[0] and ex[p] == x):
                neg[m] = -v
                m += 1
        t = thr
        j = (2 * depth * m) // n + 4  # the j-th largest sampled score: about (2 T + 4 stride) cells above it
        if j <= m:
            t = max(thr, -kth_smallest(neg[:m], j - 1))
        c = _collect(row, t, ex, cand)
        if c < depth and t > thr:  # the sample landed high: no threshold but thr
            t = thr
            c = _collect(row, t, ex, cand)
        k = -np.inf
        sel = c
        if c > depth:
            for i in range(c):
                neg[i] = -row[cand[i]]
            k = -kth_smallest(neg[:c], depth - 1)
            sel = 0
            for i in range(c):
                if row[cand[i]] >= k:
                    if sel < cap:
                        slots[u, sel] = cand[i]
                    sel += 1
        else:
            for i in range(min(c, cap)):
                slots[u, i] = cand[i]
        kth[u] = max(k, thr)
        count[u] = sel


@kernel(outputs=("cols", "vals"))
def _emit(S, kth, count, slots, offsets, eptr, eidx, r0, r1, cols, vals):
    """Write the selected cells of rows r0..r1 at ``offsets``: from the slots, or read again."""
    cap = slots.shape[1]
    for u in range(r0, r1):
        row = S[u]
        p = offsets[u]
        if count[u] <= cap:
            for i in range(count[u]):
                x = slots[u, i]
                cols[p + i] = x
                vals[p + i] = row[x]
            continue
        ex = eidx[eptr[u]:eptr[u + 1]]
        c = _collect(row, kth[u], ex, cols[p:p + count[u]])
        for i in range(c):
            vals[p + i] = row[cols[p + i]]


def select_top(S: np.ndarray, depth: int, exclude=None, threshold: float | None = None,
               threads: int | None = None):
    """Each row's candidates scoring at least its ``depth``-th largest candidate score.

    Candidates are the cells not in ``exclude`` (a scipy CSR matrix of the shape of ``S``, or
    None), scoring at least ``threshold`` (compared exactly, as in float64) and above -inf.

    Returns
    -------
    rows, cols : ndarray of int64
        The selected cells, row by row, columns ascending.
    vals : ndarray of float64
        Their scores.
    below : ndarray of int64
        Per row, the non-excluded cells scoring below ``threshold`` (zeros without one).

    Examples
    --------
    >>> import numpy as np
    >>> rows, cols, vals, _ = select_top(np.array([[0.1, 0.9, 0.5, 0.5], [3.0, 1.0, 2.0, 2.0]]), 2)
    >>> rows.tolist(), cols.tolist(), vals.tolist()
    ([0, 0, 0, 1, 1, 1], [1, 2, 3, 0, 2, 3], [0.9, 0.5, 0.5, 3.0, 2.0, 2.0])
    """
    S = np.ascontiguousarray(S)
    U = S.shape[0]
    depth = max(1, int(depth))
    if exclude is None:
        eptr, eidx = np.zeros(U + 1, np.int64), np.zeros(0, np.int64)
    else:
        exclude = exclude.tocsr()
        exclude.sort_indices()
        eptr, eidx = exclude.indptr.astype(np.int64), exclude.indices.astype(np.int64)
    thr = -np.inf if threshold is None else float(threshold)
    kth = np.empty(U, np.float64)
    count = np.empty(U, np.int64)
    below = np.empty(U, np.int64)
    slots = np.empty((U, 4 * depth + CAP), np.int64)
    threads = threads or default_threads()
    ranges = row_ranges(U, threads if S.size >= 1 << 20 else 1)
    run_parallel(lambda r: _thresholds(S, depth, eptr, eidx, thr, r[0], r[1], kth, count, slots, below), ranges,
                 workers=len(ranges))
    offsets = np.zeros(U + 1, np.int64)
    np.cumsum(count, out=offsets[1:])
    cols = np.empty(offsets[-1], np.int64)
    vals = np.empty(offsets[-1], np.float64)
    run_parallel(lambda r: _emit(S, kth, count, slots, offsets, eptr, eidx, r[0], r[1], cols, vals), ranges,
                 workers=len(ranges))
    rows = np.repeat(np.arange(U, dtype=np.int64), count)
    return rows, cols, vals, below
