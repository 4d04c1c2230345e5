"""Inputs: tables of any kind (pandas, polars, pyarrow, dicts of arrays, files) into numpy columns,
and TREC run / qrels files. Nothing here computes a metric.
"""

import os
from pathlib import Path

from .paths import input_path, input_paths
from .tables import read_columns
from .trec import read_qrels, read_run, read_runs, write_run

#: File name endings of tables; any other existing file is read as a TREC run or qrels file.
TABLE_SUFFIXES = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv", ".tsv.gz")
_OTHER = (".xlsx", ".xls", ".json", ".jsonl", ".feather", ".arrow", ".ipc", ".orc", ".avro", ".pkl", ".pickle",
          ".h5", ".hdf5", ".zip", ".npy", ".npz")


def is_trec_path(data) -> bool:
    """A path to an existing file that is not a table (parquet, CSV, TSV) nor another known format."""
    if not isinstance(data, (str, os.PathLike)):
        return False
    path = Path(data)
    return path.is_file() and not "".join(path.suffixes).lower().endswith(TABLE_SUFFIXES + _OTHER)


def is_parquet_path(data) -> bool:
    """A path to a parquet file or a directory (of parquet files)."""
    if not isinstance(data, (str, os.PathLike)):
        return False
    path = Path(data)
    return path.exists() and ("".join(path.suffixes).lower().endswith((".parquet", ".pq")) or path.is_dir())


__all__ = ["input_path", "input_paths", "is_parquet_path", "is_trec_path", "read_columns", "read_qrels", "read_run",
           "read_runs", "write_run"]
