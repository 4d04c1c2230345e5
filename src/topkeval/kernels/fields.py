"""Whitespace-separated text files (TREC runs and qrels) split into fields in one pass over their bytes.

:func:`split_fields` reads the raw bytes of a file whose lines hold fields separated by spaces and
tabs and gives, for the fields asked for, ids as integer codes into their distinct values (each
id hashed once from the file's bytes: no Python object per row, no copy of the rows' text) and
numbers as float64. Its rules are those of Python's ``line.strip().split()`` on each line of the
file opened as text (the line-by-line reader of :mod:`topkeval.inputs.trec`), on the files it
accepts: ASCII bytes only, lines ended by ``\\n`` or ``\\r\\n``, fields separated by any number of
spaces and tabs, blank lines and lines whose first field starts with ``#`` skipped. Anything else
(a byte over 127, another control byte, a lone ``\\r``, a line with too few or too many fields, a
number not written as trec_eval's files write numbers) makes it give up (``None``): the caller
then reads the file another way, which accepts it or says which line is wrong.

Numbers follow the grammar ``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`` and are exactly
Python's ``float()`` of the text: a mantissa of at most 2**53 with a power of ten of at most 22
either side is one correctly rounded IEEE multiplication or division of two exact doubles
(Clinger's fast path, the value ``float()`` gives); any other number (17 significant digits, a
large exponent) is marked and parsed by ``float()`` itself afterwards, or, where such numbers are
many (:data:`SLOW_MOST`), the file is given up.

Ids are hashed as the lines are read (:func:`_scan`): an open-addressing table per id field, at
most half full, an id of up to 8 bytes its own tag, and a row whose id equals the row before's (a
query or a run tag, written in runs) not hashed at all. A file of more than :data:`PART_BYTES` is
cut at line ends into parts read on the thread pool (:func:`topkeval.kernels.threads.run_parallel`),
whose distinct ids are then hashed together.
"""

from __future__ import annotations

import numpy as np

from .jit import kernel

#: 10**0 .. 10**22: every power of ten a double holds exactly.
_POWERS = np.array([10.0 ** e for e in range(23)])

#: Bytes per part of a file split on threads of its own (a file of at least twice this is read in parts,
#: as many as there are threads). On a quiet 2-core machine a 32 MB run (1M lines) read in two parts took
#: 0.145 s to evaluate against 0.172 s in one (each part hashes every distinct item, joined after: more
#: CPU time, 0.28 s against 0.23 s measured on a loaded machine, where the second core was not free).
PART_BYTES = 1 << 23

_OK, _SLOW, _BAD = 0, 1, 2

#: Numbers left to ``float()`` beyond which, when they are more than one row in 8 (scores written
#: in full, 17 significant digits, as ``repr`` writes them), the file is given up: ``float()`` row by
#: row would cost more than Arrow's compiled parse of such numbers.
SLOW_MOST = 4096


@kernel
def _number(buf, s, e, powers):
    """``(status, value)`` of the number written in ``buf[s:e]``: status 0 when ``value`` is exactly
    ``float()`` of the text, 1 when the text is a number that ``float()`` must parse, 2 when it is not
    a number of the grammar (see the module docstring)."""
    i = s
    negative = False
    if i < e and (buf[i] == 43 or buf[i] == 45):  # + -
        negative = buf[i] == 45
        i += 1
    mantissa = 0
    exponent = 0
    digits = 0
    exact = True
    while i < e and 48 <= buf[i] <= 57:
        if mantissa < 100_000_000_000_000_000:
            mantissa = mantissa * 10 + (int(buf[i]) - 48)
        else:
            exact = False
        digits += 1
        i += 1
    if i < e and buf[i] == 46:  # .
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            if mantissa < 100_000_000_000_000_000:
                mantissa = mantissa * 10 + (int(buf[i]) - 48)
                exponent -= 1
            else:
                exact = False
            digits += 1
            i += 1
    if digits == 0:
        return _BAD, 0.0
    if i < e and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        sign = 1
        if i < e and (buf[i] == 43 or buf[i] == 45):
            sign = -1 if buf[i] == 45 else 1
            i += 1
        written = 0
        power = 0
        while i < e and 48 <= buf[i] <= 57:
            if power < 100_000:
                power = power * 10 + (int(buf[i]) - 48)
            written += 1
            i += 1
        if written == 0:
            return _BAD, 0.0
        exponent += sign * power
    if i != e:
        return _BAD, 0.0
    if mantissa == 0 and exact:  # every digit zero: a (signed) zero whatever the exponent
        return _OK, -0.0 if negative else 0.0
    if not exact or mantissa > 9_007_199_254_740_992 or exponent > 22 or exponent < -22:
        return _SLOW, 0.0
    value = float(mantissa) * powers[exponent] if exponent >= 0 else float(mantissa) / powers[-exponent]
    return _OK, -value if negative else value


#: Fibonacci hashing's multiplier (2**64 over the golden ratio): spreads a tag over the table's bits.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_BASIS = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

#: ``state`` of :func:`_scan`: the next byte, rows done, numbers left to ``float()``, the outcome.
_AT, _ROWS, _SLOWS, _OUTCOME = 0, 1, 2, 3
#: outcomes: every line read; a line is not one these rules read; the tables must grow first.
_DONE, _GIVE_UP, _GROW = 0, 1, 2


@kernel(outputs=("state", "count", "fill", "previous", "repeats", "codes", "numbers", "slow", "table", "keys",
                  "offsets", "data"))
def _scan(buf, hi, keep, numeric, slots, least, most, bits, powers, state, count, fill, previous, repeats, codes,
          numbers, slow, table, keys, offsets, data):
    """Read the lines of ``buf[state[_AT]:hi]`` into the arrays (see :func:`_split_part`), from a line
    start, until the last line (outcome ``_DONE``), a line these rules do not read (``_GIVE_UP``),
    or a line whose new id would not fit: the table half full, or ``offsets`` or ``data`` full
    (``_GROW``: ``state`` then points at that line's start, to read it again once they have grown).

    Each id field has an open-addressing table (linear probing, at most half full) of codes + 1 (0:
    empty), and per code its tag and length (``keys``): an id of at most 8 bytes is its own tag (its
    bytes as one integer: a lookup reads a slot and a key, nothing else); a longer one is tagged by
    its FNV-1a hash and compared with the distinct ids' bytes, copied next to each other. Slots of
    4 bytes and keys by code keep a table of 50,000 ids in a core's cache. A row whose id equals the
    row before's (a query, a run tag: written in runs) takes its code without a lookup.
    The arrays are never reassigned here (numba keeps them in registers; growing them in this loop
    would cost reference counts on every row)."""
    i = state[_AT]
    rows = state[_ROWS]
    n_slow = state[_SLOWS]
    n_keep = len(keep)
    cap = codes.shape[1] if codes.shape[0] > 0 else numbers.shape[1]
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    while i < hi:
        line = i
        slow_before = n_slow
        field = 0  # fields of this line seen so far
        k = 0  # the next kept field
        comment = False
        while True:
            while i < hi and (buf[i] == 32 or buf[i] == 9):
                i += 1
            if i >= hi:
                break
            c = buf[i]
            if c == 10:
                i += 1
                break
            if c <= 32 or c >= 127:
                if c == 13 and i + 1 < hi and buf[i + 1] == 10:  # "\r\n" ends a line; a lone "\r" gives up
                    i += 2
                    break
                state[_OUTCOME] = _GIVE_UP  # a control byte, or not ASCII
                return
            start = i
            i += 1
            while i < hi:
                c = buf[i]
                if c <= 32 or c >= 127:
                    break
                i += 1
            if field == 0 and buf[start] == 35:  # "#": a comment line, skipped to its end
                comment = True
            if comment:
                continue
            if k < n_keep and keep[k] == field:
                if rows >= cap:  # never (cap bounds the lines), but never a write past the arrays either
                    state[_OUTCOME] = _GIVE_UP
                    return
                j = slots[k]
                if numeric[k]:
                    # the usual number inline ([-]digits[.digits], at most 15 digits), any other by _number
                    t = start
                    negative = buf[t] == 45
                    if negative:
                        t += 1
                    mantissa = 0
                    point = -1
                    while t < i:
                        d = int(buf[t]) - 48
                        if 0 <= d <= 9:
                            mantissa = mantissa * 10 + d
                        elif d == -2 and point < 0:  # "."
                            point = t
                        else:
                            break
                        t += 1
                    digits = i - start - (point >= 0) - negative
                    places = i - point - 1 if point >= 0 else 0
                    if t == i and 0 < digits <= 15 and places <= 22:
                        status = _OK
                        value = float(mantissa) / powers[places]
                        if negative:
                            value = -value
                    else:
                        status, value = _number(buf, start, i, powers)
                    if status == _BAD:
                        state[_OUTCOME] = _GIVE_UP
                        return
                    numbers[j, rows] = value
                    if status == _SLOW:
                        slow[n_slow, 0] = rows
                        slow[n_slow, 1] = j
                        slow[n_slow, 2] = start
                        slow[n_slow, 3] = i
                        n_slow += 1
                        if n_slow > SLOW_MOST and 8 * n_slow > rows:  # float() on most rows: Arrow's reader
                            state[_OUTCOME] = _GIVE_UP
                            return
                else:
                    size = i - start
                    p = previous[j]
                    code = -1
                    # the row before's id first, while that pays (it does for ids written in runs)
                    if p >= 0 and repeats[j] >= 0 and offsets[j, p + 1] - offsets[j, p] == size:
                        at = offsets[j, p]
                        code = p
                        for t in range(size):
                            if buf[start + t] != data[j, at + t]:
                                code = -1
                                break
                        if rows < 4096:  # the first rows say whether ids repeat the row before's
                            repeats[j] += 1 if code >= 0 else -1
                    if code < 0:
                        if size <= 8:
                            tag = np.uint64(0)
                            for t in range(start, i):
                                tag = (tag << np.uint64(8)) | np.uint64(buf[t])
                            mixed = (tag + np.uint64(size)) * _GOLDEN
                        else:
                            tag = _FNV_BASIS
                            for t in range(start, i):
                                tag = (tag ^ np.uint64(buf[t])) * _FNV_PRIME
                            mixed = tag * _GOLDEN
                        slot = np.int64(mixed >> shift)
                        while True:
                            code = np.int64(table[j, slot]) - 1
                            if code < 0:
                                break
                            if keys[j, 2 * code] == tag and keys[j, 2 * code + 1] == np.uint64(size):
                                if size <= 8:
                                    break
                                at = offsets[j, code]
                                for t in range(size):
                                    if buf[start + t] != data[j, at + t]:
                                        code = -1
                                        break
                                if code >= 0:
                                    break
                            code = -1
                            slot = (slot + 1) & mask
                        if code < 0:  # a new id, if it fits
                            n = count[j]
                            if 2 * (n + 1) > (1 << bits) or n + 2 > offsets.shape[1] \
                                    or fill[j] + size > data.shape[1]:
                                state[_AT] = line
                                state[_ROWS] = rows
                                state[_SLOWS] = slow_before
                                state[_OUTCOME] = _GROW
                                return
                            at = fill[j]
                            for t in range(size):
                                data[j, at + t] = buf[start + t]
                            fill[j] = at + size
                            offsets[j, n + 1] = at + size
                            table[j, slot] = n + 1
                            keys[j, 2 * n] = tag
                            keys[j, 2 * n + 1] = np.uint64(size)
                            count[j] = n + 1
                            code = n
                    codes[j, rows] = code
                    previous[j] = code
                k += 1
            field += 1
        if comment or field == 0:
            continue
        if field < least or field > most:
            state[_OUTCOME] = _GIVE_UP
            return
        rows += 1
    state[_AT] = i
    state[_ROWS] = rows
    state[_SLOWS] = n_slow
    state[_OUTCOME] = _DONE


@kernel
def _rehash(keys, count, bits):
    """The tables of :func:`_scan` (one row per id field) built again with ``2 ** bits`` slots from
    the keys of the ``count`` distinct ids of each field."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    table = np.zeros((keys.shape[0], 1 << bits), np.int32)
    for j in range(keys.shape[0]):
        for code in range(count[j]):
            tag = keys[j, 2 * code]
            size = keys[j, 2 * code + 1]
            mixed = (tag + size) * _GOLDEN if size <= 8 else tag * _GOLDEN
            slot = np.int64(mixed >> shift)
            while table[j, slot] != 0:
                slot = (slot + 1) & mask
            table[j, slot] = code + 1
    return table


def _split_part(buf: np.ndarray, lo: int, hi: int, keep: np.ndarray, numeric: np.ndarray, least: int, most: int):
    """The lines of ``buf[lo:hi]`` (``lo`` at a line start, ``hi`` after a line end or at the end of
    the file) read by :func:`_scan`, its arrays grown as it asks. None where it gives up; else
    ``(rows, codes, numbers, slow, labels)``: per id field ``j``, row ``r``'s code ``codes[j, r]``
    into that field's distinct ids ``labels[j]`` (``(offsets, bytes)``); per number field ``j``,
    ``numbers[j, r]``; ``slow``, the (row, number field, start, end) of the numbers that ``float()``
    must parse."""
    slots = np.zeros(len(keep), np.int64)  # each kept field's place among the ids, or among the numbers
    slots[numeric] = np.arange(int(numeric.sum()))
    slots[~numeric] = np.arange(int((~numeric).sum()))
    n_ids, n_numbers = int((~numeric).sum()), int(numeric.sum())
    # lines, at most: a line of f >= least fields takes 2 f - 1 bytes and its line end (the last, none);
    # arrays of that many rows cost no memory where no row is written (np.empty touches no page)
    cap = (hi - lo + 1) // (2 * max(least, 1)) + 1
    codes = np.empty((n_ids, cap), np.int32)
    numbers = np.empty((n_numbers, cap), np.float64)
    slow = np.empty((cap * n_numbers, 4), np.int64)
    state = np.array([lo, 0, 0, _DONE], np.int64)
    count, fill, previous = np.zeros(n_ids, np.int64), np.zeros(n_ids, np.int64), np.full(n_ids, -1, np.int64)
    repeats = np.zeros(n_ids, np.int64)
    bits = 10
    table = np.zeros((n_ids, 1 << bits), np.int32)
    offsets = np.zeros((n_ids, 1 << 10), np.int64)
    keys = np.zeros((n_ids, 2 << 10), np.uint64)
    data = np.empty((n_ids, 1 << 13), np.uint8)
    while True:
        _quiet(_scan, buf, hi, keep, numeric, slots, least, most, bits, _POWERS, state, count, fill, previous, repeats,
               codes, numbers, slow, table, keys, offsets, data)
        if state[_OUTCOME] != _GROW:
            break
        grown = False
        if 2 * (count.max() + 1) > (1 << bits):
            bits += 1
            table = _quiet(_rehash, keys, count, bits)
            grown = True
        if count.max() + 2 > offsets.shape[1]:
            offsets = np.concatenate([offsets, np.zeros_like(offsets)], axis=1)
            keys = np.concatenate([keys, np.zeros_like(keys)], axis=1)
            grown = True
        if not grown:  # then an id's bytes did not fit
            data = np.concatenate([data, np.empty_like(data)], axis=1)
    if state[_OUTCOME] == _GIVE_UP:
        return None
    labels = [(offsets[j, :count[j] + 1], data[j, :fill[j]]) for j in range(n_ids)]
    return int(state[_ROWS]), codes, numbers, slow[:int(state[_SLOWS])], labels


def _parts(raw, start: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` (at most) consecutive byte ranges of ``raw[start:]``, each cut just after a line end."""
    n = len(raw)
    bounds = [start]
    for p in range(1, parts):
        at = raw.find(b"\n", start + (n - start) * p // parts)
        if at < 0:
            break
        if at + 1 > bounds[-1]:
            bounds.append(at + 1)
    if bounds[-1] < n:
        bounds.append(n)
    return list(zip(bounds[:-1], bounds[1:]))


def _quiet(kernel_fn, *args):
    """Run a hashing kernel: interpreted, numpy warns when the 64-bit products wrap, as they must."""
    with np.errstate(over="ignore"):
        return kernel_fn(*args)


def split_fields(raw, keep: list[int], numeric: list[bool], least: int, most: int,
                 threads: int | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                                                      list[np.ndarray]] | None:
    """The fields ``keep`` (positions from 0, ascending) of each line of ``raw`` (a file's bytes: bytes or
    a read-only memory map), or
    None where the file is not one these rules read (see the module docstring); ``numeric`` says which
    are numbers; a line must have from ``least`` to ``most`` fields.

    Returns ``(ids, numbers)``: per id field (in order), ``(codes, offsets, data)``: each row's code
    (int32, in order of first appearance) into the distinct ids, whose UTF-8 bytes are
    ``data[offsets[c]:offsets[c + 1]]`` (an Arrow string array's buffers); per number field, float64
    values. None also when the file has no line of fields, or a number is not finite.

    >>> ids, numbers = split_fields(b"q1 Q0 d1 1 0.5 run\\n\\n# note\\nq1\\tQ0  d2 2 -1e-3 run\\r\\n", [0, 2, 4],
    ...                             [False, False, True], 6, 1 << 30)
    >>> [(codes.tolist(), bytes(data).decode(), offsets.tolist()) for codes, offsets, data in ids]
    [([0, 0], 'q1', [0, 2]), ([0, 1], 'd1d2', [0, 2, 4])]
    >>> numbers[0].tolist()
    [0.5, -0.001]
    """
    from .threads import default_threads, run_parallel

    start = 3 if raw[:3] == b"\xef\xbb\xbf" else 0  # a UTF-8 byte order mark is not part of the first id
    buf = np.frombuffer(raw, np.uint8)
    workers = threads or default_threads()
    parts = max(1, min(workers, (len(raw) - start) // PART_BYTES))
    keep_a = np.asarray(keep, np.int64)
    numeric_a = np.asarray(numeric, np.bool_)
    done = run_parallel(lambda r: _split_part(buf, r[0], r[1], keep_a, numeric_a, least, most),
                        _parts(raw, start, parts), workers)
    if not done or any(d is None for d in done) or sum(d[0] for d in done) == 0:
        return None
    numbers = []
    for j in range(int(numeric_a.sum())):
        values = np.concatenate([d[2][j, :d[0]] for d in done])
        row0 = 0
        for rows, _, _, slow, _ in done:
            for row, field, s, e in slow:
                if field == j:
                    values[row0 + row] = float(raw[s:e])
            row0 += rows
        if not np.isfinite(values).all():
            return None
        numbers.append(values)
    ids = []
    for j in range(int((~numeric_a).sum())):
        if len(done) == 1:
            rows, codes, _, _, labels = done[0]
            ids.append((codes[j, :rows], *labels[j]))
            continue
        ids.append(_joined([(d[1][j, :d[0]], *d[4][j]) for d in done]))
    return ids, numbers


def _joined(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One id field's ``(codes, offsets, data)`` of consecutive parts of a file, each coded on its own,
    as one: the parts' distinct ids hashed together by Arrow (in order of first appearance: the
    first part's, then the new ones of the next...), each part's codes mapped to theirs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    labels = [pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
              for _, offsets, data in parts]
    encoded = pc.dictionary_encode(pa.concat_arrays(labels))
    where = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    bounds = np.cumsum([0] + [len(a) for a in labels])
    codes = np.concatenate([where[bounds[p]:bounds[p + 1]][c] for p, (c, _, _) in enumerate(parts)])
    merged = encoded.dictionary
    offsets = np.frombuffer(merged.buffers()[1], np.int64)[merged.offset:merged.offset + len(merged) + 1]
    data = np.frombuffer(merged.buffers()[2], np.uint8) if merged.buffers()[2] is not None else np.zeros(0, np.uint8)
    return codes, offsets - offsets[0], data[offsets[0]:offsets[-1]]
