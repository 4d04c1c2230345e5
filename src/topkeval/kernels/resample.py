"""Resampling for the comparison layer: bootstrap sums, random sign flips, permuted ranges.

:func:`resampled_sums` resamples every column of a call (each model, metric and segment) in one
parallel pass, exactly but without drawing every query of every resample: per-query metric values
repeat (recall@20 of 36,000 queries takes about 40 distinct values), and the queries that share a
value are drawn together as one multinomial or binomial count. Each chunk has its own seed, drawn
up front from the caller's numpy Generator, so the output depends on the seed only, never on the
number of threads.

The values that few queries share are drawn one query at a time (10^9 indices for a bootstrap of
100k distinct values with 10,000 resamples), so the generator matters: numpy's and numba's bounded
integers cost about 20 ns each here. These kernels use SplitMix64
(Steele, Lea & Flood 2014; 64-bit state, passes BigCrush) with Lemire's multiply-shift for
unbiased bounded integers (rejection included), three 21-bit indices per 64-bit word, computed in
blocks of independent words without branches (about 0.7 ns per index here, against 1.5 ns one
32-bit index pair per word at a time), and one 64-bit word per 64 signs, the signs of four values
applied by one lookup in a table of their subset sums.
"""

from __future__ import annotations

import zlib

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


#: A distinct value (or row of values, for a ratio) that this many queries share is drawn as one
#: multinomial count per bootstrap resample (one of numpy's binomial draws, about 80 ns here, costs
#: about as much as 120 indices of :func:`narrow_bootstrap_sums`); rarer ones one query at a time.
HEAVY = 128

#: A distinct |value| that this many queries share has its positive signs counted as the ones among
#: as many random bits (a popcount, a few ns per value); rarer ones are flipped one query at a time
#: (four per table lookup, about 0.15 ns per query).
HEAVY_SIGNS = 32


@njit(cache=True, nogil=True)
def light_bootstrap_sums(seed, values, counts, out):
    """Add to ``out[r]`` the sum of ``counts[r]`` rows of ``values`` (L x c) drawn
    uniformly with replacement (two unbiased 32-bit bounded integers per SplitMix64 output,
    Lemire's rejection; two running sums per column, so that the additions do not wait on each other)."""
    L, c = values.shape
    two = c >= 2
    state = uint64(seed)
    bound = uint64(L)
    threshold = (uint64(2**32) - bound) % bound
    mask = uint64(0xFFFFFFFF)
    shift = uint64(32)
    for r in range(out.shape[0]):
        need = counts[r]
        a0 = b0 = a1 = b1 = 0.0
        while need > 0:
            state += _GOLDEN
            z = _mix(state)
            m1 = (z & mask) * bound
            m2 = (z >> shift) * bound
            ok1 = (m1 & mask) >= threshold
            ok2 = need > 1 and (m2 & mask) >= threshold
            if ok1:
                k = m1 >> shift
                a0 += values[k, 0]
                if two:
                    a1 += values[k, 1]
                    for j in range(2, c):
                        out[r, j] += values[k, j]
                need -= 1
            if ok2:
                k = m2 >> shift
                b0 += values[k, 0]
                if two:
                    b1 += values[k, 1]
                    for j in range(2, c):
                        out[r, j] += values[k, j]
                need -= 1
        out[r, 0] += a0 + b0
        if two:
            out[r, 1] += a1 + b1


#: Up to this many rare values (rows), :func:`narrow_bootstrap_sums` takes three 21-bit indices from
#: each random word (rejecting fewer than 1 in 8); more, :func:`light_bootstrap_sums` two 32-bit ones.
NARROW = 1 << 18


#: Random words per block of :func:`narrow_bootstrap_sums` (3 x 64 candidate indices).
_BLOCK = 64


@njit(cache=True, nogil=True)
def narrow_bootstrap_sums(seed, values, counts, out):
    """:func:`light_bootstrap_sums` for at most :data:`NARROW` rows: three unbiased 21-bit bounded
    integers per SplitMix64 output (Lemire's multiply-shift with rejection). While a resample needs
    at least 3 x 64 more draws, they go by blocks of 64 random words without a branch (a rejected
    index points at a row of 0 appended to the values, and is not counted; the words of a block
    computed from the counter, independently of each other: the compiler runs them side by side),
    then one at a time until the count is reached. The rows drawn depend on the seed and the counts
    only, not on the number of columns: a second column of ones (a weighted mean with weights of
    one) leaves the first one's sums as they were."""
    L, C = values.shape
    padded = np.zeros((L + 1, C))
    padded[:L] = values
    column = padded[:, 0].copy()
    state = uint64(seed)
    bound = uint64(L)
    bits = uint64(21)
    mask = uint64((1 << 21) - 1)
    threshold = (uint64(1 << 21) - bound) % bound
    twice = uint64(42)
    index = np.empty(3 * _BLOCK, np.uint64)
    acc = np.empty((4, C))
    for r in range(out.shape[0]):
        need = counts[r]
        acc[:] = 0.0
        while need >= 3 * _BLOCK:
            accepted = 0
            for k in range(_BLOCK):
                z = _mix(state + uint64(k + 1) * _GOLDEN)
                m1 = (z & mask) * bound
                m2 = ((z >> bits) & mask) * bound
                m3 = ((z >> twice) & mask) * bound
                ok1 = (m1 & mask) >= threshold
                ok2 = (m2 & mask) >= threshold
                ok3 = (m3 & mask) >= threshold
                index[3 * k] = (m1 >> bits) if ok1 else bound
                index[3 * k + 1] = (m2 >> bits) if ok2 else bound
                index[3 * k + 2] = (m3 >> bits) if ok3 else bound
                accepted += ok1 + ok2 + ok3
            state += uint64(_BLOCK) * _GOLDEN
            # four running sums per column, so that the additions do not wait on each other
            if C == 1:  # the common case, in registers (the same sums as the loop below)
                a = acc[0, 0]
                b = acc[1, 0]
                c = acc[2, 0]
                d = acc[3, 0]
                for k in range(0, 3 * _BLOCK, 4):
                    a += column[index[k]]
                    b += column[index[k + 1]]
                    c += column[index[k + 2]]
                    d += column[index[k + 3]]
                acc[0, 0] = a
                acc[1, 0] = b
                acc[2, 0] = c
                acc[3, 0] = d
                need -= accepted
                continue
            for j in range(C):
                a = acc[0, j]
                b = acc[1, j]
                c = acc[2, j]
                d = acc[3, j]
                for k in range(0, 3 * _BLOCK, 4):
                    a += padded[index[k], j]
                    b += padded[index[k + 1], j]
                    c += padded[index[k + 2], j]
                    d += padded[index[k + 3], j]
                acc[0, j] = a
                acc[1, j] = b
                acc[2, j] = c
                acc[3, j] = d
            need -= accepted
        while need > 0:
            state += _GOLDEN
            m = (_mix(state) & mask) * bound
            if (m & mask) >= threshold:
                for j in range(C):
                    acc[0, j] += padded[m >> bits, j]
                need -= 1
        for j in range(C):
            out[r, j] += (acc[0, j] + acc[1, j]) + (acc[2, j] + acc[3, j])


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> uint64(1)) & uint64(0x5555555555555555))
    x = (x & uint64(0x3333333333333333)) + ((x >> uint64(2)) & uint64(0x3333333333333333))
    x = (x + (x >> uint64(4))) & uint64(0x0F0F0F0F0F0F0F0F)
    return (x * uint64(0x0101010101010101)) >> uint64(56)


@njit(cache=True, nogil=True)
def sign_sums(seed, heavy, counts, table, total, out):
    """Add to ``out[r]`` the sum of every query's value with an independent fair sign: ``counts[k]``
    queries of value ``heavy[k]`` (their positive signs counted as the ones among ``counts[k]``
    random bits, a binomial draw exactly) and one query of each rarer value, these in groups of
    four: ``table[g, s]`` is the sum of the values of group g whose bit is set in the nibble s
    (:func:`subset_sums`), so that four signs cost one lookup, and ``sum(s v) = 2 sum(v: s = +1) -
    total`` (``total``: the sum of these values)."""
    H = heavy.shape[0]
    G = table.shape[0]
    state = uint64(seed)
    one = uint64(1)
    nibble = uint64(15)
    for r in range(out.shape[0]):
        acc = 0.0
        buffer = uint64(0)
        left = 0  # random bits left in buffer
        for k in range(H):
            need = counts[k]
            positive = 0
            while need > 0:
                if left == 0:
                    state += _GOLDEN
                    buffer = _mix(state)
                    left = 64
                take = min(need, left)
                if take == 64:
                    positive += _popcount(buffer)
                    buffer = uint64(0)
                else:
                    positive += _popcount(buffer & ((one << uint64(take)) - one))
                    buffer >>= uint64(take)
                left -= take
                need -= take
            acc += (2.0 * positive - counts[k]) * heavy[k]
        # 16 groups (64 signs) per random word; four running sums, so that the additions do not wait on each other
        s0 = s1 = s2 = s3 = 0.0
        g = 0
        while g + 16 <= G:
            state += _GOLDEN
            bits = _mix(state)
            for j in range(0, 16, 4):
                s0 += table[g + j, (bits >> uint64(4 * j)) & nibble]
                s1 += table[g + j + 1, (bits >> uint64(4 * j + 4)) & nibble]
                s2 += table[g + j + 2, (bits >> uint64(4 * j + 8)) & nibble]
                s3 += table[g + j + 3, (bits >> uint64(4 * j + 12)) & nibble]
            g += 16
        if g < G:
            state += _GOLDEN
            bits = _mix(state)
            for j in range(G - g):
                s0 += table[g + j, (bits >> uint64(4 * j)) & nibble]
        if G:
            acc += 2.0 * ((s0 + s1) + (s2 + s3)) - total
        out[r] += acc


_NIBBLES = ((np.arange(16)[:, None] >> np.arange(4)) & 1).astype(np.float64)  # 16 x 4: the bits of 0..15


def subset_sums(values: np.ndarray) -> np.ndarray:
    """The values in groups of four (the last padded with 0) and, for each group g and nibble s,
    the sum of the group's values whose bit is set in s: a (ceil(len / 4), 16) table."""
    groups = np.zeros(-(-len(values) // 4) * 4)
    groups[:len(values)] = values
    return np.ascontiguousarray(groups.reshape(-1, 4) @ _NIBBLES.T)


def _split(X: np.ndarray, heavy_from: int):
    """The distinct rows of ``X`` (n x c) shared by at least ``heavy_from`` queries, their counts,
    and the rows of the other queries (each query once)."""
    if X.shape[1] == 1:  # one sort: the runs of equal values are the distinct values, the rare ones in order
        xs = np.sort(X[:, 0])
        starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1]))) if len(xs) else np.zeros(0, np.int64)
        counts = np.diff(np.append(starts, len(xs)))
        heavy = counts >= heavy_from
        light = xs[np.repeat(~heavy, counts)][:, None]
        return np.ascontiguousarray(xs[starts[heavy]][:, None]), counts[heavy], np.ascontiguousarray(light)
    values, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    heavy = counts >= heavy_from
    light = X[~heavy[inverse.ravel()]]
    # in value order: the resamples do not depend on the order of the queries (nor of the rows that hold them)
    light = np.ascontiguousarray(light[np.lexsort(light.T[::-1])] if len(light) else light)
    return np.ascontiguousarray(values[heavy]), counts[heavy], light


def _key_text(key) -> str:
    """A block's key as text, each value by its str(): 3 and numpy's int64(3) (a segment from pandas
    or from Spark) give the same seeds, whatever numpy's repr."""
    if isinstance(key, (tuple, list)):
        return "(" + "\x1f".join(_key_text(k) for k in key) + ")"
    return str(key)


def resampled_sums(blocks: list, n_resamples: int, rng: np.random.Generator, kind: str, keys=None) -> list:
    """For each block (an n x c array, its own n), ``n_resamples`` resampled column sums (n_resamples x c).

    ``kind="bootstrap"``: the block's rows drawn n times with replacement (each resample the sum of
    c_i x row_i, c multinomial); ``kind="signs"``: each row (c = 1) multiplied by a random sign.
    Exact in distribution, and cheaper than drawing n indices per resample: the queries that share
    a value are drawn together, as one multinomial count over the distinct values (bootstrap) or
    one count of positive signs per value, the ones among as many random bits (sign flips; a value
    of 0 contributes nothing); only the values shared by fewer than :data:`HEAVY` (:data:`HEAVY_SIGNS`)
    queries are drawn one query at a time, by the compiled kernels above. The rows of one block are
    resampled jointly (a weighted mean's numerator and denominator); blocks independently of each
    other. Shared and rare values alike are taken in value order, so that the resamples do not
    depend on the order of the queries. Every chunk of resamples has its own seed, from one draw of
    ``rng``, its block's key (``keys``: one hashable per block, such as its segment, model and
    metric; by default its place in ``blocks``) and its place: the output depends on the seed and
    the key only, never on the number of threads nor, with keys, on the other blocks of the call.
    """
    return resampled_passes([(blocks, kind, keys)], n_resamples, rng)[0]


def resampled_passes(passes: list, n_resamples: int, rng: np.random.Generator) -> list:
    """:func:`resampled_sums` of each ``(blocks, kind, keys)`` of ``passes``, in one parallel pass
    (the longest chunks first, so that no thread waits at the end of one kind for the next): the
    same numbers as calling it for each in turn with ``rng``."""
    from ..progress import step
    from .threads import run_parallel

    outs, tasks, kinds = [], [], []
    for blocks, kind, keys in passes:
        out, planned = _planned(blocks, n_resamples, rng, kind, keys)
        outs.append(out)
        tasks += planned
        if planned:
            kinds.append("bootstrap" if kind == "bootstrap" else "sign-flip")
    tasks.sort(key=lambda t: -t[-1])  # by work, the largest first
    from .jit import first_calls

    used = {sign_sums if t[0] == "signs" else narrow_bootstrap_sums if len(t[4]) <= NARROW else light_bootstrap_sums
            for t in tasks if t[0] == "signs" or len(t[4])}
    with step(" and ".join(dict.fromkeys(kinds)) + " resamples", total=len(tasks)) as bar, first_calls(*used):
        def counted(task):
            _resample(*task[:-1])
            bar.advance()

        run_parallel(counted, tasks)
    return outs


def _planned(blocks: list, n_resamples: int, rng: np.random.Generator, kind: str, keys) -> tuple[list, list]:
    """The output arrays of :func:`resampled_sums` and its chunks: ``(kind, part of the output,
    values, counts, light, n, seed of the multinomial, seed of the kernel, work)`` each."""
    out = [np.zeros((n_resamples, b.shape[1])) for b in blocks]
    chunks_of = []
    for i, X in enumerate(blocks):
        X = np.ascontiguousarray(X, dtype=np.float64)
        n = X.shape[0]
        if n == 0:
            continue
        if kind == "signs":
            X = np.abs(X[:, :1])
            X = X[X[:, 0] != 0]
        values, counts, light = _split(X, HEAVY_SIGNS if kind == "signs" else HEAVY)
        work = len(counts) * HEAVY + len(light)  # per resample, in uniform draws
        if kind == "signs":  # the rare values as the subset sums of their groups of four, and their sum
            light = (subset_sums(light[:, 0]), float(light[:, 0].sum()))
        # the chunks depend on the sizes only (never on the threads): a seed gives the same numbers everywhere
        chunks = max(1, min(16, n_resamples * work // 2_000_000))
        edges = np.linspace(0, n_resamples, chunks + 1).astype(int)
        for a, b in zip(edges[:-1], edges[1:]):
            if b > a:
                chunks_of.append((i, n, values, counts, light, a, b, work * (b - a)))
    # each chunk's seeds from the caller's generator, the block's key and the chunk's place: a block's
    # resamples do not depend on the other blocks of the call (which metrics, models or segments, in what order)
    base = int(rng.integers(0, 2**63 - 1))
    tasks = []
    for i, n, values, counts, light, a, b, work in chunks_of:
        key = i if keys is None else zlib.crc32(_key_text(keys[i]).encode())
        s1, s2 = (int(x) for x in np.random.SeedSequence([base, key, a]).generate_state(2, np.uint64) >> np.uint64(1))
        tasks.append((kind, out[i][a:b], values, counts, light, n, s1, s2, work))
    return out, tasks


def _resample(kind: str, part: np.ndarray, values, counts, light, n: int, s1: int, s2: int) -> None:
    """Add one chunk's resampled sums to ``part`` (its rows of the output)."""
    if kind == "bootstrap":
        # the light rows as one last category: its count is how many draws fall among them
        p = np.append(counts, len(light)) / n
        drawn = np.random.default_rng(s1).multinomial(n, p, size=len(part))
        if len(counts):
            part += drawn[:, :-1] @ values
        if len(light):
            draws = narrow_bootstrap_sums if len(light) <= NARROW else light_bootstrap_sums
            draws(s2, light, drawn[:, -1].astype(np.int64), part)
    else:
        table, total = light
        sign_sums(s2, np.ascontiguousarray(values[:, 0]), counts.astype(np.int64), table, total, part[:, 0])
