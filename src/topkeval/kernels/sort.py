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
