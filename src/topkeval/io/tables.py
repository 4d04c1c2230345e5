"""Read the columns evaluate() needs from whatever table the user has.

pandas is a dependency; polars and pyarrow tables are recognised by their type's module, so a
user who never touches polars never imports it (narwhals does the same).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import ColumnError, DataError, InputFileError, did_you_mean


def _module(obj) -> str:
    return type(obj).__module__.split(".")[0]


def csv_options(path: Path, columns: Sequence[str], text_columns: Sequence[str] = ()):
    """Arrow CSV options: the wanted columns only, id columns as text (so "007" stays "007")."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    suffixes = "".join(path.suffixes).lower()
    delimiter = "\t" if ".tsv" in suffixes else ","
    return (pcsv.ParseOptions(delimiter=delimiter),
            pcsv.ConvertOptions(include_columns=list(columns),
                                column_types={c: pa.string() for c in text_columns},
                                strings_can_be_null=False))


def _read_file(path, columns: Sequence[str], text_columns: Sequence[str] = (), roles: dict | None = None,
               hint: str | Mapping[str, str] = "", what: str = "the data"):
    import pyarrow as pa

    from .paths import input_path

    path = input_path(path, what)  # a folder, an empty file, a gzip file named .csv...: said as such
    suffixes = "".join(path.suffixes).lower()
    try:
        if path.is_dir() or suffixes.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            schema = pq.read_schema(path) if path.is_file() else pq.ParquetDataset(path).schema
            present = [c for c in columns if c in schema.names]
            _check_columns(columns, schema.names, f"file '{path}'", roles, hint)
            return pq.read_table(path, columns=present)
        if suffixes.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            import pyarrow.csv as pcsv

            parse, convert = csv_options(path, columns, text_columns)
            header = pcsv.open_csv(path, parse_options=parse).schema.names
            _check_columns(columns, header, f"file '{path}'", roles, hint)
            return pcsv.read_csv(path, parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputFileError(f"Cannot read '{path}': {first}") from None
    raise InputFileError(
        f"Cannot read '{path}': unknown file type {path.suffix or '(none)'!r}. "
        "Use a .parquet file (or a directory of them) or a .csv / .tsv file."
    )


def _check_columns(wanted: Sequence[str], available: Sequence[str], where: str, roles: dict | None = None,
                   hint: str | Mapping[str, str] = "") -> None:
    """Every wanted column exists; else say which is missing, the closest names, and which
    parameter names it (``roles``: column -> parameter, such as ``relevance``); ``hint`` is a
    sentence to add, or one per column (``{column: sentence}``)."""
    available = [str(a) for a in available]
    for name in wanted:
        if name not in available:
            shown = ", ".join(repr(a) for a in available[:20]) + (" ..." if len(available) > 20 else "")
            role = (roles or {}).get(name)
            how = f" Name the {role} column with {role}='<column>'." if role else ""
            more = hint.get(name, "") if isinstance(hint, Mapping) else hint
            raise ColumnError(
                f"Column {name!r}{f' ({role}=)' if role else ''} not found in {where}."
                f"{did_you_mean(name, available)} Available: {shown}.{how}{more}"
            )


def _to_numpy(col) -> np.ndarray:
    mod = _module(col)
    if mod == "pandas":
        if isinstance(col.dtype, np.dtype):
            return col.to_numpy()
        import pandas as pd

        # extension dtypes (nullable Int64 / Float64 / boolean, arrow): a missing number is NaN
        if pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        return col.to_numpy()
    if mod == "polars":
        return col.to_numpy()
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if col.null_count and pa.types.is_floating(col.type) is False and (
            pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)
        ):
            col = col.cast(pa.float64())
        return col.to_numpy(zero_copy_only=False)
    return np.asarray(col)


def id_values(col):
    """An id column in its cheapest form (see :mod:`topkeval.ids`): Arrow strings stay Arrow strings,
    categoricals and dictionaries give their codes and labels, everything else a numpy array."""
    from ..ids import Encoded

    mod = _module(col)
    if mod == "pandas":
        import pandas as pd

        if isinstance(col.dtype, pd.CategoricalDtype):
            return Encoded(col.cat.codes.to_numpy(), np.asarray(col.cat.categories))
        if hasattr(col.array, "__arrow_array__") and not pd.api.types.is_numeric_dtype(col.dtype) \
                and not pd.api.types.is_bool_dtype(col.dtype):
            return id_values(col.array.__arrow_array__())  # pyarrow-backed strings: no Python objects
        return _to_numpy(col)
    if mod == "polars":
        import polars as pl

        if col.dtype in (pl.String, pl.Categorical, pl.Enum) or isinstance(col.dtype, (pl.Categorical, pl.Enum)):
            return id_values(col.to_arrow())
        return _to_numpy(col)
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if pa.types.is_dictionary(col.type):
            codes = col.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            return Encoded(codes, col.dictionary.to_numpy(zero_copy_only=False))
        if pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            return col
        return _to_numpy(col)
    return np.asarray(col)


def read_columns(data, columns: Sequence[str], owner: str = "evaluate",
                 id_columns: Sequence[str] = (), roles: dict | None = None, where: str | None = None,
                 hint: str | Mapping[str, str] = "", allow_empty: bool = False) -> dict:
    """Return ``{name: values}`` for each wanted column of ``data``: numpy arrays, and for the id
    columns whatever :func:`id_values` gives (Arrow strings, codes and labels, or numpy).

    Parameters
    ----------
    data : pandas.DataFrame, polars.DataFrame, pyarrow.Table, dict of arrays, str or Path
        A table, or a path to a .parquet file (or directory of them) or a .csv / .tsv file.
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
        A column is missing (the message names the closest match and the available columns).
    InputFileError
        The file is missing, unreadable or of an unknown type.
    DataError
        The table is empty or its columns differ in length.
    """
    source = None
    if isinstance(data, (str, os.PathLike)):
        source = data
        data = _read_file(data, columns, id_columns, roles, hint, where or "the data")
    mod = _module(data)
    if mod == "pandas" and hasattr(data, "columns"):
        names = [str(c) for c in data.columns]
        _check_columns(columns, names, (where or "the DataFrame"), roles, hint)
        out = {c: (id_values if c in id_columns else _to_numpy)(data[c]) for c in columns}
    elif mod == "polars" and hasattr(data, "columns"):
        if type(data).__name__ == "LazyFrame":
            data = data.select(list(columns)).collect()
        _check_columns(columns, data.columns, where or "the DataFrame", roles, hint)
        out = {c: (id_values if c in id_columns else _to_numpy)(data.get_column(c)) for c in columns}
    elif mod == "pyarrow" and hasattr(data, "schema"):
        _check_columns(columns, data.schema.names, where or "the table", roles, hint)
        from ..kernels.threads import run_parallel

        # Arrow converts (and joins the row groups of) each column in C++: the columns in threads
        out = dict(zip(columns, run_parallel(lambda c: (id_values if c in id_columns else _to_numpy)(data.column(c)),
                                             columns)))
    elif isinstance(data, Mapping):
        _check_columns(columns, list(data.keys()), where or "the dict", roles, hint)
        out = {c: (id_values if c in id_columns else np.asarray)(data[c]) for c in columns}
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
    return out
