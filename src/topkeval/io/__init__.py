"""Inputs: tables of any kind (pandas, polars, pyarrow, dicts of arrays, files) into numpy columns.

Nothing here computes a metric.
"""

from .tables import read_columns
from .trec import read_qrels, read_run, read_runs, write_run

__all__ = ["read_columns", "read_qrels", "read_run", "read_runs", "write_run"]
