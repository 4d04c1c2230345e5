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
    from .threads import run_parallel

    out = np.empty(len(perm), src.dtype)
    n = len(perm)
    if threads <= 1 or n < 1_000_000:
        _gather_range(src, perm, out, 0, n)
        return out
    bounds = np.linspace(0, n, threads + 1).astype(np.int64)
    run_parallel(lambda j: _gather_range(src, perm, out, bounds[j], bounds[j + 1]), range(threads))
    return out


@njit(cache=True, nogil=True)
def count_per_group(offsets, flags):
    """Number of true flags within each group."""
    out = np.zeros(offsets.shape[0] - 1, np.int64)
    for q in range(offsets.shape[0] - 1):
        seg = flags[offsets[q]:offsets[q + 1]]  # a slice: indices from 0, contiguous vector loads
        c = 0
        for j in range(seg.shape[0]):
            c += seg[j]
        out[q] = c
    return out


@njit(cache=True, nogil=True)
def run_starts(values):
    """Rows where a new run of equal values begins (row 0 included), in one pass."""
    n = values.shape[0]
    runs = 1 if n else 0
    for i in range(1, n):
        runs += values[i] != values[i - 1]
    starts = np.empty(runs, np.int64)
    if n:
        starts[0] = 0
    k = 1
    for i in range(1, n):
        if values[i] != values[i - 1]:
            starts[k] = i
            k += 1
    return starts


@njit(cache=True, nogil=True)
def _nonfinite_range(values, lo, hi):
    bad = 0
    seg = values[lo:hi]
    for i in range(seg.shape[0]):
        x = seg[i]
        bad += not (x - x == 0.0)  # false for NaN and for infinities
    return bad


def count_nonfinite(values: np.ndarray, threads: int = 2) -> int:
    """Number of NaN or infinite values of a float array (one threaded pass, no temporary)."""
    n = len(values)
    if threads <= 1 or n < 1_000_000:
        return int(_nonfinite_range(values, 0, n))
    from .threads import run_parallel

    bounds = np.linspace(0, n, threads + 1).astype(np.int64)
    return int(sum(run_parallel(lambda j: _nonfinite_range(values, bounds[j], bounds[j + 1]), range(threads))))
