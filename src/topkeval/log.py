"""The grouped columnar log that every input becomes.

Rows of one query are contiguous (CSR-like ``offsets``). A log that already arrives grouped is used
as it is (no copy of the score columns, queries in input order); otherwise the queries are put in
ascending order of id and the rows moved by a radix partition (:mod:`topkeval.kernels.grouping`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ColumnError, DataError, show


@dataclass
class GroupedLog:
    """Rows grouped by query.

    Attributes
    ----------
    offsets : ndarray of int64, shape (Q + 1,)
        Rows of query q are ``offsets[q]:offsets[q + 1]``.
    queries : ndarray, shape (Q,)
        The query ids: in input order when the rows arrived grouped, otherwise ascending.
    grades : ndarray, shape (rows,)
        Relevance grades, grouped.
    scores : dict of str to ndarray
        One float array per model, grouped.
    items : ndarray of int64 or None
        Order-preserving item codes (string order for strings, numeric order for numbers).
    item_labels : ndarray or None
        ``item_labels[code]`` is the item id.
    """

    offsets: np.ndarray
    queries: np.ndarray
    grades: np.ndarray
    scores: dict
    items: np.ndarray | None = None
    item_labels: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1

    def relevant(self, threshold: float | None) -> np.ndarray:
        """Boolean relevance: grade > 0, or grade >= threshold."""
        return self.grades > 0 if threshold is None else self.grades >= threshold

    def per_query_sum(self, values: np.ndarray) -> np.ndarray:
        """Number of true values of a boolean row array within each query."""
        from .kernels.grouping import count_per_group

        return count_per_group(self.offsets, values)


def _is_missing(values: np.ndarray) -> np.ndarray | None:
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind == "O":
        import pandas as pd

        return pd.isna(values)
    return None


def group_rows(query: np.ndarray, column: str = "query", threads: int | None = None):
    """Return ``(offsets, grouping, labels)``; ``grouping`` is None when the rows are already grouped.

    ``grouping.apply(column)`` returns a column in grouped order (see
    :class:`~topkeval.kernels.grouping.RadixGrouping`); ``labels`` are the query ids: in input
    order when the rows arrive grouped (each query one run of rows), otherwise ascending.

    Raises
    ------
    ColumnError
        The query column has missing values.
    """
    missing = _is_missing(query)
    if missing is not None and missing.any():
        raise ColumnError(
            f"Column {column!r} has {int(missing.sum())} missing query ids (first at row "
            f"{int(np.argmax(missing))}); drop those rows or fill them in."
        )
    n = len(query)
    if query.dtype.kind in "iufbUSM":
        head = query[:65536]  # a shuffled log shows itself in its first rows: skip the full check
        if np.count_nonzero(head[1:] != head[:-1]) < max(1, len(head) // 2):
            if query.dtype.kind in "iuf":
                from .kernels.grouping import run_starts

                starts = run_starts(query)
            else:
                starts = np.concatenate([[0], np.flatnonzero(query[1:] != query[:-1]) + 1])
            labels = query[starts]
            # each query id one run: grouped (increasing ids need no sort to show it)
            if (labels[1:] > labels[:-1]).all() or not _has_repeats(np.sort(labels)):
                return np.append(starts, n).astype(np.int64), None, labels

    if query.dtype.kind in "iu" and n < 2**31:
        low, high = int(query.min()), int(query.max())
        span = high - low + 1 if high < 2**63 else 8 * n + 1  # uint64 ids beyond int64: no table
        if span <= max(n // 4, 1):
            # dense ids: the code is the id minus the smallest; absent ids are empty groups
            from .kernels.grouping import offset_codes

            codes = offset_codes(query.astype(np.int64, copy=False), low, threads)
            return _group_codes(codes, np.arange(low, high + 1).astype(query.dtype), threads)
        if span <= 4 * n:
            from .kernels.grouping import ranked_codes

            codes, ids = ranked_codes(query.astype(np.int64, copy=False), low, span)
            return _group_codes(codes, ids.astype(query.dtype), threads)
    import pandas as pd

    try:
        codes, labels = pd.factorize(query, sort=True)
    except TypeError:  # ids that cannot be ordered among themselves: first appearance
        codes, labels = pd.factorize(query, sort=False)
    return _group_codes(codes, np.asarray(labels), threads)


def _has_repeats(ordered: np.ndarray) -> bool:
    return bool((ordered[1:] == ordered[:-1]).any())


def _group_codes(codes: np.ndarray, labels: np.ndarray, threads: int | None):
    """``(offsets, grouping, labels)`` of rows with query codes 0..len(labels)-1, labels ascending.

    Codes without rows are dropped. Rows that turn out to be grouped already (each code one run)
    stay as they are, queries in input order.
    """
    from .kernels.grouping import RadixGrouping, count_runs, run_starts
    from .kernels.threads import default_threads

    if count_runs(codes, len(labels)) <= len(labels):  # maybe each query one run
        starts = run_starts(codes)
        if np.bincount(codes[starts], minlength=len(labels)).max() <= 1:  # grouped: kept as it is
            return np.append(starts, len(codes)).astype(np.int64), None, labels[codes[starts]]
    grouping = RadixGrouping(codes, len(labels), threads or default_threads())
    offsets = grouping.offsets
    sizes = np.diff(offsets)
    if not sizes.all():  # ids of a dense range that have no rows
        present = np.flatnonzero(sizes)
        return np.append(0, offsets[1:][present]), grouping, labels[present]
    return offsets, grouping, labels


def numeric_column(values: np.ndarray, column: str, role: str) -> np.ndarray:
    """Check that a score or grade column is numeric and finite.

    Returns float64 or float32; integer grades stay integers (booleans become int8), which every
    comparison handles without a converted copy.

    Raises
    ------
    ColumnError
        Non-numeric values.
    DataError
        NaN or infinite values.
    """
    if values.dtype.kind == "b":
        return values.astype(np.int8 if role == "grade" else np.float64)
    elif values.dtype.kind in "iu":
        if len(values) and values.dtype.itemsize == 8 and (values.max() > 2**53 or values.min() < -(2**53)):
            raise ColumnError(
                f"Column {column!r} has integer {role}s beyond 2**53, which a float cannot hold "
                "exactly (ties would be wrong); rescale them."
            )
        if role == "grade":
            return values  # integers: compared as they are, converted where arithmetic needs it
        values = values.astype(np.float64)
    elif values.dtype.kind == "f":
        if values.dtype not in (np.float32, np.float64):
            values = values.astype(np.float64)
    else:
        try:
            converted = values.astype(np.float64)
        except (TypeError, ValueError):
            sample = next((v for v in values if not _looks_numeric(v)), values[0])
            raise ColumnError(
                f"Column {column!r} must hold numeric {role}s; found {sample!r} "
                f"(dtype {values.dtype}). Convert it to numbers first."
            ) from None
        if values.dtype.kind in "OUS" and any(isinstance(v, (str, bytes)) for v in values[:1000]):
            raise ColumnError(
                f"Column {column!r} must hold numeric {role}s, not text (found {values[0]!r}). "
                "Convert it to numbers first."
            )
        values = converted
    from .kernels.grouping import count_nonfinite

    if count_nonfinite(values):
        bad = ~np.isfinite(values)
        first = int(np.argmax(bad))
        what = "missing or NaN" if np.isnan(values[first]) else "infinite"
        raise DataError(
            f"Column {column!r} has {int(bad.sum())} non-finite {role}s ({what} at row {first}). "
            f"Every {role} must be a finite number: drop those rows or fill them in"
            + (" (a candidate that was not retrieved is simply left out of the log)." if role == "score" else ".")
        )
    return values


def _looks_numeric(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def item_codes(items: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Order-preserving integer codes of item ids (strings in string order, numbers numerically)."""
    import pandas as pd

    missing = _is_missing(items)
    if missing is not None and missing.any():
        raise ColumnError(f"Column {column!r} has {int(missing.sum())} missing item ids; fill them in.")
    if items.dtype.kind == "O":
        kinds = {type(v) for v in items[: min(len(items), 100000)]}
        if len(kinds) > 1 and not all(issubclass(k, (int, np.integer)) for k in kinds):
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ColumnError(
                f"Column {column!r} mixes item id types ({names}); ids are compared as typed, so use "
                "one type (all strings or all numbers)."
            )
    try:
        codes, labels = pd.factorize(items, sort=True)
    except TypeError as exc:
        raise ColumnError(f"Column {column!r}: item ids cannot be ordered ({exc}); use one type.") from None
    return codes.astype(np.int64), np.asarray(labels)


def first_duplicate(keys: np.ndarray) -> tuple[int, int]:
    """(row of the first repeated key, number of repeats) of an integer key array, by hashing."""
    import pandas as pd

    dup = pd.Series(keys).duplicated().to_numpy()
    count = int(dup.sum())
    return (int(np.argmax(dup)) if count else -1), count


def check_duplicates(offsets: np.ndarray, items: np.ndarray, labels: np.ndarray, queries: np.ndarray,
                     column: str) -> None:
    """Raise if an item appears twice within one query."""
    q_of_row = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    n_items = int(items.max()) + 1 if len(items) else 1
    row, count = first_duplicate(q_of_row * n_items + items)
    if count:
        raise DataError(
            f"Column {column!r} has {count} duplicate (query, item) rows; for example "
            f"query {show(queries[q_of_row[row]])} lists item {show(labels[items[row]])} twice. "
            "Each item may appear once per query: deduplicate the log (keep the row you mean)."
        )


def counting_groups(codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, perm)`` grouping rows by integer code 0..n_groups-1 (input order kept within a group)."""
    from .kernels.grouping import RadixGrouping
    from .kernels.threads import default_threads

    codes = np.ascontiguousarray(codes, dtype=np.int64)
    grouping = RadixGrouping(codes, int(n_groups), default_threads())
    return grouping.offsets, grouping.apply(np.arange(len(codes), dtype=np.int64))
