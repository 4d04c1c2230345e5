"""Resampling kernels for the comparison layer: bootstrap counts and random sign flips.

A chunk of resamples is drawn into a (rows x n) matrix, so that one matrix product with the
(n x P) per-query differences gives the resampled means of every (model, metric) column at once,
with the same resamples for all of them. Each chunk has its own seed, drawn up front from the
caller's numpy Generator, so the output depends on the seed only, never on the number of threads.

A bootstrap of 100k queries with 10,000 resamples draws 10^9 indices, so the generator matters:
numpy's and numba's bounded integers cost about 20 ns each here. These kernels use SplitMix64
(Steele, Lea & Flood 2014; 64-bit state, passes BigCrush) with Lemire's multiply-shift for
unbiased bounded integers (rejection included), and one 64-bit word per 64 signs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

_GOLDEN = uint64(0x9E3779B97F4A7C15)
_M1 = uint64(0xBF58476D1CE4E5B9)
_M2 = uint64(0x94D049BB133111EB)


@njit(cache=True, nogil=True, inline="always")
def _mix(z):
    z = (z ^ (z >> uint64(30))) * _M1
    z = (z ^ (z >> uint64(27))) * _M2
    return z ^ (z >> uint64(31))


@njit(cache=True, nogil=True)
def bootstrap_counts(seed, out):
    """Fill ``out`` (rows x n, zeroed) with multinomial counts: each row draws n queries with replacement."""
    rows, n = out.shape
    state = uint64(seed)
    bound = uint64(n)
    threshold = (uint64(2**32) - bound) % bound  # Lemire: reject low parts below this
    for r in range(rows):
        for _ in range(n):
            while True:
                state += _GOLDEN
                x = _mix(state) >> uint64(32)  # 32 random bits
                m = x * bound
                if (m & uint64(0xFFFFFFFF)) >= threshold:
                    break
            out[r, m >> uint64(32)] += 1.0


@njit(cache=True, nogil=True)
def random_signs(seed, out):
    """Fill ``out`` (rows x n) with independent fair signs, +1 or -1."""
    rows, n = out.shape
    state = uint64(seed)
    for r in range(rows):
        i = 0
        while i < n:
            state += _GOLDEN
            bits = _mix(state)
            for j in range(min(64, n - i)):
                out[r, i + j] = 1.0 if (bits >> uint64(j)) & uint64(1) else -1.0
            i += 64


@njit(cache=True, nogil=True)
def permuted_ranges(X, seed, out):
    """The randomized Tukey HSD's null distribution: for each of ``len(out)`` resamples, every row
    of ``X`` (queries x models) permuted across the models (Fisher-Yates, unbiased bounded integers
    as in :func:`bootstrap_counts`), and the largest minus the smallest column mean into ``out``."""
    n, m = X.shape
    state = uint64(seed)
    sums = np.empty(m)
    perm = np.empty(m, np.int64)
    for b in range(out.shape[0]):
        for j in range(m):
            sums[j] = 0.0
        for i in range(n):
            for j in range(m):
                perm[j] = j
            for j in range(m - 1, 0, -1):
                bound = uint64(j + 1)
                threshold = (uint64(2**32) - bound) % bound
                while True:
                    state += _GOLDEN
                    x = _mix(state) >> uint64(32)
                    t = x * bound
                    if (t & uint64(0xFFFFFFFF)) >= threshold:
                        break
                k = t >> uint64(32)
                tmp = perm[j]
                perm[j] = perm[k]
                perm[k] = tmp
            for j in range(m):
                sums[j] += X[i, perm[j]]
        hi = sums[0]
        lo = sums[0]
        for j in range(1, m):
            hi = max(hi, sums[j])
            lo = min(lo, sums[j])
        out[b] = (hi - lo) / n
