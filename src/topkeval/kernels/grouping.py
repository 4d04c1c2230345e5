"""Grouping rows by query in O(n), without sorting the rows: query codes, then a radix partition.

Rows that arrive grouped (each query one run of rows) are used as they are. Otherwise the query
ids become integer codes in ascending order of id (the id minus the smallest for dense integer
ids, a presence table for sparser ones, a sort of the distinct ids for the rest), and every column
is moved to its grouped place in two passes of a radix partition (:class:`RadixGrouping`): first
into a few hundred buckets of consecutive codes (few write streams, so the writes stay in cache),
then, bucket by bucket and in place, into its query's rows (a bucket's rows fit in cache). A plain
counting sort would scatter each row to one of Q places at random (one cache miss per row and
column, and worse as Q grows); a gather through a permutation would read at random instead.
Both passes are stable, so rows keep their input order within a query (ties="first" relies on it).
"""

from __future__ import annotations

import numpy as np

from . import vectorised
from .jit import kernel, runs_compiled, use_vectorised

#: About this many rows per radix bucket (their columns stay in the second pass's cache).
BUCKET_ROWS = 1 << 17

#: Fewer rows than this per thread are not worth a thread.
THREAD_ROWS = 500_000


@kernel(outputs=('codes',))
def _offset_range(values, low, codes, lo, hi):
    vs = values[lo:hi]
    cs = codes[lo:hi]
    for i in range(vs.shape[0]):
        cs[i] = vs[i] - low


def offset_codes(values: np.ndarray, low: int, threads: int | None = None) -> np.ndarray:
    """``values - low`` as int32 codes (integer ids in a range shorter than 2**31), threaded."""
    from .threads import default_threads, row_ranges, run_parallel

    codes = np.empty(len(values), np.int32)
    parts = max(1, min(threads or default_threads(), len(values) // THREAD_ROWS))
    run_parallel(lambda r: _offset_range(values, low, codes, r[0], r[1]), row_ranges(len(values), parts))
    return codes


@kernel
def ranked_codes(values, low, span):
    """Codes (int32) in ascending order of integer ids within [low, low + span), and the ids present.

    Two passes with a table of ``span`` entries: mark the ids present, then number them in order.
    """
    rank = np.zeros(span, np.int32)
    for i in range(values.shape[0]):
        rank[values[i] - low] = 1
    present = 0
    for slot in range(span):
        if rank[slot]:
            rank[slot] = present
            present += 1
        else:
            rank[slot] = -1
    ids = np.empty(present, np.int64)
    for slot in range(span):
        if rank[slot] >= 0:
            ids[rank[slot]] = low + slot
    codes = np.empty(values.shape[0], np.int32)
    for i in range(values.shape[0]):
        codes[i] = rank[values[i] - low]
    return codes, ids


@kernel
def _histograms(codes, shift, lo, hi, n_buckets, n_groups):
    """Rows per bucket (code >> shift) and per code, over rows lo..hi."""
    buckets = np.zeros(n_buckets, np.int64)
    groups = np.zeros(n_groups, np.int64)
    cs = codes[lo:hi]
    for i in range(cs.shape[0]):
        c = cs[i]
        buckets[c >> shift] += 1
        groups[c] += 1
    return buckets, groups


@kernel(outputs=('cursor', 'out'))
def _to_buckets(codes, values, shift, lo, hi, cursor, out):
    """First pass: rows lo..hi to their bucket's next free place (``cursor`` per bucket)."""
    cs = codes[lo:hi]
    vs = values[lo:hi]
    for i in range(cs.shape[0]):
        x = cs[i] >> shift
        p = cursor[x]
        cursor[x] = p + 1
        out[p] = vs[i]


@kernel(outputs=('out', 'cursor'))
def _to_groups(bucketed_codes, out, starts, b0, b1, cursor):
    """Second pass, in place: the rows of buckets b0..b1 of ``out`` to their group's place.

    A bucket's groups occupy exactly the bucket's own rows, so each bucket is copied to a small
    buffer (it stays in cache) and written back in group order (``cursor``: next row per code).
    """
    longest = 0
    for x in range(b0, b1):
        longest = max(longest, starts[x + 1] - starts[x])
    buffer = np.empty_like(out[:longest])
    for x in range(b0, b1):
        lo = starts[x]
        size = starts[x + 1] - lo
        rows = out[lo:lo + size]
        cs = bucketed_codes[lo:lo + size]
        for i in range(size):
            buffer[i] = rows[i]
        for i in range(size):
            c = cs[i]
            p = cursor[c]
            cursor[c] = p + 1
            out[p] = buffer[i]


class RadixGrouping:
    """Moves columns of rows into query order: rows of code c at ``offsets[c]:offsets[c + 1]``.

    Parameters
    ----------
    codes : ndarray of int32 or int64
        The query code of each row, 0 .. n_groups - 1.
    n_groups : int
        Number of codes.
    threads : int
        Threads for both passes (rows split for the first, buckets for the second).

    Examples
    --------
    >>> import numpy as np
    >>> g = RadixGrouping(np.array([1, 0, 1, 0], np.int32), 2, threads=1)
    >>> g.offsets.tolist(), g.apply(np.array([10., 20., 30., 40.])).tolist()
    ([0, 2, 4], [20.0, 40.0, 10.0, 30.0])
    """

    def __init__(self, codes: np.ndarray, n_groups: int, threads: int = 1):
        from .threads import row_ranges, run_parallel

        n = len(codes)
        self.codes: np.ndarray | None = codes
        self.threads = threads = max(1, min(threads, n // THREAD_ROWS or 1))
        per_bucket = max(1.0, n_groups * BUCKET_ROWS / max(n, 1))  # codes per bucket
        self.shift = shift = int(np.ceil(np.log2(per_bucket)))
        n_buckets = (max(n_groups - 1, 0) >> shift) + 1
        self.rows = row_ranges(n, threads)
        parts = run_parallel(lambda r: _histograms(codes, shift, r[0], r[1], n_buckets, n_groups), self.rows)
        per_thread = np.array([b for b, _ in parts]).reshape(threads, n_buckets)
        group_counts = np.sum([c for _, c in parts], axis=0)
        self.offsets = np.zeros(n_groups + 1, np.int64)
        np.cumsum(group_counts, out=self.offsets[1:])
        starts = np.zeros(n_buckets + 1, np.int64)
        np.cumsum(per_thread.sum(axis=0), out=starts[1:])
        # thread t writes a bucket's rows after those of threads 0..t-1: the partition is stable
        self.cursors = starts[:-1] + np.cumsum(per_thread, axis=0) - per_thread
        # second pass: bucket ranges of about equal rows
        self.starts = starts
        cuts = np.searchsorted(starts, np.linspace(0, n, threads + 1)[1:-1])
        self.spans = [(int(a), int(z)) for a, z in zip([0, *cuts], [*cuts, n_buckets]) if z > a]
        self.bucketed_codes: np.ndarray | None = self._first_pass(codes)

    def _first_pass(self, values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        from .threads import run_parallel

        out = np.empty(len(values), values.dtype) if out is None else out
        run_parallel(lambda t: _to_buckets(self.codes, values, self.shift, *self.rows[t], self.cursors[t].copy(), out),
                     range(self.threads))
        return out

    def _second_pass(self, bucketed: np.ndarray) -> np.ndarray:
        from .threads import run_parallel

        cursor = self.offsets[:-1].copy()  # each code's rows are written by one thread only
        run_parallel(lambda span: _to_groups(self.bucketed_codes, bucketed, self.starts, span[0], span[1], cursor),
                     self.spans)
        return bucketed

    def apply(self, values: np.ndarray) -> np.ndarray:
        """The column ``values`` (one value per row) in grouped order."""
        return self.apply_all([values])[0]

    def apply_all(self, columns: list, release: bool = False) -> list:
        """Each column in grouped order (new arrays). ``release=True`` frees the query codes before the
        last column's second pass (lower peak memory; the grouping cannot be applied again)."""
        grouped = []
        for i, values in enumerate(columns):
            bucketed = self._first_pass(np.ascontiguousarray(values))
            if release and i == len(columns) - 1:
                self.codes = None
            grouped.append(self._second_pass(bucketed))
        if release:
            self.bucketed_codes = None
        return grouped


@kernel
def sorted_positions(haystack, needles):
    """Position of each needle in ``haystack``, or -1; both ascending (a merge, O(n + m)).

    Examples
    --------
    >>> sorted_positions(np.array([2, 5, 9]), np.array([1, 5, 9, 10])).tolist()
    [-1, 1, 2, -1]
    """
    out = np.full(needles.shape[0], -1, np.int64)
    j = 0
    for i in range(needles.shape[0]):
        x = needles[i]
        while j < haystack.shape[0] and haystack[j] < x:
            j += 1
        if j < haystack.shape[0] and haystack[j] == x:
            out[i] = j
    return out


@kernel(vectorised=vectorised.per_group)
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


@kernel(vectorised=vectorised.count_runs)
def count_runs(values, stop_above):
    """Runs of equal values, counted until there are more than ``stop_above`` (a shuffled column
    is recognised after a few rows)."""
    runs = 1 if values.shape[0] else 0
    for i in range(1, values.shape[0]):
        runs += values[i] != values[i - 1]
        if runs > stop_above:
            break
    return runs


@kernel(vectorised=vectorised.run_starts_range)
def _run_starts_range(values, lo, hi):
    """Rows ``lo <= i < hi`` where a new run of equal values begins (row 0 included when ``lo`` is 0).

    The buffer is as long as the range but only its first pages are ever written (the operating
    system commits memory on first touch), so the pass costs no more memory than its result. The
    branch is taken once per run: runs are long where this is called (a grouped query column), and a
    predicted branch beats writing every row.
    """
    seg = values[lo:hi]  # a slice: indices from 0 (with values[i - 1] over lo..hi the loop ran 2.5x slower)
    n = seg.shape[0]
    buffer = np.empty(n + 1, np.int64)
    runs = 0
    if n > 0 and (lo == 0 or values[lo] != values[lo - 1]):
        buffer[0] = lo
        runs = 1
    for i in range(1, n):
        if seg[i] != seg[i - 1]:
            buffer[runs] = lo + i
            runs += 1
    return buffer[:runs].copy()


def run_starts(values: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Rows where a new run of equal values begins (row 0 included), in one pass split over threads.

    >>> run_starts(np.array([4, 4, 7, 7, 7, 2])).tolist()
    [0, 2, 5]
    """
    from .threads import default_threads, row_ranges, run_parallel

    parts = max(1, min(threads or default_threads(), len(values) // THREAD_ROWS))
    found = run_parallel(lambda r: _run_starts_range(values, r[0], r[1]), row_ranges(len(values), parts))
    return found[0] if len(found) == 1 else np.concatenate(found)


#: Multiplier of the Fibonacci hash of the duplicate check (2**64 / the golden ratio).
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@kernel
def _duplicates_range(offsets, keys, q0, q1):
    """(repeated rows, first repeated row or -1) among queries q0..q1: a key seen earlier in its query.

    Each query's keys go into a small open-addressing table (Fibonacci hashing, linear probing) as
    large as the next power of two above twice the query; a slot belongs to the query whose stamp it
    holds, so the table is never cleared. Short queries compare every pair instead.
    """
    longest = 1
    for q in range(q0, q1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    size = 1
    while size < 2 * longest:
        size *= 2
    table = np.empty(size, np.int64)
    stamp = np.zeros(size, np.int64)
    count = 0
    first = -1
    for q in range(q0, q1):
        lo = offsets[q]
        seg = keys[lo:offsets[q + 1]]
        n = seg.shape[0]
        if n <= 16:
            for i in range(1, n):
                for j in range(i):
                    if seg[j] == seg[i]:
                        count += 1
                        if first < 0:
                            first = lo + i
                        break
            continue
        bits = 1
        while (1 << bits) < 2 * n:
            bits += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        for i in range(n):
            key = seg[i]
            slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
            while stamp[slot] == q + 1 and table[slot] != key:
                slot = (slot + 1) & mask
            if stamp[slot] == q + 1:
                count += 1
                if first < 0:
                    first = lo + i
            else:
                stamp[slot] = q + 1
                table[slot] = key
    return count, first


#: Keys below this many (codes of distinct ids: dense) are looked up in one array indexed by key (4
#: bytes each, in a core's cache) instead of a hash table per query.
DENSE_KEYS = 1 << 19


def _dense(*keys: np.ndarray) -> int:
    """The size of the array indexed by key that :func:`count_duplicates` and :func:`judge` use when
    every key is in ``[0, DENSE_KEYS)``; else 0 (they hash)."""
    hi = 0
    for k in keys:
        if not len(k):
            continue
        low, high = _range(k) if runs_compiled(len(k)) else (k.min(), k.max())  # one pass, or numpy's two
        if low < 0:
            return 0
        hi = max(hi, int(high) + 1)
    return hi if hi <= DENSE_KEYS else 0


@kernel
def _range(keys):
    """``(min, max)`` of ``keys`` (not empty), in one pass."""
    low = keys[0]
    high = keys[0]
    for k in keys:
        if k < low:
            low = k
        elif k > high:
            high = k
    return low, high


@kernel
def _duplicates_dense(offsets, keys, q0, q1, size):
    """:func:`_duplicates_range` of keys in ``[0, size)``: each key's last query, in one array."""
    stamp = np.zeros(size, np.int32)
    count = 0
    first = -1
    for q in range(q0, q1):
        mark = q - q0 + 1
        for i in range(offsets[q], offsets[q + 1]):
            key = keys[i]
            if stamp[key] == mark:
                count += 1
                if first < 0:
                    first = i
            else:
                stamp[key] = mark
    return count, first


def _quiet(kernel_fn, *args):
    """Run a hashing kernel: interpreted, numpy warns when the 64-bit products wrap, as they must."""
    with np.errstate(over="ignore"):
        return kernel_fn(*args)


def count_duplicates(offsets: np.ndarray, keys: np.ndarray, threads: int | None = None) -> tuple[int, int]:
    """(rows whose key repeats an earlier key of their group, the first such row or -1), threaded.

    >>> count_duplicates(np.array([0, 3, 5]), np.array([7, 8, 7, 7, 9]))
    (1, 2)
    """
    from .threads import default_threads, run_parallel

    keys = np.ascontiguousarray(keys, dtype=np.int64)
    if use_vectorised(len(keys)):  # the kernels are not compiled (yet): numpy
        return vectorised.duplicates(offsets, keys)
    Q = len(offsets) - 1
    parts = max(1, min(threads or default_threads(), len(keys) // THREAD_ROWS))
    bounds = np.unique(np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)).clip(0, Q))
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a] or [(0, Q)]
    size = _dense(keys)
    if size:
        found = run_parallel(lambda r: _duplicates_dense(offsets, keys, r[0], r[1], size), ranges)
    else:
        found = run_parallel(lambda r: _quiet(_duplicates_range, offsets, keys, r[0], r[1]), ranges)
    count = sum(int(c) for c, _ in found)
    first = next((int(f) for _, f in found if f >= 0), -1)
    return count, first


@kernel(outputs=("grades", "found"))
def _judge_range(offsets, items, j_offsets, j_items, j_grades, q0, q1, grades, found):
    """For each row of queries q0..q1, the grade of its item among its query's judged items (a
    small hash table per query, as in :func:`_duplicates_range`); ``found`` says if it was judged."""
    longest = 1
    for q in range(q0, q1):
        longest = max(longest, j_offsets[q + 1] - j_offsets[q])
    size = 1
    while size < 2 * longest:
        size *= 2
    table = np.empty(size, np.int64)
    where = np.empty(size, np.int64)
    stamp = np.zeros(size, np.int64)
    for q in range(q0, q1):
        jlo = j_offsets[q]
        m = j_offsets[q + 1] - jlo
        bits = 1
        while (1 << bits) < 2 * m:
            bits += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        for t in range(jlo, jlo + m):
            key = j_items[t]
            slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
            while stamp[slot] == q + 1 and table[slot] != key:
                slot = (slot + 1) & mask
            stamp[slot] = q + 1
            table[slot] = key
            where[slot] = t
        for i in range(offsets[q], offsets[q + 1]):
            key = items[i]
            grades[i] = 0.0
            found[i] = False
            if m == 0:
                continue
            slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
            while stamp[slot] == q + 1:
                if table[slot] == key:
                    grades[i] = j_grades[where[slot]]
                    found[i] = True
                    break
                slot = (slot + 1) & mask


@kernel(outputs=("grades", "found"))
def _judge_dense(offsets, items, j_offsets, j_items, j_grades, q0, q1, size, grades, found):
    """:func:`_judge_range` of items in ``[0, size)``: each query's judged items marked in one array
    (their row of the judgments), looked up, then unmarked."""
    where = np.full(size, -1, np.int64)
    for q in range(q0, q1):
        for t in range(j_offsets[q], j_offsets[q + 1]):
            where[j_items[t]] = t
        for i in range(offsets[q], offsets[q + 1]):
            t = where[items[i]]
            if t >= 0:
                grades[i] = j_grades[t]
                found[i] = True
            else:
                grades[i] = 0.0
                found[i] = False
        for t in range(j_offsets[q], j_offsets[q + 1]):
            where[j_items[t]] = -1


def judge(offsets: np.ndarray, items: np.ndarray, j_offsets: np.ndarray, j_items: np.ndarray,
          j_grades: np.ndarray, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(grade, judged) of every row: its item looked up among the judged items of its query (query q
    of the rows is query q of the judgments); 0 and False when the item has no judgment.

    >>> judge(np.array([0, 2, 3]), np.array([5, 6, 5]), np.array([0, 1, 1]), np.array([6]), np.array([2.0]))
    (array([0., 2., 0.]), array([False,  True, False]))
    """
    from .threads import default_threads, run_parallel

    grades = np.empty(len(items), np.float64)
    found = np.empty(len(items), np.bool_)
    Q = len(offsets) - 1
    parts = max(1, min(threads or default_threads(), len(items) // THREAD_ROWS))
    bounds = np.unique(np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)).clip(0, Q))
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a] or [(0, Q)]
    keys = np.ascontiguousarray(items, np.int64)
    judged = np.ascontiguousarray(j_items, np.int64)
    values = np.ascontiguousarray(j_grades, np.float64)
    size = _dense(keys, judged)
    if size:
        run_parallel(lambda r: _judge_dense(offsets, keys, j_offsets, judged, values, r[0], r[1], size, grades, found),
                     ranges)
    else:
        run_parallel(lambda r: _quiet(_judge_range, offsets, keys, j_offsets, judged, values, r[0], r[1], grades,
                                      found), ranges)
    return grades, found


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@kernel
def _same_bytes(voff, data, a, b):
    la = voff[a + 1] - voff[a]
    if voff[b + 1] - voff[b] != la:
        return False
    pa = voff[a]
    pb = voff[b]
    for t in range(la):
        if data[pa + t] != data[pb + t]:
            return False
    return True


@kernel
def _text_duplicates_range(offsets, voff, data, q0, q1):
    """As :func:`_duplicates_range`, for strings given as Arrow buffers (``voff``: the value offsets,
    ``data``: the UTF-8 bytes): each string is hashed (FNV-1a) and a hash seen before in its query is
    a duplicate only if the bytes are the same, so the answer is exact."""
    longest = 1
    for q in range(q0, q1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    size = 1
    while size < 2 * longest:
        size *= 2
    hashes = np.empty(size, np.uint64)
    rows = np.empty(size, np.int64)
    stamp = np.zeros(size, np.int64)
    count = 0
    first = -1
    for q in range(q0, q1):
        lo = offsets[q]
        n = offsets[q + 1] - lo
        bits = 1
        while (1 << bits) < 2 * n:
            bits += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        for i in range(lo, lo + n):
            h = _FNV_OFFSET
            for t in range(voff[i], voff[i + 1]):
                h = (h ^ np.uint64(data[t])) * _FNV_PRIME
            slot = np.int64((h * _GOLDEN) >> shift)
            repeated = False
            while stamp[slot] == q + 1:
                if hashes[slot] == h and _same_bytes(voff, data, rows[slot], i):
                    repeated = True
                    break
                slot = (slot + 1) & mask
            if repeated:
                count += 1
                if first < 0:
                    first = i
            else:
                stamp[slot] = q + 1
                hashes[slot] = h
                rows[slot] = i
    return count, first


def count_text_duplicates(offsets: np.ndarray, text, threads: int | None = None) -> tuple[int, int]:
    """:func:`count_duplicates` for an Arrow string array, read in place (no Python string objects)."""
    from .arrow import text_buffers
    from .threads import default_threads, run_parallel

    if use_vectorised(len(text)):  # the kernels are not compiled (yet): Arrow hashes, numpy sorts
        return vectorised.text_duplicates(offsets, text)
    voff, data = text_buffers(text)
    voff = voff.astype(np.int64)
    Q = len(offsets) - 1
    parts = max(1, min(threads or default_threads(), len(text) // THREAD_ROWS))
    bounds = np.unique(np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)).clip(0, Q))
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a] or [(0, Q)]
    found = run_parallel(lambda r: _quiet(_text_duplicates_range, offsets, voff, data, r[0], r[1]), ranges)
    return sum(int(c) for c, _ in found), next((int(f) for _, f in found if f >= 0), -1)


@kernel(vectorised=lambda values, lo, hi: vectorised.nonfinite(values[lo:hi]))
def _nonfinite_range(values, lo, hi):
    bad = 0
    seg = values[lo:hi]
    for i in range(seg.shape[0]):
        x = seg[i]
        # false for NaN and for infinities, in every float width: a bound such as float64's largest
        # value would overflow to inf as a float32 (interpreted, numpy casts the bound to x's type),
        # with a warning, and count float32 infinities as finite
        bad += not (abs(x) < np.inf)
    return bad


def count_nonfinite(values: np.ndarray, threads: int | None = None) -> int:
    """Number of NaN or infinite values of a float array (one threaded pass, no temporary)."""
    from .threads import default_threads, row_ranges, run_parallel

    parts = max(1, min(threads or default_threads(), len(values) // THREAD_ROWS))
    return int(sum(run_parallel(lambda r: _nonfinite_range(values, r[0], r[1]), row_ranges(len(values), parts))))
