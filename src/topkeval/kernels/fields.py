"""Whitespace-separated text files (TREC runs and qrels) split into fields: one pass over their bytes, one over each id field.

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
(Clinger's fast path, the value ``float()`` gives); any other mantissa of at most 18 significant
digits (17, as ``repr`` writes a double, or a large exponent) is rounded by the Eisel-Lemire method
(:func:`_eisel_lemire`: the mantissa times a 128-bit power of five, exact for every such mantissa
and exponent, subnormals and overflow included); a number of more digits is marked and parsed by
``float()`` itself afterwards, or, where such numbers are many (:data:`SLOW_MOST`), the file is
given up.

Two passes. The first (:func:`_tokens`) splits the lines: each id becomes one integer, a "word"
(an id of up to 8 bytes is its bytes, read once; a longer one says where it lies), each number
its value. A file of more than :data:`PART_BYTES` is cut at line ends into parts split on the
thread pool (:func:`topkeval.kernels.threads.run_parallel`), each writing its own columns of the
words. The second (:func:`_hash`) codes each id field, the fields on threads of their own, rows in
file order (codes in order of first appearance, parts and all: nothing to join): an
open-addressing table per field, at most half full, a word of at most 8 bytes its own tag (no
read of the file), a row whose id equals the row before's (a query, a run tag: written in runs)
not looked up at all. A loop that only splits lines and a loop that only looks ids up each run
faster than the two in one (the lookups of one line no longer wait behind the bytes of the next).
``seeds`` put the distinct ids of another file first (a run coded in the label space of its
qrels, read before it).
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np

from .jit import kernel

#: 10**0 .. 10**22: every power of ten a double holds exactly.
_POWERS = np.array([10.0 ** e for e in range(23)])

#: Bytes per part of a file split on threads of its own (a file of at least twice this is read in parts,
#: as many as there are threads).
PART_BYTES = 1 << 23

_OK, _SLOW, _BAD = 0, 1, 2


def _powers_of_five() -> np.ndarray:
    """``(2, 651)`` uint64: the high and low words of 5**q for q = -342..308 as 128 bits, the most
    significant set (truncated where 5**q is longer; for q < 0, 2**b // 5**-q + 1 for a b giving
    128 bits or more, then truncated): the table of the Eisel-Lemire method (Lemire, "Number
    parsing at a gigabyte per second", 2021), computed exactly with Python's integers."""
    words = np.empty((2, 651), np.uint64)
    for at, q in enumerate(range(-342, 309)):
        if q < 0:
            five = 5 ** -q
            z = five.bit_length()  # 2**z > 5**-q (never equal)
            c = 2 ** (z + 127) // five + 1 if q >= -27 else 2 ** (2 * z + 128) // five + 1
            while c >= 1 << 128:
                c //= 2
        else:
            c = 5 ** q
            while c < 1 << 127:
                c *= 2
            while c >= 1 << 128:
                c //= 2
        words[0, at], words[1, at] = c >> 64, c & ((1 << 64) - 1)
    return words


_FIVES: np.ndarray | None = None


def _fives() -> np.ndarray:
    global _FIVES
    if _FIVES is None:
        _FIVES = _powers_of_five()
    return _FIVES


_LOW32 = np.uint64(0xFFFFFFFF)


@kernel
def _product(a, b):
    """``(high, low)`` words of the 128-bit product of two uint64, from their 32-bit halves."""
    a0 = a & _LOW32
    a1 = a >> np.uint64(32)
    b0 = b & _LOW32
    b1 = b >> np.uint64(32)
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    middle = (p00 >> np.uint64(32)) + (p01 & _LOW32) + (p10 & _LOW32)
    low = (p00 & _LOW32) | (middle << np.uint64(32))
    high = a1 * b1 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (middle >> np.uint64(32))
    return high, low


@kernel
def _leading_zeros(x):
    """Leading zero bits of a uint64 (not 0)."""
    n = 0
    for bits in (32, 16, 8, 4, 2, 1):
        if x >> np.uint64(64 - bits) == np.uint64(0):
            n += bits
            x = x << np.uint64(bits)
    return n


@kernel
def _eisel_lemire(w, q, fives):
    """The double nearest ``w * 10**q`` (``w``: an integer from 1 to 10**18, ``q``: any exponent),
    correctly rounded (ties to even) as ``float()`` rounds it: Lemire's method, where the product of
    ``w`` with the 128-bit truncated power of five is always close enough to decide the rounding
    (Mushtak and Lemire, "Fast number parsing without fallback", 2023); 0.0 below the subnormals,
    inf above the largest double."""
    if q < -342:
        return 0.0
    if q > 308:
        return np.inf
    zeros = _leading_zeros(np.uint64(w))
    m = np.uint64(w) << np.uint64(zeros)
    at = q + 342
    high, low = _product(m, fives[0, at])
    if high & np.uint64(0x1FF) == np.uint64(0x1FF):  # the low word may carry into the bits kept
        carry, _ = _product(m, fives[1, at])
        low2 = low + carry
        if low2 < low:
            high += np.uint64(1)
        low = low2
    upper = np.int64(high >> np.uint64(63))
    mantissa = high >> np.uint64(upper + 9)
    power = (((152170 + 65536) * q) >> 16) + 63 + upper - zeros + 1023
    if power <= 0:  # subnormal
        if 1 - power >= 64:
            return 0.0
        mantissa = mantissa >> np.uint64(1 - power)
        mantissa += mantissa & np.uint64(1)
        mantissa = mantissa >> np.uint64(1)
        return math.ldexp(float(mantissa), -1074)  # exact: a multiple of the least subnormal
    if low <= np.uint64(1) and -4 <= q <= 23 and mantissa & np.uint64(3) == np.uint64(1) \
            and (mantissa << np.uint64(upper + 9)) == high:  # exactly half way: to the even one
        mantissa &= ~np.uint64(1)
    mantissa += mantissa & np.uint64(1)
    mantissa = mantissa >> np.uint64(1)
    if mantissa >= np.uint64(1 << 53):
        mantissa = np.uint64(1 << 52)
        power += 1
    if power >= 2047:
        return np.inf
    return math.ldexp(float(mantissa), int(power) - 1075)  # exact: 53 bits times a power of two

#: Numbers left to ``float()`` (more than 18 significant digits) beyond which, when they are more than
#: one row in 8, the file is given up: ``float()`` row by row would cost more than Arrow's compiled
#: parse of such numbers.
SLOW_MOST = 4096


@kernel
def _number(buf, s, e, powers, fives):
    """``(status, value)`` of the number written in ``buf[s:e]``: status 0 when ``value`` is exactly
    ``float()`` of the text, 1 when the text is a number that ``float()`` must parse (more than 18
    significant digits), 2 when it is not a number of the grammar (see the module docstring)."""
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
        long_power = False
        while i < e and 48 <= buf[i] <= 57:
            if power < 100_000:
                power = power * 10 + (int(buf[i]) - 48)
            else:  # an exponent of 7 digits or more: float() (a million zeros may bring it back into range)
                long_power = True
            written += 1
            i += 1
        if written == 0:
            return _BAD, 0.0
        if long_power:
            exact = False
        exponent += sign * power
    if i != e:
        return _BAD, 0.0
    if mantissa == 0 and exact:  # every digit zero: a (signed) zero whatever the exponent
        return _OK, -0.0 if negative else 0.0
    if not exact:  # more than 18 significant digits: float()
        return _SLOW, 0.0
    if mantissa > 9_007_199_254_740_992 or exponent > 22 or exponent < -22:
        value = _eisel_lemire(mantissa, exponent, fives)
    elif exponent >= 0:
        value = float(mantissa) * powers[exponent]
    else:
        value = float(mantissa) / powers[-exponent]
    return _OK, -value if negative else value


#: Fibonacci hashing's multiplier (2**64 over the golden ratio): spreads a tag over the table's bits.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_BASIS = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

#: Each id of a row as one integer (a "word"): an id of at most 8 bytes is its bytes (its tag, > 0:
#: ASCII bytes, none 0); a longer one is ``~(first byte + length << _SHIFT)`` (< 0; an id of
#: _LONGEST bytes or more, 32 KiB, gives the file up).
_SHIFT = 48
_LOW = (1 << _SHIFT) - 1
_LONGEST = 1 << 15

#: ``state`` of :func:`_tokens`: rows done, numbers left to ``float()``, the outcome.
_ROWS, _SLOWS, _OUTCOME = 0, 1, 2
#: outcomes: every line read; a line is not one these rules read; (:func:`_hash`) the tables must grow first.
_DONE, _GIVE_UP, _GROW = 0, 1, 2


@kernel(outputs=("state", "words", "numbers", "slow"))
def _tokens(buf, lo, hi, keep, numeric, slots, least, most, powers, fives, base, cap, state, words, numbers, slow):
    """Read the lines of ``buf[lo:hi]`` (``lo`` at a line start): row ``r`` of these lines is column
    ``base + r`` (``r < cap``) of ``words`` (per id field, the id as one integer: see :data:`_SHIFT`) and
    of ``numbers`` (per number field, its value; ``slow``: the (row, field, start, end) of each
    number that ``float()`` must parse). Outcome ``_GIVE_UP`` at a line these rules do not read.
    The ids are hashed apart, field by field (:func:`_hash`): a loop that only splits lines, and
    a loop that only looks ids up, each run faster than the two in one (the lookups of one line
    no longer wait behind the bytes of the next)."""
    i = lo
    rows = 0
    n_slow = 0
    n_keep = len(keep)
    while i < hi:
        field = 0  # fields of this line seen so far
        k = 0  # the next kept field
        comment = False
        at = base + rows
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
            tag = int(c)  # the field's bytes as one integer, as they are read (its last 8 bytes)
            i += 1
            while i < hi:
                c = buf[i]
                if c <= 32 or c >= 127:
                    break
                tag = ((tag & 0xFFFFFFFFFFFFFF) << 8) | int(c)  # its last 8 bytes (interpreted: no growing integer)
                i += 1
            if field == 0 and buf[start] == 35:  # "#": a comment line, skipped to its end
                comment = True
            if comment:
                continue
            if k < n_keep and keep[k] == field:
                if rows >= cap:  # never (``cap`` bounds the lines), but never a write past this part either
                    state[_OUTCOME] = _GIVE_UP
                    return
                j = slots[k]
                if numeric[k]:
                    # the usual number inline ([-]digits[.digits], at most 18 digits), any other by _number
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
                    if t == i and 0 < digits <= 18:  # then places <= 18 and mantissa < 10**18: exact
                        status = _OK
                        if mantissa <= 9_007_199_254_740_992:
                            value = float(mantissa) / powers[places]
                        else:  # 16 to 18 significant digits (repr's 17)
                            value = _eisel_lemire(mantissa, -places, fives)
                        if negative:
                            value = -value
                    else:
                        status, value = _number(buf, start, i, powers, fives)
                    if status == _BAD:
                        state[_OUTCOME] = _GIVE_UP
                        return
                    numbers[j, at] = value
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
                    if size >= _LONGEST:
                        state[_OUTCOME] = _GIVE_UP
                        return
                    if size <= 8:  # its bytes, read once
                        words[j, at] = tag
                    else:
                        words[j, at] = ~(start | (size << _SHIFT))
                k += 1
            field += 1
        if comment or field == 0:
            continue
        if field < least or field > most:
            state[_OUTCOME] = _GIVE_UP
            return
        rows += 1
    state[_ROWS] = rows
    state[_SLOWS] = n_slow
    state[_OUTCOME] = _DONE


@kernel
def _size(tag):
    """The bytes of an id of at most 8 bytes, from its tag (none of its bytes is 0)."""
    size = 0
    while tag > 0:
        size += 1
        tag >>= 8
    return size


#: The top bit of a longer id's tag (its FNV-1a hash), never set in the tag of an id of at most 8 ASCII
#: bytes: the two kinds of tag never match.
_LONG_TAG = np.uint64(1 << 63)


@kernel(outputs=("state", "codes", "table", "tags", "keys", "offsets", "data"))
def _hash(buf, words, segments, bits, state, codes, table, tags, keys, offsets, data):
    """The code of each id of one field (its ``words``, the columns ``segments[s, 0]:segments[s, 1]``
    in turn; ``buf``: the bytes that the words of ids longer than 8 bytes point into), in order of
    first appearance, into ``codes`` (from ``state[2]`` on); ``state``: the segment and the column
    to start at, the next code's place, the distinct ids so far, their bytes so far, the previous
    row's code (-1), the outcome. Stops (``_GROW``) before an id that would not fit: the table
    half full, or ``offsets`` or ``data`` full.

    An open-addressing table (linear probing, at most half full): per slot a code + 1 (0: empty,
    ``table``) and that id's tag (``tags``), read side by side; per code its tag and length
    (``keys``, to grow the table). An id of at most 8 bytes is its own tag (its word): a lookup
    reads one slot, never the file nor the keys. A longer one is tagged by its FNV-1a hash (top bit
    set) and, where the tags match, compared with the distinct ids' bytes, copied next to each other
    (``data``, by ``offsets``). A row whose id equals the row before's (a query, a run tag: written
    in runs) takes its code without a lookup."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    s = state[0]
    col = state[1]
    out = state[2]
    n = state[3]
    fill = state[4]
    previous = state[5]
    last = 0  # the row before's word (0: none in this call)
    tried = 0  # long ids compared with the row before's, of the first 4096, and how many were the same
    same = 0
    while s < segments.shape[0]:
        if col < segments[s, 0]:
            col = segments[s, 0]
        stop = segments[s, 1]
        while col < stop:
            word = words[col]
            if word == last:  # the row before's id, of at most 8 bytes (a longer one's word is where it lies)
                codes[out] = previous
                out += 1
                col += 1
                continue
            size = 0
            start = 0
            if word > 0:
                tag = np.uint64(word)
            else:
                size = (~word) >> _SHIFT
                start = (~word) & _LOW
                # the row before's bytes first (a query written in runs), while that pays
                if last < 0 and (~last) >> _SHIFT == size and (tried < 4096 or 2 * same > tried):
                    t0 = (~last) & _LOW
                    equal = True
                    for t in range(size):
                        if buf[start + t] != buf[t0 + t]:
                            equal = False
                            break
                    if tried < 4096:
                        tried += 1
                        same += equal
                    if equal:
                        codes[out] = previous
                        out += 1
                        col += 1
                        continue
                tag = _FNV_BASIS
                for t in range(start, start + size):
                    tag = (tag ^ np.uint64(buf[t])) * _FNV_PRIME
                tag |= _LONG_TAG
            last = word
            slot = np.int64((tag * _GOLDEN) >> shift)
            while True:
                code = np.int64(table[slot]) - 1
                if code < 0:
                    break
                if tags[slot] == tag:
                    if word > 0:
                        break
                    if keys[2 * code + 1] == np.uint64(size):
                        at = offsets[code]
                        for t in range(size):
                            if buf[start + t] != data[at + t]:
                                code = -1
                                break
                        if code >= 0:
                            break
                code = -1
                slot = (slot + 1) & mask
            if code < 0:  # a new id, if it fits
                if word > 0:
                    size = _size(word)
                if 2 * (n + 1) > (1 << bits) or n + 2 > offsets.shape[0] or fill + size > data.shape[0]:
                    _save(state, s, col, out, n, fill, previous, _GROW)
                    return
                if word > 0:
                    for t in range(size):
                        data[fill + t] = (word >> (8 * (size - 1 - t))) & 255
                else:
                    for t in range(size):
                        data[fill + t] = buf[start + t]
                fill += size
                offsets[n + 1] = fill
                table[slot] = n + 1
                tags[slot] = tag
                keys[2 * n] = tag
                keys[2 * n + 1] = np.uint64(size)
                code = n
                n += 1
            codes[out] = code
            out += 1
            previous = code
            col += 1
        s += 1
    _save(state, s, col, out, n, fill, previous, _DONE)


@kernel(outputs=("state",))
def _save(state, s, col, out, n, fill, previous, outcome):
    """Where :func:`_hash` stopped, in ``state`` (its layout: see there), and why."""
    state[0] = s
    state[1] = col
    state[2] = out
    state[3] = n
    state[4] = fill
    state[5] = previous
    state[6] = outcome


@kernel
def _seed_words(data, offsets):
    """The words (see :data:`_SHIFT`) of the ids ``data[offsets[c]:offsets[c + 1]]``, pointing into ``data``."""
    words = np.empty(len(offsets) - 1, np.int64)
    for c in range(len(offsets) - 1):
        size = offsets[c + 1] - offsets[c]
        if size <= 8:
            tag = 0
            for t in range(offsets[c], offsets[c + 1]):
                tag = (tag << 8) | int(data[t])
            words[c] = tag
        else:
            words[c] = ~(offsets[c] | (size << _SHIFT))
    return words


@kernel
def _rehash(keys, count, bits):
    """The table of :func:`_hash` (its codes and tags, per slot) built again with ``2 ** bits`` slots
    from the keys of its ``count`` distinct ids."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, np.int32)
    tags = np.zeros(1 << bits, np.uint64)
    for code in range(count):
        tag = keys[2 * code]
        slot = np.int64((tag * _GOLDEN) >> shift)
        while table[slot] != 0:
            slot = (slot + 1) & mask
        table[slot] = code + 1
        tags[slot] = tag
    return table, tags


def _codes(buf: np.ndarray, words: np.ndarray, segments: np.ndarray, rows: int, seed=None):
    """``(codes, offsets, data)`` of one id field (:func:`_hash`), its tables grown as it asks;
    ``seed``: ``(offsets, data)`` of distinct ids that take the first codes, in their order (the
    file's ids found among them take their codes; the others are new, after them)."""
    state = np.array([0, 0, 0, 0, 0, -1, _DONE], np.int64)
    tables: list = [10, np.zeros(1 << 10, np.int32), np.zeros(1 << 10, np.uint64), np.zeros(2 << 10, np.uint64),
                    np.zeros(1 << 10, np.int64), np.empty(1 << 13, np.uint8)]

    def run(source, words, segments, codes):
        while True:
            bits, table, tags, keys, offsets, data = tables
            _quiet(_hash, source, words, segments, bits, state, codes, table, tags, keys, offsets, data)
            if state[6] != _GROW:
                return
            n = int(state[3])
            if 2 * (n + 1) > (1 << bits):
                tables[0] = bits + 1
                tables[1], tables[2] = _quiet(_rehash, keys, n, bits + 1)
            elif n + 2 > len(offsets):
                tables[3] = np.concatenate([keys, np.zeros_like(keys)])
                tables[4] = np.concatenate([offsets, np.zeros_like(offsets)])
            else:  # then an id's bytes did not fit
                tables[5] = np.concatenate([data, np.empty_like(data)])

    if seed is not None:
        seed_offsets, seed_data = seed
        m = len(seed_offsets) - 1
        seed_codes = np.empty(m, np.int32)
        if m:
            seed_data = np.ascontiguousarray(seed_data, np.uint8)
            run(seed_data, _seed_words(seed_data, np.asarray(seed_offsets, np.int64)), np.array([[0, m]], np.int64),
                seed_codes)
        if int(state[3]) != m:  # never: a seed's ids are distinct
            raise ValueError("the ids of a seed must be distinct")
        state[:3] = 0
        state[5] = -1
    codes = np.empty(rows, np.int32)
    run(buf, words, segments, codes)
    n = int(state[3])
    return codes, tables[4][:n + 1], tables[5][:int(state[4])]


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


#: Bytes of the words' buffer kept for the next file (a run of about 10M lines takes more: not kept).
SCRATCH_MOST = 1 << 28
_SPARE: list = []  # at most one buffer, taken out while a file is split (two files at once: two buffers)
_SPARE_LOCK = threading.Lock()


def _scratch(size: int) -> np.ndarray:
    """An int64 buffer of at least ``size`` elements for the words: the one kept from the last file where
    it is large enough. Fresh memory costs a page fault per page on first write, and two threads
    faulting at once in one process contend in the kernel: measured on the 2-core machine, the first
    pass over a 1M-line run took 44 ms with the buffer reused against 90 ms with fresh memory, of
    which 40 to 80 ms of system time."""
    with _SPARE_LOCK:
        if _SPARE and _SPARE[0].size >= size:
            return _SPARE.pop()
    return np.empty(size, np.int64)


def _reset_in_child() -> None:
    """After a fork: a lock another thread held would stay held in the child; the spare is not needed."""
    global _SPARE_LOCK
    _SPARE_LOCK = threading.Lock()
    _SPARE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


def _keep(flat: np.ndarray) -> None:
    """Keep ``flat`` for the next file, if it is not too large and larger than the one kept."""
    if flat.nbytes <= SCRATCH_MOST:
        with _SPARE_LOCK:
            if not _SPARE or _SPARE[0].size < flat.size:
                _SPARE[:] = [flat]


def split_fields(raw, keep: list[int], numeric: list[bool], least: int, most: int,
                 threads: int | None = None, seeds: list | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                                                      list[np.ndarray]] | None:
    """The fields ``keep`` (positions from 0, ascending) of each line of ``raw`` (a file's bytes: bytes or
    a read-only memory map), or
    None where the file is not one these rules read (see the module docstring); ``numeric`` says which
    are numbers; a line must have from ``least`` to ``most`` fields.

    Returns ``(ids, numbers)``: per id field (in order), ``(codes, offsets, data)``: each row's code
    (int32, in order of first appearance) into the distinct ids, whose UTF-8 bytes are
    ``data[offsets[c]:offsets[c + 1]]`` (an Arrow string array's buffers); per number field, float64
    values. None also when the file has no line of fields, or a number is not finite. ``seeds``: per
    id field, None or the ``(offsets, data)`` of distinct ids (another file's, as returned here) that
    take the first codes (the two files' ids are then coded in one label space).

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
    parts = _parts(raw, start, max(1, min(workers, (len(raw) - start) // PART_BYTES)))
    keep_a = np.asarray(keep, np.int64)
    numeric_a = np.asarray(numeric, np.bool_)
    n_ids, n_numbers = int((~numeric_a).sum()), int(numeric_a.sum())
    slots = np.zeros(len(keep_a), np.int64)  # each kept field's place among the ids, or among the numbers
    slots[numeric_a] = np.arange(n_numbers)
    slots[~numeric_a] = np.arange(n_ids)
    # lines of a part, at most: a line of f >= least fields takes 2 f - 1 bytes and its line end (the last,
    # none); columns for that many rows cost no memory where no row is written (np.empty touches no page)
    caps = [(hi - lo + 1) // (2 * max(least, 1)) + 1 for lo, hi in parts]
    bases = np.concatenate([[0], np.cumsum(caps)]).astype(np.int64)
    flat = _scratch(n_ids * int(bases[-1]))
    words = flat[:n_ids * int(bases[-1])].reshape(n_ids, int(bases[-1]))
    fives = _fives()
    numbers = np.empty((n_numbers, int(bases[-1])), np.float64)

    def tokens(p: int):
        lo, hi = parts[p]
        state = np.array([0, 0, _DONE], np.int64)
        slow = np.empty((caps[p] * n_numbers, 4), np.int64)
        _quiet(_tokens, buf, lo, hi, keep_a, numeric_a, slots, least, most, _POWERS, fives, bases[p], caps[p], state, words,
               numbers, slow)
        return state, slow

    try:
        done = run_parallel(tokens, range(len(parts)), workers)
        if any(state[_OUTCOME] != _DONE for state, _ in done):
            return None
        counts = [int(state[_ROWS]) for state, _ in done]
        rows = sum(counts)
        if rows == 0:
            return None
        segments = np.array([[bases[p], bases[p] + counts[p]] for p in range(len(parts))], np.int64)
        values = []
        for j in range(n_numbers):
            column = numbers[j, :rows] if len(parts) == 1 else np.concatenate([numbers[j, a:z] for a, z in segments])
            row0 = 0
            for (state, slow), count in zip(done, counts):
                for row, field, s, e in slow[:int(state[_SLOWS])]:
                    if field == j:
                        column[row0 + row] = float(raw[s:e])
                row0 += count
            if not np.isfinite(column).all():
                return None
            values.append(column)
        seeds = seeds or [None] * n_ids
        ids = run_parallel(lambda j: _codes(buf, words[j], segments, rows, seeds[j]), range(n_ids), workers)
        return ids, values
    finally:  # the words' buffer, for the next file (nothing returned holds it; no write to it after this)
        _keep(flat)
