"""Inputs: tables of any kind (pandas, polars, pyarrow, dicts of arrays, files) into numpy columns,
and TREC run / qrels files. Nothing here computes a metric.
"""

import os
from pathlib import Path

from .formats import OTHER_SUFFIXES, format_of
from .paths import input_path, input_paths
from .tables import read_columns
from .trec import read_qrels, read_run, read_runs, write_run


def is_trec_path(data) -> bool:
    """A path to an existing file that is not a table (no row of :mod:`topkeval.inputs.formats` names it)
    nor another known format."""
    if not isinstance(data, (str, os.PathLike)):
        return False
    path = Path(data)
    return path.is_file() and format_of(path) is None and not "".join(path.suffixes).lower().endswith(OTHER_SUFFIXES)


def is_parquet_path(data) -> bool:
    """A path to a parquet file or a directory (of parquet files)."""
    if not isinstance(data, (str, os.PathLike)):
        return False
    path = Path(data)
    fmt = format_of(path)
    return path.exists() and (fmt is not None and fmt.folder or path.is_dir())


__all__ = ["input_path", "input_paths", "is_parquet_path", "is_trec_path", "read_columns", "read_qrels", "read_run",
           "read_runs", "write_run"]
