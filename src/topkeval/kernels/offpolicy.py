"""Off-policy kernels: where each candidate of a round lands under a ranker, in one pass per round.

For every round (rows ``offsets[q]:offsets[q+1]``) the candidates are ordered by score, descending
(a stable merge sort: equal scores keep their row order). ``above`` is the number of candidates
placed before a candidate's tie group and ``tied`` the group's size under ``ties="expected"`` (the
group is spread over ranks ``above + 1 .. above + tied``); under a strict rule each tie group is put
in ascending order of ``tiebreak`` (the row for ``"first"``, the item code for ``"item_asc"``, its
negation for ``"item_desc"``) and every candidate gets its own rank (``tied`` 1).
"""

from __future__ import annotations

import numpy as np

from .jit import kernel

#: Fewer rows than this per thread are not worth a thread.
THREAD_ROWS = 500_000


@kernel(outputs=("above", "tied"))
def _rank_range(offsets, scores, tiebreak, expected, above, tied, q0, q1):
    for q in range(q0, q1):
        lo = offsets[q]
        n = offsets[q + 1] - lo
        if n == 0:
            continue
        order = np.argsort(-scores[lo:lo + n], kind="mergesort")
        i = 0
        while i < n:
            j = i + 1
            s = scores[lo + order[i]]
            while j < n and scores[lo + order[j]] == s:
                j += 1
            if expected:
                for t in range(i, j):
                    above[lo + order[t]] = i
                    tied[lo + order[t]] = j - i
            else:
                for t in range(i + 1, j):  # the run in ascending tiebreak (runs are short: insertion)
                    key = order[t]
                    u = t - 1
                    while u >= i and tiebreak[lo + order[u]] > tiebreak[lo + key]:
                        order[u + 1] = order[u]
                        u -= 1
                    order[u + 1] = key
                for t in range(i, j):
                    above[lo + order[t]] = t
                    tied[lo + order[t]] = 1
            i = j


def rank_in_rounds(offsets: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray, expected: bool,
                   threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(above, tied)`` per row (see the module docstring), threaded over ranges of rounds.

    >>> above, tied = rank_in_rounds(np.array([0, 3]), np.array([0.5, 0.9, 0.5]), np.arange(3), True)
    >>> above.tolist(), tied.tolist()
    ([1, 0, 1], [2, 1, 2])
    """
    from .threads import default_threads, run_parallel

    n = len(scores)
    above = np.zeros(n, np.int64)
    tied = np.ones(n, np.int64)
    Q = len(offsets) - 1
    parts = max(1, min(threads or default_threads(), n // THREAD_ROWS))
    bounds = np.unique(np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)).clip(0, Q))
    ranges = [(int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]) if z > a] or [(0, Q)]
    offsets = np.ascontiguousarray(offsets, np.int64)
    scores = np.ascontiguousarray(scores, np.float64)
    tiebreak = np.ascontiguousarray(tiebreak, np.int64)
    run_parallel(lambda r: _rank_range(offsets, scores, tiebreak, bool(expected), above, tied, r[0], r[1]), ranges)
    return above, tied
