"""Ids: query, item and run-name columns, checked and turned into integer codes once.

An id column arrives in one of three forms (``io.read_columns`` keeps each in the cheapest one):

* a numpy array: numbers, dates, or Python objects (a pandas ``object`` column);
* an Arrow string array (pandas ``str`` / ``string[pyarrow]`` columns, pyarrow and polars string
  columns, CSV and TREC files): never turned into Python objects; Arrow hashes it in C++;
* :class:`Encoded`: codes into labels that the input already had (pandas and polars
  categoricals, Arrow dictionary arrays).

:func:`encode` gives ``(codes, labels)`` for any of them: integer ids that a float holds exactly
are their own codes (no labels), everything else codes into its distinct values, in order of first
appearance. :func:`sorted_codes` gives codes in ascending order of id instead (queries of a log
that is not grouped come out in that order). Missing ids (NaN, None, NaT, nulls) and object
columns mixing kinds of id ("1" and 1) are refused here, on the distinct values, not row by row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ColumnError, show
from ..kernels.arrow import one_chunk


@dataclass
class Encoded:
    """An id column as integer ``codes`` into ``labels`` (a code of -1 is a missing id)."""

    codes: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.codes)


def is_arrow(values) -> bool:
    return type(values).__module__.split(".")[0] == "pyarrow"


def ids_as_objects(values, at: np.ndarray | None = None) -> np.ndarray:
    """The ids of a column as :func:`topkeval.inputs.read_columns` gives it (an array, Arrow text,
    or codes into labels), as an object array; only at rows ``at`` when given (read at those alone)."""
    if isinstance(values, Encoded):
        codes = values.codes if at is None else values.codes[at]
        if not len(values.labels):
            return np.full(len(codes), None, dtype=object)
        return np.asarray(np.where(codes >= 0, values.labels[np.maximum(codes, 0)], None), dtype=object)
    if is_arrow(values):
        import pyarrow as pa

        taken = values if at is None else values.take(pa.array(at))
        if pa.types.is_dictionary(taken.type):
            taken = taken.dictionary_decode()
        return np.asarray(taken.to_pylist(), dtype=object)
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    values = np.asarray(values, dtype=object)
    return values if at is None else values[at]


def take_rows(values, rows: np.ndarray):
    """A column as :func:`topkeval.inputs.read_columns` gives it (an array, Arrow text, or codes into
    labels), at rows ``rows`` only, in the same form (a copy: never the caller's memory)."""
    if isinstance(values, Encoded):
        return Encoded(values.codes[rows], values.labels)
    if is_arrow(values):
        import pyarrow as pa

        return values.take(pa.array(rows, type=pa.int64()))
    return np.asarray(values)[rows]


#: pandas.api.types.infer_dtype's names of the id types that order and compare among themselves.
_ID_KINDS = {"string", "bytes", "integer", "floating", "mixed-integer-float", "decimal", "boolean", "datetime",
             "datetime64", "date", "timedelta", "timedelta64", "time", "period", "empty", "categorical"}


def _missing(column: str, role: str, count: int, first: int) -> ColumnError:
    return ColumnError(f"Column {column!r} has {count} missing {role} ids (NaN, None or NaT; first at row {first}); "
                       "drop those rows or fill them in.")


def _check_kinds(labels: np.ndarray, column: str, role: str) -> None:
    """Refuse distinct values that are not ids of one kind (lists, "1" mixed with 1)."""
    import pandas as pd

    kind = pd.api.types.infer_dtype(labels, skipna=False)
    if kind not in _ID_KINDS:
        seen: dict[str, object] = {}
        nested = None
        for v in labels[:100_000]:
            seen.setdefault(type(v).__name__, v)
            if nested is None and isinstance(v, (list, tuple, dict, set, frozenset, np.ndarray)):
                nested = v
            if len(seen) > 3 and nested is not None:
                break
        found = ", ".join(f"{name} ({_shown(v)})" for name, v in list(seen.items())[:4])
        if nested is not None:
            what = "an array" if isinstance(nested, np.ndarray) else f"a {type(nested).__name__}"
            hint = (f"Each value must be one id, not {what} of values (such as "
                    f"{_shown(nested)}): use strings or numbers.")
        elif kind.startswith("mixed"):
            hint = "Ids are compared as typed, so '1' and 1 are different ids: convert the column to one type."
        else:
            hint = "Use strings or numbers as ids."
        raise ColumnError(f"Column {column!r} must hold {role} ids of one kind (all strings or all numbers); "
                          f"found {found}. {hint}")


def _shown(value) -> str:
    """A value for a message: an id as :func:`show` gives it, a container by its repr, shortened."""
    text = repr(value.tolist()) if isinstance(value, np.ndarray) else show(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_missing(values: np.ndarray) -> np.ndarray | None:
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "mM":
        return np.isnat(values)
    if values.dtype.kind == "O":
        import pandas as pd

        return pd.isna(values)
    return None


def check_ids(values, column: str, role: str) -> None:
    """Refuse missing ids and columns that mix kinds of id (one pass; see the module docstring).

    Raises
    ------
    ColumnError
    """
    if is_arrow(values):
        if values.null_count:
            import pyarrow.compute as pc

            first = int(pc.index(pc.is_null(values), True).as_py())
            raise _missing(column, role, values.null_count, first)
        return
    if isinstance(values, Encoded):
        bad = values.codes < 0
        if bad.any():
            raise _missing(column, role, int(bad.sum()), int(np.argmax(bad)))
        return
    if values.dtype.kind == "O":
        encode(values, column, role)  # factorize: missing and mixed kinds found on the distinct values
        return
    missing = _is_missing(values)
    if missing is not None and missing.any():
        raise _missing(column, role, int(missing.sum()), int(np.argmax(missing)))


def few_runs(values) -> np.ndarray | None:
    """The rows where a run of equal values begins in an Arrow array (:func:`arrow_run_starts`),
    when runs are few (at most a quarter of the rows: a query or run-name column of a file written
    query by query); None otherwise, after looking at its first rows only."""
    n = len(values)
    if n < 64:
        return None
    head = min(n, 4096)
    if len(arrow_run_starts(values.slice(0, head))) > head // 4:
        return None
    starts = arrow_run_starts(values)
    return starts if len(starts) <= n // 4 else None


def single_value(values) -> tuple[bool, object]:
    """``(True, the value)`` when every row of an id column holds the same value (a TREC run's tag
    column), else ``(False, None)``; without hashing the rows."""
    if isinstance(values, Encoded):
        codes = values.codes
        if len(codes) and codes[0] >= 0 and (codes == codes[0]).all():
            return True, np.asarray(values.labels)[codes[0]]
        return False, None
    if is_arrow(values):
        values = one_chunk(values)
        if len(values) and not values.null_count and not _is_dictionary(values):
            starts = few_runs(values) if len(values) >= 64 else arrow_run_starts(values)
            if starts is not None and len(starts) == 1:
                return True, values[0].as_py()
        return False, None
    if len(values) and values.dtype.kind in "iubUS" and (values == values[0]).all():
        return True, values[0]
    return False, None


def _is_dictionary(values) -> bool:
    import pyarrow as pa

    return pa.types.is_dictionary(values.type)


def _repeat_runs(codes: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """Per row, the code of its run (``codes[r]`` for run ``r`` starting at ``starts[r]``)."""
    return np.repeat(codes.astype(np.int64, copy=False), np.diff(np.append(starts, n)))


def _dictionary(values) -> tuple[np.ndarray, Any]:
    """(codes, Arrow labels) of an Arrow string array, codes in order of first appearance: Arrow
    hashes the strings in C++ (no Python object per row), or only the first row of each run when
    equal values come in runs."""
    import pyarrow.compute as pc

    values = one_chunk(values)
    starts = few_runs(values)
    if starts is not None:
        encoded = pc.dictionary_encode(values.take(starts))
        return _repeat_runs(encoded.indices.to_numpy(zero_copy_only=False), starts, len(values)), encoded.dictionary
    encoded = pc.dictionary_encode(values)
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _arrow_encode(values) -> tuple[np.ndarray, np.ndarray]:
    codes, labels = _dictionary(values)
    return codes, labels.to_numpy(zero_copy_only=False)


def arrow_text(values) -> bool:
    """An Arrow array (or chunked array) of strings."""
    import pyarrow as pa

    return is_arrow(values) and (pa.types.is_string(values.type) or pa.types.is_large_string(values.type))


def arrow_codes_together(first, second, ordered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of two Arrow string columns in one label space (``first``'s ids first, in order of
    appearance; or ascending with ``ordered``), and the labels: one hashing of the two columns
    together (of the first row of each run, where equal ids come in runs), no Python object but
    one per distinct id."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts, starts = [], []
    for values in (first, second):
        values = one_chunk(values)
        run = few_runs(values)
        starts.append(run)
        parts.append(values if run is None else values.take(run))
    if parts[0].type != parts[1].type:
        parts = [p.cast(pa.large_string()) for p in parts]
    encoded = pc.dictionary_encode(pa.concat_arrays(parts))
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    labels = encoded.dictionary
    if ordered:  # code order = id order (C's strcmp on UTF-8, as Python compares str)
        order = pc.sort_indices(labels).to_numpy()
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        codes = rank[codes]
        labels = labels.take(pa.array(order))
    a, b = codes[: len(parts[0])], codes[len(parts[0]):]
    n1, n2 = len(first), len(second)
    a = a if starts[0] is None else _repeat_runs(a, starts[0], n1)
    b = b if starts[1] is None else _repeat_runs(b, starts[1], n2)
    return a, b, labels.to_numpy(zero_copy_only=False)


def hashed_as_text(values) -> bool:
    """Ids that :func:`text_codes_together` takes: Arrow strings, or codes into labels that are all
    text (the categoricals of TREC files read by the compiled reader)."""
    if arrow_text(values):
        return True
    return isinstance(values, Encoded) and values.labels.dtype.kind == "O" and pd_is_string(values.labels)


def shared_codes(first: Encoded, second: Encoded, ordered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`text_codes_together` of two columns coded into one and the same array of text labels
    (a TREC run and its qrels, read together): the codes as they are, or, ``ordered``, renumbered
    in ascending order of the labels (as Python and Arrow compare text)."""
    labels = first.labels
    if not ordered:
        return first.codes.astype(np.int64, copy=False), second.codes.astype(np.int64, copy=False), labels
    order = np.argsort(labels, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[first.codes], rank[second.codes], labels[order]


def text_codes_together(first, second, ordered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arrow_codes_together` of two id columns that :func:`hashed_as_text` takes: codes into
    labels are hashed by their labels alone (each distinct id once), then the rows take the codes of
    their labels."""
    import pyarrow as pa

    parts: list = []
    rows: list[np.ndarray | None] = []
    for values in (first, second):
        if isinstance(values, Encoded):
            parts.append(pa.array(values.labels, pa.string()))
            rows.append(values.codes)
        else:
            parts.append(values)
            rows.append(None)
    # the side with more rows first: its labels are then the first codes, in its own order (an
    # Encoded side's labels are distinct), and its rows keep their codes (no pass over them)
    swap = not ordered and len(second) > len(first)
    if swap:
        b, a, labels = arrow_codes_together(parts[1], parts[0], ordered)
    else:
        a, b, labels = arrow_codes_together(parts[0], parts[1], ordered)
    return _rows_coded(a, rows[0]), _rows_coded(b, rows[1]), labels


def _rows_coded(codes: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """The codes of the rows of an id column: ``codes`` itself (one per row), or per label (``rows``:
    each row's label), looked up unless they are the labels' own numbers."""
    if rows is None:
        return codes
    if len(codes) and codes[0] == 0 and codes[-1] == len(codes) - 1 and (np.diff(codes) == 1).all():
        return rows.astype(np.int64, copy=False)
    return codes[rows]


def encode(values, column: str, role: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``(codes, labels)`` of an id column, codes in order of first appearance; ``labels`` is None
    when integer ids are their own codes (no hashing at all).

    Raises
    ------
    ColumnError
        Missing ids, or ids of mixed kinds.
    """
    if is_arrow(values):
        check_ids(values, column, role)
        return _arrow_encode(values)
    if isinstance(values, Encoded):
        check_ids(values, column, role)
        return values.codes.astype(np.int64, copy=False), np.asarray(values.labels)
    if values.dtype.kind in "iu" and (not len(values) or (values.max() < 2**53 and values.min() > -(2**53))):
        return values.astype(np.int64, copy=False), None
    import pandas as pd

    try:
        codes, labels = pd.factorize(values, sort=False)
    except TypeError as exc:
        raise ColumnError(f"Column {column!r}: {role} ids must be strings or numbers ({exc}).") from None
    if len(codes) and codes.min() < 0:
        missing = codes < 0
        raise _missing(column, role, int(missing.sum()), int(np.argmax(missing)))
    labels = np.asarray(labels)
    if labels.dtype.kind == "O":
        _check_kinds(labels, column, role)
    return codes.astype(np.int64, copy=False), labels


def sorted_codes(values, column: str, role: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)`` with ``labels`` ascending and ``codes`` indexing them: code order is id
    order (strings as strings, numbers numerically)."""
    codes, labels = encode(values, column, role)
    if labels is None:
        labels, codes = np.unique(codes, return_inverse=True)
        return codes.astype(np.int64), labels
    order = argsort_labels(labels, column)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], labels[order]


def argsort_labels(labels: np.ndarray, column: str = "id") -> np.ndarray:
    """The order of distinct ids, ascending (strings by code point, which is C's strcmp on UTF-8)."""
    if labels.dtype.kind == "O" and len(labels) and all(isinstance(v, str) for v in labels[:1000]):
        import pyarrow as pa
        import pyarrow.compute as pc

        try:  # Arrow sorts many strings much faster than Python comparisons
            return pc.sort_indices(pa.array(labels, pa.string())).to_numpy()
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, so no order as C's strcmp sees it
            bad = next(v for v in labels if isinstance(v, str) and not _utf8(v))
            where = "The id" if column == "id" else f"Column {column!r}: the id"
            raise ColumnError(f"{where} {bad!r} is not valid text (it holds a lone surrogate, "
                              "Python's stand-in for a byte that is not UTF-8, from decoding with "
                              "errors='surrogateescape'), so it has no order as text. Decode the ids with their "
                              "real encoding, or with errors='replace'.") from None
    try:
        return np.argsort(labels, kind="stable")
    except TypeError as exc:
        raise ColumnError(f"Column {column!r}: its ids cannot be ordered ({exc}); use one type.") from None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_rank(codes: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
    """Per row, the rank of its id among the distinct ids compared as text (C's strcmp on UTF-8:
    "9" > "100" > "10"); for the ``item_order="text"`` tie rules."""
    if labels is None:
        labels, codes = np.unique(codes, return_inverse=True)
    if labels.dtype.kind in "US" or (labels.dtype.kind == "O" and all(isinstance(v, str) for v in labels[:1000])
                                     and pd_is_string(labels)):
        text = labels
    else:
        text = np.array([str(v) for v in labels], dtype=object)
    order = argsort_labels(np.asarray(text, dtype=object))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes]


def pd_is_string(values: np.ndarray) -> bool:
    """Every value is a str (pandas' C type inference, no Python loop)."""
    import pandas as pd

    return pd.api.types.infer_dtype(values, skipna=False) == "string"


def typed_rank(codes: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
    """Per row, a key that orders rows as their ids compare as typed (integer ids: themselves)."""
    if labels is None:
        return codes
    order = argsort_labels(labels)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes]


def arrow_run_starts(values) -> np.ndarray:
    """Rows where a new run of equal values begins in an Arrow array (row 0 included), by Arrow."""
    import pyarrow.compute as pc

    n = len(values)
    if n == 0:
        return np.zeros(0, np.int64)
    differ = pc.not_equal(values.slice(1), values.slice(0, n - 1))
    if hasattr(differ, "combine_chunks"):
        differ = differ.combine_chunks()
    return np.concatenate([[0], np.flatnonzero(differ.to_numpy(zero_copy_only=False)) + 1]).astype(np.int64)


def labels_of(values, rows: np.ndarray) -> np.ndarray:
    """The ids at ``rows`` (for labels of a few rows: run starts, messages)."""
    if is_arrow(values):
        import pyarrow as pa

        return values.take(pa.array(rows)).to_numpy(zero_copy_only=False)
    if isinstance(values, Encoded):
        return np.asarray(values.labels)[values.codes[rows]]
    return values[rows]


def as_text(values) -> object:
    """An id column as Arrow strings or numpy text (numbers by their decimal form, whole floats as
    integers: 1.0 is "1"); for matching ids of different types by value."""
    if is_arrow(values):
        import pyarrow as pa

        return values if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) else \
            values.cast(pa.string())
    if isinstance(values, Encoded):
        return np.asarray(values.labels).astype(str)[values.codes]
    return values.astype(str)


def find_id(queries: np.ndarray, query) -> int | None:
    """The position of ``query`` among some ids (None if absent): by value, and across text and whole
    numbers ("7" finds 7 and 7 finds "7", as judgments are matched to runs,
    :func:`topkeval.inputs.judgments.match_ids`; "007" is not 7, as nowhere in topkeval).

    >>> find_id(np.array([3, 7, 9]), "7"), find_id(np.array(["a", "7"], dtype=object), 7), find_id(np.array([7]), "007")
    (1, 1, None)
    """
    if not len(queries):
        return None
    candidates = [query]
    if isinstance(query, str) and query.lstrip("-").isdigit() and str(int(query)) == query:
        candidates.append(int(query))
    elif isinstance(query, (int, np.integer)) and not isinstance(query, bool):
        candidates.append(str(int(query)))
    for value in candidates:
        try:
            hit = np.flatnonzero(queries == value)
        except (TypeError, ValueError):
            continue
        if len(hit):
            return int(hit[0])
    return None
