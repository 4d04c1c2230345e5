"""Selection of each row's top T of a score matrix, in one read of the matrix.

For each row, the T-th largest score ``v`` and the cells scoring ``>= v`` (the whole tie group at
the boundary: ties are resolved later, exactly, by the kernel), columns ascending. This is what
``numpy.partition`` followed by a comparison and ``numpy.nonzero`` gives, without their three
passes over the matrix and their copies. One pass over each row, in blocks of :data:`BLOCK`
cells, keeps a min-heap of the T largest scores seen so far and the columns of every cell that
scored at least the heap's least when it was read; a block with no such cell is passed over after
a branch-free scan (which the compiler vectorises, and which also checks that every score is
finite and counts the cells below ``score_threshold``). On a row in random order the heap's least
rises fast and only about ``T (1 + ln(n / T))`` cells are ever kept; a row in ascending order
keeps every cell, slower but exact. At the end, the kept cells scoring at least the heap's least
are the selection.

Rows whose selection fits in :data:`CAP` ``+ 4 T`` slots are kept from that pass; the others
(heavy ties at the boundary) are read again. Rows are split over threads. Excluded cells (a sorted
list of columns per row, checked only for the few cells kept) and cells below ``score_threshold``
are never selected, without a masked copy of the matrix.
"""

from __future__ import annotations

import numpy as np

from .jit import kernel
from .threads import default_threads, row_ranges, run_parallel

#: Slots per row (beyond 4 T) kept from the first pass; rows selecting more are read again.
CAP = 64


#: Cells per block of the first pass: a block with no cell at or above the threshold is skipped
#: after a branch-free scan (which the compiler vectorises); only the few others are walked.
BLOCK = 64

#: Blocks sampled per row for the first floor.
CHUNKS = 16


@kernel
def _excluded(ex, p, x):
    """Whether column ``x`` is in ``ex`` (sorted), walking the pointer ``p`` forward: the columns
    asked for ascend, so a row's exclusions are merged in one pass. Returns (p, excluded)."""
    while p < ex.shape[0] and ex[p] < x:
        p += 1
    return p, p < ex.shape[0] and ex[p] == x


@kernel(outputs=("cand",))
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
                p, out = _excluded(ex, p, x)
                if out:
                    continue
                cand[c] = x
                c += 1
    return c


@kernel
def _finite_below(row, thr):
    """Whether every score of ``row`` is finite, and how many score below ``thr`` (branch-free)."""
    ok = True
    nb = 0
    for x in range(row.shape[0]):
        v = row[x]
        ok &= abs(v) < np.inf
        nb += v < thr
    return ok, nb


@kernel(outputs=("heap",))
def _sift_down(heap, size):
    """Restore the min-heap property of ``heap[:size]`` after its root was replaced."""
    i = 0
    x = heap[0]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= x:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = x


@kernel(outputs=("heap", "cand"))
def _scan(row, ex, thr, floor, heap, cand):
    """One pass over ``row``: the columns of the candidates (not in ``ex``, scoring at least
    ``thr``) that score at least ``floor`` and the heap's least when read, into ``cand``, and a
    min-heap of the largest of them in ``heap``. Returns (columns kept, heap size, every score
    finite, non-excluded cells below ``thr`` counted with the excluded ones)."""
    depth = heap.shape[0]
    n = row.shape[0]
    size = 0
    t = floor
    c = 0
    p = 0
    ok = True
    nb = 0
    for x0 in range(0, n, BLOCK):
        block = row[x0:min(x0 + BLOCK, n)]
        hit = False
        if thr == -np.inf:
            for i in range(block.shape[0]):  # branch-free: vectorised
                v = block[i]
                hit |= v >= t
                ok &= abs(v) < np.inf  # false for NaN and infinities (inf - inf: numpy warns)
        else:
            for i in range(block.shape[0]):
                v = block[i]
                hit |= v >= t
                ok &= abs(v) < np.inf
                nb += v < thr
        if not hit:
            continue
        c0 = c
        for i in range(block.shape[0]):  # branch-free compaction of the block's cells >= t
            v = block[i]
            cand[c] = x0 + i
            c += (v >= t) & (v > -np.inf)
        kept = c0
        for q in range(c0, c):  # the few found: exclusions, then the heap (t rises as it fills)
            x = cand[q]
            v = row[x]
            if v < t:
                continue
            p, out = _excluded(ex, p, x)
            if out:
                continue
            cand[kept] = x
            kept += 1
            if size < depth:
                heap[size] = v
                size += 1
                j = size - 1
                while j > 0 and heap[(j - 1) // 2] > heap[j]:  # sift up
                    heap[(j - 1) // 2], heap[j] = heap[j], heap[(j - 1) // 2]
                    j = (j - 1) // 2
                if size == depth:
                    t = max(floor, heap[0])
            elif v > heap[0]:
                heap[0] = v
                _sift_down(heap, size)
                t = max(floor, heap[0])
        c = kept
    return c, size, ok, nb


@kernel(outputs=("kth", "count", "slots", "below", "finite"))
def _thresholds(S, depth, eptr, eidx, thr, r0, r1, kth, count, slots, below, finite):
    """Rows r0..r1: the depth-th largest score ``kth[u]`` among the candidates (cells not
    excluded, scoring at least ``thr``; -inf when every candidate is selected), the number of
    cells selected, their columns in ``slots[u]`` when they fit, the non-excluded cells below
    ``thr``, and whether every score of the row is finite."""
    n = S.shape[1]
    cap = slots.shape[1]
    cand = np.empty(n, np.int64)
    heap = np.empty(min(depth, n), np.float64)
    sample = np.empty((depth * CHUNKS * BLOCK) // max(n, 1) + 4, np.float64)
    gap = n // CHUNKS
    for u in range(r0, r1):
        row = S[u]
        ex = eidx[eptr[u]:eptr[u + 1]]
        # a floor from a sample of CHUNKS blocks spread over the row: its j-th largest candidate
        # score, j chosen so that about T + 4 n / (CHUNKS BLOCK) cells score at least that much
        floor = thr
        if gap >= BLOCK and depth < n:
            j = (depth * CHUNKS * BLOCK) // n + 4
            top = 0  # sample[:top]: the largest sampled candidate scores, descending, at most j
            p = 0
            for h in range(CHUNKS):
                for x in range(h * gap, h * gap + BLOCK):
                    v = row[x]
                    if top == j and not v > sample[j - 1]:
                        continue
                    if not (v >= thr and abs(v) < np.inf):
                        continue
                    p, out = _excluded(ex, p, x)
                    if out:
                        continue
                    i = min(top, j - 1)  # insert v, dropping the smallest when full
                    while i > 0 and sample[i - 1] < v:
                        sample[i] = sample[i - 1]
                        i -= 1
                    sample[i] = v
                    top = min(top + 1, j)
            if top == j:
                floor = max(thr, sample[j - 1])
        if depth >= n:  # every candidate is selected: no heap
            c = _collect(row, thr, ex, cand)
            ok, nb = _finite_below(row, thr)
            size = 0
        else:
            c, size, ok, nb = _scan(row, ex, thr, floor, heap, cand)
            if size < depth and floor > thr:  # fewer than T candidates above the floor: none
                c, size, ok, nb = _scan(row, ex, thr, thr, heap, cand)
        finite[u] = ok
        for q in range(ex.shape[0]):
            nb -= row[ex[q]] < thr
        below[u] = nb
        k = heap[0] if size == depth else -np.inf
        sel = 0
        for i in range(c):  # cells kept early may have fallen below the final threshold
            if row[cand[i]] >= k:
                if sel < cap:
                    slots[u, sel] = cand[i]
                sel += 1
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
    finite : ndarray of bool
        Per row, whether every score is finite (excluded cells included).

    Examples
    --------
    >>> import numpy as np
    >>> rows, cols, vals, _, _ = select_top(np.array([[0.1, 0.9, 0.5, 0.5], [3.0, 1.0, 2.0, 2.0]]), 2)
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
    # a float64 scalar, not a Python float: the interpreted kernels compare it with float32 scores
    # in float64, as the compiled ones do (numpy compares a float32 with a Python float in float32)
    thr = np.float64(-np.inf if threshold is None else threshold)
    kth = np.empty(U, np.float64)
    count = np.empty(U, np.int64)
    below = np.empty(U, np.int64)
    finite = np.empty(U, np.bool_)
    slots = np.empty((U, min(4 * depth + CAP, S.shape[1])), np.int64)  # no row selects more than its cells
    threads = threads or default_threads()
    ranges = row_ranges(U, threads if S.size >= 1 << 20 else 1)
    run_parallel(lambda r: _thresholds(S, depth, eptr, eidx, thr, r[0], r[1], kth, count, slots, below, finite),
                 ranges,
                 workers=len(ranges))
    offsets = np.zeros(U + 1, np.int64)
    np.cumsum(count, out=offsets[1:])
    cols = np.empty(offsets[-1], np.int64)
    vals = np.empty(offsets[-1], np.float64)
    run_parallel(lambda r: _emit(S, kth, count, slots, offsets, eptr, eidx, r[0], r[1], cols, vals), ranges,
                 workers=len(ranges))
    rows = np.repeat(np.arange(U, dtype=np.int64), count)
    return rows, cols, vals, below, finite
