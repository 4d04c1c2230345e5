"""Small sorting kernels: a stable argsort and a selection, written out instead of numba's own.

numba compiles ``np.argsort(kind="mergesort")``, ``np.partition`` and ``np.sort`` from large
generic implementations: about 5 of the 12 seconds a fresh install spent compiling before its
first evaluation. These few loops compile in a fraction of that and run as fast on the short
arrays the kernels sort (a query's candidates, a tie group).
"""

from __future__ import annotations

import numpy as np

from .jit import kernel

#: Runs of this many elements are sorted by insertion before the merges.
_RUN = 16


@kernel
def stable_argsort(keys):
    """Indices that sort ``keys`` (float64) ascending; equal keys keep their order (stable).

    A bottom-up merge sort over runs sorted by insertion.
    """
    n = keys.shape[0]
    order = np.arange(n)
    if n < 2:
        return order
    for start in range(0, n, _RUN):
        stop = min(start + _RUN, n)
        for i in range(start + 1, stop):
            x = order[i]
            kx = keys[x]
            j = i - 1
            while j >= start and keys[order[j]] > kx:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
    src = order
    dst = np.empty(n, np.int64)
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if keys[src[j]] < keys[src[i]]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@kernel
def kth_smallest(values, k):
    """The value that would sit at index ``k`` of ``values`` sorted ascending (a quickselect on a copy)."""
    a = values.copy()
    lo = 0
    hi = a.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) // 2
        x, y, z = a[lo], a[mid], a[hi]  # median of three as the pivot
        pivot = max(min(x, y), min(max(x, y), z))
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                t = a[i]
                a[i] = a[j]
                a[j] = t
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


#: numba's quicksort leaves partitions of at most this many elements to an insertion sort.
_QUICKSORT_SMALL = 15


@kernel(outputs=('order',))
def _quicksort_partition(keys, order, low, high):
    """Partition ``order[low:high + 1]`` around the median of its first, middle and last keys; return
    the pivot's final index (numba's scheme: the pivot is parked at ``high`` during the scan)."""
    mid = (low + high) >> 1
    if keys[order[mid]] < keys[order[low]]:
        order[low], order[mid] = order[mid], order[low]
    if keys[order[high]] < keys[order[mid]]:
        order[high], order[mid] = order[mid], order[high]
    if keys[order[mid]] < keys[order[low]]:
        order[low], order[mid] = order[mid], order[low]
    pivot = keys[order[mid]]
    order[high], order[mid] = order[mid], order[high]
    i = low
    j = high - 1
    while True:
        while i < high and keys[order[i]] < pivot:
            i += 1
        while j >= low and pivot < keys[order[j]]:
            j -= 1
        if i >= j:
            break
        order[i], order[j] = order[j], order[i]
        i += 1
        j -= 1
    order[i], order[high] = order[high], order[i]
    return i


@kernel
def quicksort_argsort(keys):
    """Indices that sort ``keys`` (float64, no NaN) ascending in the order numba's
    ``np.argsort(keys)`` (``kind="quicksort"``, its default) gives, equal keys included.

    That order is not stable: partitions of 16 elements or more are split around a median-of-three
    pivot, which moves equal keys past one another; smaller ones are finished by an insertion sort,
    which keeps their order. ranx ranks a query's documents this way (``ties="ranx"``). Written out,
    rather than calling ``np.argsort``, so that the interpreted kernels give the same order as the
    compiled ones (NumPy's own quicksort orders ties differently).
    """
    n = keys.shape[0]
    order = np.arange(n)
    if n < 2:
        return order
    stack_lo = np.empty(128, np.int64)  # the larger part waits here: at most log2(n) entries
    stack_hi = np.empty(128, np.int64)
    stack_lo[0] = 0
    stack_hi[0] = n - 1
    top = 1
    while top > 0:
        top -= 1
        low = stack_lo[top]
        high = stack_hi[top]
        while high - low >= _QUICKSORT_SMALL:
            p = _quicksort_partition(keys, order, low, high)
            if high - p > p - low:  # the right part is the larger: it waits, the left goes on
                if high > p:
                    stack_lo[top] = p + 1
                    stack_hi[top] = high
                    top += 1
                high = p - 1
            else:
                if p > low:
                    stack_lo[top] = low
                    stack_hi[top] = p - 1
                    top += 1
                low = p + 1
        for i in range(low + 1, high + 1):  # insertion sort of what is left: stable
            x = order[i]
            kx = keys[x]
            j = i
            while j > low and kx < keys[order[j - 1]]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = x
    return order


@kernel
def quicksort_positions(offsets, scores, thr):
    """Per row, its position (from 0) in its query's list ordered as ranx orders it: numba's
    quicksort argsort (:func:`quicksort_argsort`) of the negated scores of the query's rows that
    score at least ``thr``, in row order. Rows below ``thr`` get positions after every kept row."""
    out = np.empty(scores.shape[0], np.int64)
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        n = 0
        for j in range(lo, hi):
            n += scores[j] >= thr
        rows = np.empty(n, np.int64)
        keys = np.empty(n, np.float64)
        n = 0
        for j in range(lo, hi):
            if scores[j] >= thr:
                rows[n] = j
                keys[n] = -scores[j]
                n += 1
            else:
                out[j] = hi - lo  # beyond every kept row
        order = quicksort_argsort(keys)
        for p in range(n):
            out[rows[order[p]]] = p
    return out


@kernel(outputs=("tied",))
def tied_neighbours(offsets, scores, tied):
    """Mark in ``tied`` the rows that share their score with a neighbour in their query (``offsets``:
    the queries' rows), when every query's scores fall row by row, or every query's rise (as in a TREC
    run written rank by rank: equal scores are then neighbours), in one pass. Returns False (``tied``
    then means nothing) when they do not, or a score is not finite."""
    falling = True
    rising = True
    for q in range(offsets.shape[0] - 1):
        lo = offsets[q]
        hi = offsets[q + 1]
        if hi > lo:
            tied[lo] = False
            if not np.isfinite(scores[lo]):
                return False
        for i in range(lo + 1, hi):
            a = scores[i - 1]
            b = scores[i]
            tied[i] = False
            if not np.isfinite(b):
                return False
            if b > a:
                falling = False
            elif b < a:
                rising = False
            else:
                tied[i] = True
                tied[i - 1] = True
            if not (falling or rising):
                return False
    return True
