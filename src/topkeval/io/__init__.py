"""Inputs: tables of any kind (pandas, polars, pyarrow, dicts of arrays, files) into numpy columns.

Nothing here computes a metric.
"""

from .tables import read_columns

__all__ = ["read_columns"]
