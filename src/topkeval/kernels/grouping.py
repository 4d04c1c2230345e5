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


@njit(cache=True, nogil=True)
def factorize_dense(values, low, span):
    """Codes by first appearance for integer ids within [low, low + span): no hashing, O(n).

    Returns (codes, first_rows): ``first_rows[c]`` is the row where code c first appears.
    """
    table = np.full(span, -1, np.int64)
    codes = np.empty(values.shape[0], np.int64)
    first = np.empty(min(span, values.shape[0]), np.int64)
    nxt = 0
    for i in range(values.shape[0]):
        slot = values[i] - low
        c = table[slot]
        if c < 0:
            c = nxt
            table[slot] = c
            first[c] = i
            nxt += 1
        codes[i] = c
    return codes, first[:nxt]


@njit(cache=True, nogil=True)
def _gather_range(src, perm, out, lo, hi):
    for i in range(lo, hi):
        out[i] = src[perm[i]]


def gather(src: np.ndarray, perm: np.ndarray, threads: int = 2) -> np.ndarray:
    """``src[perm]``, with the random reads spread over threads (they are memory-latency bound)."""
    from concurrent.futures import ThreadPoolExecutor

    out = np.empty(len(perm), src.dtype)
    n = len(perm)
    if threads <= 1 or n < 1_000_000:
        _gather_range(src, perm, out, 0, n)
        return out
    bounds = np.linspace(0, n, threads + 1).astype(np.int64)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda j: _gather_range(src, perm, out, bounds[j], bounds[j + 1]), range(threads)))
    return out


@njit(cache=True, nogil=True)
def count_per_group(offsets, flags):
    """Number of true flags within each group."""
    out = np.zeros(offsets.shape[0] - 1, np.int64)
    for q in range(offsets.shape[0] - 1):
        c = 0
        for j in range(offsets[q], offsets[q + 1]):
            c += flags[j]
        out[q] = c
    return out
