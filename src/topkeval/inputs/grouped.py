"""The grouped columnar log that every input becomes.

Rows of one query are contiguous (CSR-like ``offsets``). A log that already arrives grouped is used
as it is (no copy of the score columns, queries in input order); otherwise the queries are put in
ascending order of id and the rows moved by a radix partition (:mod:`topkeval.kernels.grouping`).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field

import numpy as np

from ..errors import ColumnError, DataError, show
from .ids import Encoded, arrow_run_starts, check_ids, encode, is_arrow, labels_of, sorted_codes


@dataclass
class Judgments:
    """Relevant items and judged grades per query: R and what the ideal DCG ranks. They come from
    the log itself, or from judgments kept apart from it (TREC qrels, the held-out interactions of
    a score matrix), where R counts relevant items no model retrieved."""

    R: np.ndarray
    offsets: np.ndarray  # judged items of query q: grades[offsets[q]:offsets[q + 1]]
    grades: np.ndarray
    nonrelevant: np.ndarray | None = None  # judged non-relevant items per query, when not all are in grades
    zeros: np.ndarray | None = None  # judged items of grade 0 per query not listed in grades (a score matrix's cells)
    #: the item code of each judged grade, in the run's code space (judgments apart from a run); None when the
    #: judgments are the log's own rows. Within a query the judgments keep the order they were listed in.
    items: np.ndarray | None = None

    def under(self, conv) -> Judgments:
        """These judgments under ``conv``'s relevance threshold (a metric's own ``rel=``): R counted
        again from the judged grades, which list every judged item."""
        from ..kernels.grouping import count_per_group

        if self.nonrelevant is not None or self.zeros is not None:  # a score matrix's: its batch recounts them
            raise ValueError("judgments that do not list every judged item cannot be recounted")
        return Judgments(count_per_group(self.offsets, conv.is_relevant(np.asarray(self.grades))), self.offsets,
                         self.grades, items=self.items)

    def judged_nonrelevant(self, conv) -> np.ndarray:
        """Judged non-relevant items of each query: a judgment with a grade >= 0 that is not relevant
        (trec_eval: a negative grade means in the pool but not judged)."""
        if self.nonrelevant is not None:
            return self.nonrelevant
        from ..kernels.grouping import count_per_group

        grades = np.asarray(self.grades)
        return count_per_group(self.offsets, (grades >= 0) & ~conv.is_relevant(grades))


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
        Item codes (None without item ids): integer ids themselves, or codes into ``item_labels``.
        They need not be in id order: the item tie rules rank them (:func:`topkeval.inputs.ids.typed_rank`).
        Given as an Arrow string array (in grouped order), the codes are computed when first read:
        the duplicate check reads the text itself, and most evaluations never need codes.
    item_labels : ndarray or None
        ``item_labels[code]`` is the item id; None when the codes are the ids.
    judged : ndarray of bool or None
        Whether each row has a judgment (runs evaluated against judgments kept apart, where a
        retrieved item may have none); None when every row is judged (its grade is its judgment).
    """

    offsets: np.ndarray
    queries: np.ndarray
    grades: np.ndarray
    scores: dict
    items_given: InitVar[object] = None
    item_labels: np.ndarray | None = None
    _relevant: dict = field(default_factory=dict, repr=False, compare=False)
    _items: np.ndarray | None = field(default=None, repr=False, compare=False)
    item_text: object = field(default=None, repr=False, compare=False)  # Arrow strings, grouped order
    judged: np.ndarray | None = field(default=None, repr=False, compare=False)
    rows: dict = field(default_factory=dict, repr=False, compare=False)  # other per-row columns, grouped

    def __post_init__(self, items_given) -> None:
        if is_arrow(items_given):
            self.item_text = items_given
        else:
            self._items = items_given

    @property
    def items(self) -> np.ndarray | None:
        if self._items is None and self.item_text is not None:
            from .ids import _arrow_encode

            self._items, self.item_labels = _arrow_encode(self.item_text)
        return self._items

    @property
    def has_items(self) -> bool:
        return self._items is not None or self.item_text is not None

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1

    @property
    def models(self) -> list[str]:
        return list(self.scores)

    @property
    def n_rows(self) -> int:
        return len(self.grades)

    def judgments(self, conv) -> Judgments:
        """R and the judged grades of each query, from the log itself (every judged item is a row)."""
        return Judgments(self.per_query_sum(self.relevant(conv)), self.offsets, self.grades)

    def relevant(self, conv) -> np.ndarray:
        """Boolean relevance of every row under ``conv`` (:meth:`Conventions.is_relevant`), computed once.

        A row without a judgment (:attr:`judged` False: a retrieved item the judgments do not list,
        whose filler grade is 0) is never relevant, whatever the threshold: under a threshold of 0 or
        less its filler grade would pass it (trec_eval: only a judged document can be relevant)."""
        key = conv.threshold
        if key not in self._relevant:
            relevant = conv.is_relevant(self.grades)
            if self.judged is not None:
                relevant &= self.judged
            self._relevant[key] = relevant
        return self._relevant[key]

    def item_ids(self, codes: np.ndarray) -> np.ndarray:
        """The item ids of some codes."""
        codes = np.asarray(codes)
        self.items  # noqa: B018 (the labels of text ids exist once the codes do)
        return codes if self.item_labels is None else self.item_labels[codes]

    def with_scores(self, scores: dict) -> GroupedLog:
        """The same rows with other score columns (models)."""
        log = GroupedLog(self.offsets, self.queries, self.grades, scores, self._items, self.item_labels)
        log.item_text, log._relevant, log.judged, log.rows = self.item_text, self._relevant, self.judged, self.rows
        return log

    def with_grades(self, grades: np.ndarray) -> GroupedLog:
        """The same rows with other grades (the relevance read from them again; the item ids not
        encoded for it)."""
        log = GroupedLog(self.offsets, self.queries, grades, self.scores, self._items, self.item_labels)
        log.item_text, log.judged, log.rows = self.item_text, self.judged, self.rows
        return log

    def without_items(self) -> GroupedLog:
        """The same rows without their item ids (what needs no ids runs without encoding them)."""
        log = GroupedLog(self.offsets, self.queries, self.grades, self.scores)
        log._relevant, log.judged, log.rows = self._relevant, self.judged, self.rows
        return log

    def judged_rows(self) -> np.ndarray:
        """Whether each row has a judgment (all True unless :attr:`judged` says otherwise)."""
        return np.ones(self.n_rows, np.bool_) if self.judged is None else self.judged

    def keep_rows(self, keep: np.ndarray) -> GroupedLog:
        """The log without the rows where ``keep`` is False (queries kept, even when emptied)."""
        kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
        items = self.items
        log = GroupedLog(kept[self.offsets], self.queries, self.grades[keep],
                         {m: v[keep] for m, v in self.scores.items()},
                         None if items is None else items[keep], self.item_labels)
        log.judged = None if self.judged is None else self.judged[keep]
        log.rows = {name: v[keep] for name, v in self.rows.items()}
        return log

    def per_query_sum(self, values: np.ndarray) -> np.ndarray:
        """Number of true values of a boolean row array within each query."""
        from ..kernels.grouping import count_per_group

        return count_per_group(self.offsets, values)


def group_rows(query, column: str = "query", threads: int | None = None):
    """Return ``(offsets, grouping, labels)``; ``grouping`` is None when the rows are already grouped.

    ``query`` is an id column in any form of :mod:`topkeval.inputs.ids`. ``grouping.apply(column)``
    returns a column in grouped order (see :class:`~topkeval.kernels.grouping.RadixGrouping`);
    ``labels`` are the query ids: in input order when the rows arrive grouped (each query one run
    of rows), otherwise ascending.

    Raises
    ------
    ColumnError
        The query column has missing values, or mixes kinds of id.
    """
    if is_arrow(query):
        check_ids(query, column, "query")
        if len(arrow_run_starts(query.slice(0, 65536))) < max(1, min(len(query), 65536) // 2):
            import pyarrow.compute as pc

            starts = arrow_run_starts(query)
            first = labels_of(query, starts)
            if pc.count_distinct(query.take(starts)).as_py() == len(starts):  # each query one run
                return np.append(starts, len(query)).astype(np.int64), None, first
        codes, labels = sorted_codes(query, column, "query")
        return _group_codes(codes, labels, threads)
    if not isinstance(query, Encoded) and query.dtype.kind == "O" and len(query) > 1:
        # Python objects: comparing neighbours is far cheaper than hashing every row; the checks of
        # missing and mixed ids run on the labels, where every distinct run of ids shows
        head = query[:65536]
        if np.count_nonzero(head[1:] != head[:-1]) < max(1, len(head) // 2):
            starts = np.concatenate([[0], np.flatnonzero(query[1:] != query[:-1]) + 1]).astype(np.int64)
            labels = query[starts]
            check_ids(labels, column, "query")
            if len(pd_unique(labels)) == len(labels):
                return np.append(starts, len(query)).astype(np.int64), None, labels
    if isinstance(query, Encoded) or query.dtype.kind == "O":
        codes, labels = sorted_codes(query, column, "query")
        return _group_codes(codes, labels, threads)
    check_ids(query, column, "query")
    n = len(query)
    if query.dtype.kind in "iufbUSM":
        head = query[:65536]  # a shuffled log shows itself in its first rows: skip the full check
        if np.count_nonzero(head[1:] != head[:-1]) < max(1, len(head) // 2):
            if query.dtype.kind in "iuf":
                from ..kernels.grouping import run_starts

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
            from ..kernels.grouping import offset_codes

            codes = offset_codes(query.astype(np.int64, copy=False), low, threads)
            return _group_codes(codes, np.arange(low, high + 1).astype(query.dtype), threads)
        if span <= 4 * n:
            from ..kernels.grouping import ranked_codes

            codes, ids = ranked_codes(query.astype(np.int64, copy=False), low, span)
            return _group_codes(codes, ids.astype(query.dtype), threads)
    codes, labels = sorted_codes(query, column, "query")
    return _group_codes(codes, labels, threads)


def pd_unique(values: np.ndarray) -> np.ndarray:
    import pandas as pd

    return pd.unique(values)


def _has_repeats(ordered: np.ndarray) -> bool:
    return bool((ordered[1:] == ordered[:-1]).any())


def _group_codes(codes: np.ndarray, labels: np.ndarray, threads: int | None):
    """``(offsets, grouping, labels)`` of rows with query codes 0..len(labels)-1, labels ascending.

    Codes without rows are dropped. Rows that turn out to be grouped already (each code one run)
    stay as they are, queries in input order.
    """
    from ..kernels.grouping import RadixGrouping, count_runs, run_starts
    from ..kernels.threads import default_threads

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
        Non-numeric values: text, dates and durations (their numbers are not scores), complex
        numbers, integers beyond 2**53 (a float cannot hold them exactly, so ties would be wrong).
    DataError
        NaN or infinite values.
    """
    kind = values.dtype.kind
    if kind == "b":
        return values.astype(np.int8 if role == "grade" else np.float64)
    if kind in "mMc":
        what = {"m": "durations", "M": "dates", "c": "complex numbers"}[kind]
        raise ColumnError(
            f"Column {column!r} holds {what} (dtype {values.dtype}), not numeric {role}s: convert it to real "
            f"numbers first{' (for example seconds)' if kind in 'mM' else ''}."
        )
    if kind in "iu":
        if len(values) and values.dtype.itemsize == 8 and (values.max() > 2**53 or values.min() < -(2**53)):
            raise _beyond_2_53(column, role)
        if role == "grade":
            return values  # integers: compared as they are, converted where arithmetic needs it
        values = values.astype(np.float64)
    elif kind == "f":
        if values.dtype not in (np.float32, np.float64):
            wide = values
            values = values.astype(np.float64)
            if wide.dtype.itemsize > 8 and len(values) and (values != wide).any():  # float128: rounded
                raise ColumnError(f"Column {column!r} holds {role}s in extended precision ({wide.dtype}) that a "
                                  f"float64 cannot hold exactly (two different {role}s could become equal, a false "
                                  "tie): convert them to float64 first, deciding how to round.")
    else:
        if kind in "OUS" and len(values):
            import pandas as pd

            inferred = pd.api.types.infer_dtype(values, skipna=True)
            if inferred not in ("integer", "floating", "mixed-integer-float", "decimal", "boolean", "empty"):
                sample = next((v for v in values if not _is_number(v)), values[0])
                sample = sample.item() if isinstance(sample, np.generic) else sample
                mixed = kind == "O" and any(_is_number(v) for v in values[:100_000])
                from .ids import _shown

                raise ColumnError(
                    f"Column {column!r} must hold numeric {role}s; found {_shown(sample)} "
                    f"({'text among numbers' if mixed and isinstance(sample, str) else type(sample).__name__}, "
                    f"dtype {values.dtype}). Convert it to numbers first."
                )
            if inferred in ("integer", "mixed-integer-float") and any(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) and abs(int(v)) > 2**53
                    for v in values):
                raise _beyond_2_53(column, role)
        try:
            values = values.astype(np.float64)
        except (TypeError, ValueError):
            raise ColumnError(
                f"Column {column!r} must hold numeric {role}s (dtype {values.dtype}). Convert it to numbers first."
            ) from None
    from ..kernels.grouping import count_nonfinite

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


def _beyond_2_53(column: str, role: str) -> ColumnError:
    return ColumnError(
        f"Column {column!r} has integer {role}s beyond 2**53, which a float cannot hold exactly (two "
        f"different {role}s could become equal, a false tie); rescale them."
    )


def _is_number(v) -> bool:
    """A real number as a value (not text that would parse as one, not a complex number)."""
    import numbers

    return isinstance(v, numbers.Real) or type(v).__name__ == "Decimal"


def item_codes(items, column: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer codes of item ids and their labels (None when integer ids are their own codes);
    see :func:`topkeval.inputs.ids.encode`."""
    return encode(items, column, "item")


def check_duplicates(offsets: np.ndarray, items: np.ndarray, labels: np.ndarray | None, queries: np.ndarray,
                     column: str) -> None:
    """Raise if an item appears twice within one query (a compiled hash per query, threaded)."""
    from ..kernels.grouping import count_duplicates

    count, row = count_duplicates(offsets, items)
    if count:
        q = int(np.searchsorted(offsets, row, side="right")) - 1
        _duplicates_error(count, queries[q], items[row] if labels is None else labels[items[row]], column)


def _duplicates_error(count: int, query, item, column: str):
    raise DataError(
        f"Column {column!r} has {count} duplicate (query, item) rows; for example "
        f"query {show(query)} lists item {show(item)} twice. "
        "Each item may appear once per query: deduplicate the log (keep the row you mean); a table that stacks "
        "the rows of several models (or runs, or A/B arms) names the column that tells them apart: "
        "model='<column>'."
    )


def counting_groups(codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, perm)`` grouping rows by integer code 0..n_groups-1 (input order kept within a group)."""
    from ..kernels.grouping import RadixGrouping
    from ..kernels.threads import default_threads

    codes = np.ascontiguousarray(codes, dtype=np.int64)
    grouping = RadixGrouping(codes, int(n_groups), default_threads())
    return grouping.offsets, grouping.apply(np.arange(len(codes), dtype=np.int64))


def owned(values: np.ndarray, borrowed) -> np.ndarray:
    """``values``, copied if it may share memory with one of the ``borrowed`` arrays (the caller's,
    which the caller may change in place after the evaluation; see :class:`topkeval.inputs.tables.Columns`)."""
    if any(np.may_share_memory(values, b) for b in borrowed):
        return values.copy()
    return values


def build_log(query, grades: np.ndarray, scores: dict, items, names: dict, ascending: bool = False,
              borrowed=True, rows: dict | None = None) -> GroupedLog:
    """Validate the columns of a log and group them by query.

    ``query`` and ``items`` are id columns in any form of :mod:`topkeval.inputs.ids`. ``names`` maps
    ``query``, ``relevance`` and ``item`` to the user's column names, for messages.
    ``ascending``: the scores are ranks or distances (lower is better); they are negated, which is
    exact and keeps every tie.

    The log owns its rows: a column that may be memory the caller holds (``borrowed``: a list of
    such arrays, True for every array given, False or ``()`` for none) and that neither a
    conversion nor the grouping copied is copied, so that Results, which read the log again
    (curves, diff, side_by_side, beyond_accuracy, the report), never see a change the caller makes
    to its arrays afterwards. A column that was converted or grouped is not copied again.
    ``rows``: other per-row arrays (float64), grouped the same way (:attr:`GroupedLog.rows`).
    """
    rows = dict(rows or {})
    if borrowed is True:
        borrowed = [v for v in (grades, *scores.values(), items) if isinstance(v, np.ndarray)]
    borrowed = list(borrowed or ())
    grades = numeric_column(grades, names["relevance"], "grade")
    scores = {m: numeric_column(v, m, "score") for m, v in scores.items()}
    if ascending:
        scores = {m: np.negative(v) for m, v in scores.items()}
    offsets, grouping, labels = group_rows(query, names["query"])
    codes = item_labels = text = None
    if items is not None:
        if is_arrow(items):  # strings: checked in place, encoded only if something needs codes
            check_ids(items, names["item"], "item")
            text = items
        else:
            codes, item_labels = item_codes(items, names["item"])
    if grouping is not None:
        moved = codes if codes is not None else (np.arange(len(text), dtype=np.int64) if text is not None else None)
        columns = grouping.apply_all([grades, *scores.values(), *([moved] if moved is not None else []),
                                      *rows.values()], release=True)
        if rows:
            rows = dict(zip(rows, columns[len(columns) - len(rows):]))
            columns = columns[:len(columns) - len(rows)]
        grades = columns[0]
        scores = dict(zip(scores, columns[1:1 + len(scores)]))
        if codes is not None:
            codes = columns[-1]
        elif text is not None:
            import pyarrow as pa

            text = text.take(pa.array(columns[-1]))
        del grouping, columns
    elif borrowed:  # the rows are used in place: own what is still the caller's
        grades = owned(grades, borrowed)
        scores = {m: owned(v, borrowed) for m, v in scores.items()}
        codes = None if codes is None else owned(codes, borrowed)
    if codes is not None:
        check_duplicates(offsets, codes, item_labels, labels, names["item"])
    if text is not None:
        from ..kernels.grouping import count_text_duplicates

        count, row = count_text_duplicates(offsets, text)
        if count:
            q = int(np.searchsorted(offsets, row, side="right")) - 1
            _duplicates_error(count, labels[q], text[row].as_py(), names["item"])
    log = GroupedLog(offsets, labels, grades, scores, codes if text is None else text, item_labels)
    log.rows = {name: np.array(v, np.float64) for name, v in rows.items()}  # copied: the log owns its rows
    return log
