"""The tables of a Results as pandas, Arrow or polars tables (``to_pandas``, ``to_arrow``, ``to_polars``).

One table, three forms: Arrow is built from the pandas table (``pyarrow.Table.from_pandas``, its
index made columns) and polars from Arrow (``polars.from_arrow``, no copy of the columns it can
share), so the three hold the same values in the same column types: text ids stay text, integer
ids keep their width, dates and times their type. polars is optional and imported here only.
"""

from __future__ import annotations

import pandas as pd

from ..errors import optional_module

#: The tables of a Results (``table=`` of to_pandas, to_arrow and to_polars)
TABLES = ("per_query", "summary", "segments")


def frame(results, table: str = "per_query") -> pd.DataFrame:
    """One table of ``results`` as pandas, as the Results property of that name gives it (a copy)."""
    if table == "summary":
        return results.summary
    if table == "segments":
        return results.segments
    return results.to_pandas()


def to_arrow(results, table: str = "per_query"):
    """One table of ``results`` as a ``pyarrow.Table``: the pandas index (``model``, the segment columns)
    as leading columns, the columns of an empty table typed as when it has rows."""
    import pyarrow as pa

    data = frame(results, table)
    if table != "per_query":
        data = data.reset_index()
    out = pa.Table.from_pandas(data, preserve_index=False)
    for i, field in enumerate(out.schema):
        if pa.types.is_null(field.type) and (field.name == "model" or field.name in results.by):
            out = out.set_column(i, pa.field(field.name, pa.string()), out.column(i).cast(pa.string()))
    return out.replace_schema_metadata(None)  # no pandas metadata: a plain table (polars, DuckDB, Spark)


def to_polars(results, table: str = "per_query"):
    """One table of ``results`` as a ``polars.DataFrame`` (needs polars: the ``polars`` extra)."""
    pl = optional_module("polars", "polars", "to_polars")
    return pl.from_arrow(to_arrow(results, table))
