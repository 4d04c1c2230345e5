"""Grouping rows by query in O(n): a counting sort of integer query codes."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def counting_sort(codes, n_groups):
    """Return (offsets, perm): rows of group c are perm[offsets[c]:offsets[c+1]], in input order."""
    counts = np.zeros(n_groups + 1, np.int64)
    for c in codes:
        counts[c + 1] += 1
    for c in range(n_groups):
        counts[c + 1] += counts[c]
    offsets = counts.copy()
    perm = np.empty(codes.shape[0], np.int64)
    for i in range(codes.shape[0]):
        c = codes[i]
        perm[counts[c]] = i
        counts[c] += 1
    return offsets, perm
