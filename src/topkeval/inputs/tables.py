"""Read the columns evaluate() needs from whatever table the user has.

pandas is a dependency; polars and pyarrow tables are recognised by their type's module, so a
user who never touches polars never imports it (narwhals does the same).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import ColumnError, DataError, InputFileError, closest
from .formats import FORMATS, FileFormat, format_of


def _module(obj) -> str:
    return type(obj).__module__.split(".")[0]


def _unwrapped_pandas(values):
    """A pandas array given on its own (``pd.array(...)``, a Categorical: an ExtensionArray, without
    the Series or Index the readers here take) as a Series; anything else as it is."""
    if _module(values) == "pandas":
        import pandas as pd

        if isinstance(values, pd.api.extensions.ExtensionArray):
            return pd.Series(values, copy=False)
    return values


def file_format(path: Path) -> FileFormat | None:
    """The format of a table file by its name (:mod:`topkeval.inputs.formats`); a folder is read as a
    dataset of the format that reads folders."""
    if path.is_dir():
        return next((f for f in FORMATS if f.folder), None)
    return format_of(path)


def _read_file(path, columns: Sequence[str], text_columns: Sequence[str] = (), roles: dict | None = None,
               hint: str | Mapping[str, str] = "", what: str = "the data"):
    import pyarrow as pa

    from .paths import input_path

    path = input_path(path, what)  # a folder, an empty file, a gzip file named .csv...: said as such
    fmt = file_format(path)
    try:
        if fmt is not None:
            if path.is_dir() and not any(p.is_file() and not p.name.startswith(("_", "."))
                                         for p in path.rglob("*")):
                raise InputFileError(f"'{path}' is a directory without data files: give a parquet file, a "
                                     "directory of them, or a .csv file.")
            _check_columns(columns, fmt.columns(path), f"file '{path}'", roles, hint)
            return fmt.read(path, columns, text_columns)
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if path.is_dir():
            mixed = mixed_schemas(path, columns, first)
            if mixed:
                raise InputFileError(f"Cannot read '{path}': {mixed}") from None
        raise InputFileError(f"Cannot read '{path}': {first}") from None
    raise InputFileError(
        f"Cannot read '{path}': unknown file type {path.suffix or '(none)'!r}. "
        "Use a .parquet file (or a directory of them) or a .csv / .tsv file."
    )


def mixed_schemas(folder: Path, columns: Sequence[str], failure: str = "") -> str | None:
    """Why the parquet files of ``folder`` cannot be read as one table: a wanted column of another type
    (or absent) in one file than in the first (None when their schemas agree on ``columns``); ``failure``,
    Arrow's words for the value that did not fit the first file's type, follows in parentheses."""
    import pyarrow.parquet as pq

    from .paths import _data_files

    first_path: Path = folder
    first = None
    for file in _data_files(folder):
        try:
            schema = pq.read_schema(file)
        except Exception:  # not a parquet file: said as such
            return (f"its file '{file.relative_to(folder)}' is not a parquet file: a folder read as one table holds "
                    "parquet files only.")
        if first is None:
            first_path, first = file, schema
            continue
        for name in columns:
            mine = first.field(name).type if name in first.names else None
            theirs = schema.field(name).type if name in schema.names else None
            if mine != theirs:
                def what(t):
                    return "absent" if t is None else str(t)

                said = f" ({failure.rstrip('.')})" if failure else ""
                return (f"its parquet files do not share one schema: column {name!r} is {what(mine)} in "
                        f"'{first_path.relative_to(folder)}' and {what(theirs)} in '{file.relative_to(folder)}'"
                        f"{said}. Write them with the same columns and types, or read them one by one.")
    return None


def column_names(data) -> list[str]:
    """The column names of a table or a table file, without reading its rows (an empty list when the
    file cannot be read: :func:`read_columns` says why)."""
    if isinstance(data, (str, os.PathLike)):
        fmt = file_format(Path(data))
        try:
            return fmt.columns(Path(data)) if fmt is not None else []
        except Exception:  # read_columns words the error
            return []
    if isinstance(data, Mapping):
        return [str(k) for k in data]
    mod = _module(data)
    if mod == "pyarrow" and hasattr(data, "schema"):
        return list(data.schema.names)
    if mod == "polars" and type(data).__name__ == "LazyFrame":
        return list(data.collect_schema().names())
    return [str(c) for c in getattr(data, "columns", [])]


#: names a column of each role often has: what a missing column suggests when no name is close to it
ROLE_NAMES = {
    "relevance": ("click", "clicked", "clicks", "label", "labels", "grade", "rel", "rating", "relevant", "judgment",
                  "judgement", "target", "purchase", "purchased", "y"),
    "query": ("qid", "query_id", "user", "user_id", "userid", "session", "session_id", "request_id", "search_id",
              "topic"),
    "item": ("item_id", "itemid", "doc", "doc_id", "docid", "docno", "document", "product", "product_id"),
    "score": ("prediction", "predictions", "pred", "prob", "probability", "logit"),
}


def suggestion(name: str, columns: Sequence[str], role: str | None = None) -> str:
    """" Did you mean 'x'?" for a missing column, or "": the columns whose names are close to ``name``
    (a misspelling, a prefix: 'rel' for 'relevance'), else those named as such columns often are
    (``role``: 'click' for a relevance column); never a name merely sharing some letters ('device').

    >>> suggestion("relevance", ["query", "click", "device"], "relevance"), suggestion("scroe", ["score", "store"])
    (" Did you mean 'click'?", " Did you mean 'score' or 'store'?")
    """
    low = name.lower()
    hits = closest(name, columns, cutoff=0.6) or [
        c for c in columns if min(len(c), len(low)) >= 3 and (low.startswith(c.lower()) or c.lower().startswith(low))][:3] or [
        c for c in columns if c.lower() in ROLE_NAMES.get(role or "", ())][:3]
    return " Did you mean " + " or ".join(map(repr, hits)) + "?" if hits else ""


def _check_columns(wanted: Sequence[str], available: Sequence, where: str, roles: dict | None = None,
                   hint: str | Mapping[str, str] = "") -> dict:
    """Every wanted column exists, once; else say which is missing, the closest names, and which
    parameter names it (``roles``: column -> parameter, such as ``relevance``); ``hint`` is a
    sentence to add, or one per column (``{column: sentence}``).

    Returns ``{name: label}``: the table's own label of each wanted column (a pandas column may be
    labelled by a number, found by its text). Two columns that answer to one wanted name (a CSV
    header or an Arrow schema with a name twice, pandas columns ``1`` and ``"1"``) are refused:
    reading either one would silently ignore the other.
    """
    labels = list(available)
    text = [str(a) for a in labels]
    found: dict = {}
    for name in wanted:
        hits = [i for i, t in enumerate(text) if t == name]
        if not hits:
            shown = (", ".join(repr(a) for a in text[:20]) + (" ..." if len(text) > 20 else "")) or "none (it has no column)"
            role = (roles or {}).get(name)
            how = f" Name the {role} column with {role}='<column>'." if role else ""
            more = hint.get(name, "") if isinstance(hint, Mapping) else hint
            nested = (" Its columns are tuples (a MultiIndex): flatten them first, for example "
                      "df.columns = ['_'.join(map(str, c)).strip('_') for c in df.columns]."
                      if labels and all(isinstance(a, tuple) for a in labels) else "")
            raise ColumnError(
                f"Column {name!r}{f' ({role}=)' if role else ''} not found in {where}."
                f"{suggestion(name, text, role)} Available: {shown}.{how}{nested}{more}"
            )
        if len(hits) > 1:
            same = ", ".join(repr(labels[i]) for i in hits)
            raise ColumnError(
                f"{where[0].upper() + where[1:]} has {len(hits)} columns named {name!r} ({same}, at positions "
                f"{', '.join(str(i) for i in hits)}): which one to read is ambiguous. Rename or drop all but one."
            )
        found[name] = labels[hits[0]]
    return found


class _Held:
    """The base of a read-only numpy view that also holds a pandas Series of the same memory, so that
    the caller's in-place changes to its table or Series never reach the view: under copy-on-write
    (pandas 3, or ``mode.copy_on_write``) a write to a block that another Series refers to copies the
    block first. (Memory the caller shares with pandas on purpose, ``copy=False`` over a numpy array
    it then changes, is outside this: see docs/conventions.md, "Files".)"""

    def __init__(self, values: np.ndarray, column) -> None:
        interface = dict(values.__array_interface__)
        interface["data"] = (interface["data"][0], True)  # read-only
        self.__array_interface__ = interface
        self.column = column


def _held(column) -> np.ndarray:
    """A pandas Series' values as a read-only view that keeps a shallow copy of it alive (see
    :class:`_Held`): no copy of the rows."""
    mine = column.copy(deep=False)  # a reference pandas tracks: the caller's writes now copy first
    values = mine.to_numpy()
    if values.flags.owndata or not values.size:
        return values
    return np.asarray(_Held(values, mine))


def _pandas_copy_on_write() -> bool:
    import pandas as pd

    return int(pd.__version__.split(".")[0]) >= 3 or pd.options.mode.copy_on_write is True


def _to_numpy(col) -> np.ndarray:
    mod = _module(col)
    if mod == "pandas":
        if isinstance(col.dtype, np.dtype):
            return _held(col) if _pandas_copy_on_write() else col.to_numpy()
        import pandas as pd

        # extension dtypes (nullable Int64 / Float64 / boolean, arrow): a missing number is NaN; without
        # one, integers stay integers (as floats, those beyond 2**53 would be rounded unseen)
        if pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
            native = getattr(col.dtype, "numpy_dtype", None)
            if native is not None and native.kind in "iub" and not col.hasnans:
                return col.to_numpy(dtype=native)
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        return col.to_numpy()
    if mod == "polars":
        if getattr(col.dtype, "time_zone", None):
            return _to_numpy(col.to_arrow())  # numpy's datetime64 has no time zone
        return col.to_numpy()
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if _zoned(col):  # numpy's datetime64 would drop the zone: pandas Timestamps keep it
            return np.asarray(col.to_pandas(), dtype=object)
        if col.null_count and pa.types.is_floating(col.type) is False and (
            pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)
        ):
            col = col.cast(pa.float64())
        return col.to_numpy(zero_copy_only=False)
    return np.asarray(col)


def _sequence(values, column: str | None = None) -> np.ndarray:
    """A column given in a dict: a Python list or tuple, a numpy array, a torch tensor, a pandas,
    polars or Arrow column (as :func:`_to_numpy` reads it), or anything numpy reads.

    A list is read as typed: numbers mixed with text stay Python objects (numpy would turn them
    all into text, so that 1 and "1" became one id and the message about a grade "0" named the
    wrong value), as do integers beyond 2**53 among floats (numpy would round them); nested lists
    of different lengths are refused.
    """
    values = _unwrapped_pandas(values)
    mod = _module(values)
    if mod in ("pandas", "polars", "pyarrow") and hasattr(values, "__len__") and not hasattr(values, "columns"):
        return _to_numpy(values)
    if mod == "torch":
        return _tensor(values, column)
    if isinstance(values, np.ma.MaskedArray):
        if np.ma.getmaskarray(values).any():
            raise DataError(f"{_which(column)} is a masked array with {int(np.ma.getmaskarray(values).sum())} masked "
                            "values (missing): drop those rows or fill them in (numpy would read the hidden values).")
        return np.asarray(values.data)
    if isinstance(values, (list, tuple)):
        try:
            arr = np.asarray(values)
        except ValueError:
            raise DataError(f"{_which(column)} holds nested sequences of different lengths (ragged lists); a "
                            "column needs one value per row.") from None
        if arr.dtype.kind in "US" and any(not isinstance(v, (str, bytes, np.str_, np.bytes_)) for v in values):
            arr = np.empty(len(values), dtype=object)
            arr[:] = list(values)  # as typed: numbers stay numbers beside the text
        elif arr.dtype.kind == "f" and any(isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53
                                           for v in values):
            arr = np.empty(len(values), dtype=object)
            arr[:] = list(values)  # not rounded: refused as beyond 2**53, or kept exactly as ids
        return arr
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{_which(column)} (a {type(values).__name__}) cannot be read as an array: {exc}") from None


def _which(column: str | None) -> str:
    return "A column" if column is None else f"Column {column!r}"


def _tensor(values, column: str | None = None) -> np.ndarray:
    """A torch tensor as a numpy array (on the host; half precision as float32, which holds it)."""
    import torch

    if values.device.type == "meta":
        raise DataError(f"{_which(column)} is a tensor on the 'meta' device, which has a shape but no values: "
                        "materialise it first (for example tensor.to('cpu') after computing it).")
    if values.layout != torch.strided:
        values = values.to_dense()
    values = values.detach()
    if values.dtype in (torch.float16, torch.bfloat16):
        values = values.float()
    return values.cpu().numpy()


def _zoned(col) -> bool:
    """An Arrow array of timestamps with a time zone."""
    import pyarrow as pa

    return pa.types.is_timestamp(col.type) and col.type.tz is not None


def _zoned_ids(col):
    """Arrow timestamps with a time zone as codes into their distinct values, pandas Timestamps in
    that zone (numpy's datetime64 would drop it: 00:00+01:00 read as 23:00 the day before)."""
    import pandas as pd
    import pyarrow as pa

    from .ids import Encoded

    ticks = col.cast(pa.int64()).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)  # a null stays NA
    codes, uniques = pd.factorize(ticks)  # NA: code -1, a missing id
    stamps = pd.to_datetime(np.asarray(uniques, dtype=np.int64), unit=col.type.unit, utc=True).tz_convert(col.type.tz)
    return Encoded(codes.astype(np.int64), np.asarray(stamps, dtype=object))


def id_values(col, column: str | None = None):
    """An id column in its cheapest form (see :mod:`topkeval.inputs.ids`): Arrow strings stay Arrow strings,
    categoricals and dictionaries give their codes and labels, everything else a numpy array."""
    from .ids import Encoded

    col = _unwrapped_pandas(col)
    mod = _module(col)
    if mod == "pandas":
        import pandas as pd

        if isinstance(col.dtype, pd.CategoricalDtype):
            # the Categorical's own codes (a read-only view: .cat.codes would copy them into a Series)
            return Encoded(col.array.codes, np.asarray(col.cat.categories))
        if hasattr(col.array, "__arrow_array__") and not pd.api.types.is_numeric_dtype(col.dtype) \
                and not pd.api.types.is_bool_dtype(col.dtype):
            return id_values(col.array.__arrow_array__())  # pyarrow-backed strings: no Python objects
        return _to_numpy(col)
    if mod == "polars":
        import polars as pl

        if col.dtype in (pl.String, pl.Categorical, pl.Enum) or isinstance(col.dtype, (pl.Categorical, pl.Enum)) \
                or getattr(col.dtype, "time_zone", None):
            return id_values(col.to_arrow())
        return _to_numpy(col)
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if pa.types.is_dictionary(col.type):
            # indices may be unsigned (polars' categoricals): widened before a null becomes -1
            codes = col.indices.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
            labels = col.dictionary
            labels = _zoned_ids(labels).labels if _zoned(labels) else labels.to_numpy(zero_copy_only=False)
            return Encoded(codes, labels)
        if _zoned(col):
            return _zoned_ids(col)
        if pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            return col
        return _to_numpy(col)
    return _sequence(col, column)


class Columns(dict):
    """``{name: values}`` as :func:`read_columns` gives them, with ``borrowed``: the numpy arrays among
    them that may be the caller's own memory (its numpy array itself, a view of a pandas, polars or
    Arrow column, a tensor's memory), which the caller may change in place after the evaluation.
    What keeps rows beyond the call (a grouped log in Results) copies those, unless it copied them
    already (:func:`topkeval.inputs.grouped.owned`)."""

    borrowed: list


def _borrowed(values, given) -> bool:
    """Whether ``values`` (read from ``given``) may be memory the caller holds: anything but a numpy
    array that owns its data and that the caller did not give itself (a conversion made here)."""
    from .ids import Encoded

    if isinstance(values, Encoded):
        return _borrowed(values.codes, None)
    if not isinstance(values, np.ndarray):
        return False  # Arrow strings: immutable
    if values is given or values.flags.owndata:
        return values is given
    return not _immutable(values)


def _immutable(values: np.ndarray) -> bool:
    """Whether the caller cannot change the memory of the view ``values``: :func:`_held` made it.
    (Arrow and polars memory may be a numpy array's, shared without a copy: they are copied.)"""
    base: object = values
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, _Held)


def read_columns(data, columns: Sequence[str], owner: str = "evaluate",
                 id_columns: Sequence[str] = (), roles: dict | None = None, where: str | None = None,
                 hint: str | Mapping[str, str] = "", allow_empty: bool = False) -> Columns:
    """Return ``{name: values}`` for each wanted column of ``data``: numpy arrays, and for the id
    columns whatever :func:`id_values` gives (Arrow strings, codes and labels, or numpy). Its
    ``borrowed`` lists the arrays that may be the caller's memory (see :class:`Columns`).

    Parameters
    ----------
    data : pandas.DataFrame, polars.DataFrame, pyarrow.Table, dict of arrays, str or Path
        A table (an Arrow dataset or stream of record batches is read whole), or a path to a .parquet file (or directory of them) or a .csv / .tsv file.
    columns : sequence of str
        Column names to read; each must exist.
    owner : str
        The function named in messages.
    id_columns : sequence of str
        Id columns (query, item, run name): a text file (CSV) gives them as text, never parsed as
        numbers ("007" is not 7), and none is turned into Python objects.
    roles, where, hint
        For messages: the parameter that names each column (``{"click": "relevance"}``), what the
        table is ("the judgments (qrels=)"), and a sentence to add when a column is missing (or one
        per column: ``{column: sentence}``).

    Raises
    ------
    ColumnError
        A column is missing, or two columns answer to one name (the message names the closest
        match and the available columns).
    InputFileError
        The file is missing, unreadable or of an unknown type.
    DataError
        The table is empty or its columns differ in length.
    """
    source = None
    from_file = isinstance(data, (str, os.PathLike))
    if from_file:
        source = data
        data = _read_file(data, columns, id_columns, roles, hint, where or "the data")
    mod = _module(data)
    label: dict = {}
    if mod == "pandas" and hasattr(data, "columns"):
        label = _check_columns(columns, list(data.columns), (where or "the DataFrame"), roles, hint)
        out = {c: (id_values if c in id_columns else _to_numpy)(data[label[c]]) for c in columns}
    elif mod == "polars" and type(data).__name__ in ("DataFrame", "LazyFrame"):
        if type(data).__name__ == "LazyFrame":  # (its .columns resolves the schema with a warning)
            _check_columns(columns, data.collect_schema().names(), where or "the LazyFrame", roles, hint)
            data = data.select(list(columns)).collect()
        _check_columns(columns, data.columns, where or "the DataFrame", roles, hint)
        out = {c: (id_values if c in id_columns else _to_numpy)(data.get_column(c)) for c in columns}
    elif mod == "pyarrow" and hasattr(data, "schema"):
        _check_columns(columns, data.schema.names, where or "the table", roles, hint)
        if not hasattr(data, "column"):  # a dataset or a scanner (to_table), a stream of batches (read_all)
            data = data.to_table(columns=list(columns)) if hasattr(data, "to_table") else data.read_all()
        from ..kernels.threads import run_parallel

        # Arrow converts (and joins the row groups of) each column in C++: the columns in threads
        out = dict(zip(columns, run_parallel(lambda c: (id_values if c in id_columns else _to_numpy)(data.column(c)),
                                             columns)))
    elif isinstance(data, Mapping):
        label = _check_columns(columns, list(data.keys()), where or str(getattr(data, "described", "the dict")), roles,
                               hint)
        out = {c: id_values(data[label[c]], c) if c in id_columns else _sequence(data[label[c]], c) for c in columns}
    else:
        raise DataError(
            f"The data of {owner} must be a pandas, polars or pyarrow table, a dict of arrays, or a path to a "
            f".parquet / .csv file. Got {type(data).__name__}."
        )
    lengths = {c: len(v) if getattr(v, "ndim", 1) == 1 else -1 for c, v in out.items()}
    bad = [c for c, n in lengths.items() if n < 0]
    if bad:
        raise DataError(f"Column {bad[0]!r} must be one-dimensional; got shape {out[bad[0]].shape}.")
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{c!r}: {n}" for c, n in lengths.items())
        raise DataError(f"Columns differ in length ({desc}); every column needs one value per row.")
    if not allow_empty and (not lengths or next(iter(lengths.values())) == 0):
        subject = (f"The file '{os.fspath(source)}' has columns but no rows" if source is not None else
                   f"The table of {where} is empty" if where else "The table is empty")
        raise DataError(f"{subject}: there is nothing to evaluate.")
    result = Columns(out)
    given = data if isinstance(data, Mapping) else {}
    result.borrowed = [] if from_file else [v.codes if hasattr(v, "codes") else v for c, v in out.items()
                                            if _borrowed(v, given.get(label[c]) if given else None)]
    return result
