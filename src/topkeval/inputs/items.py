"""What the beyond-accuracy metrics read besides the lists, from files or from the log's own columns.

The command line's ``--catalog``, ``--history``, ``--popularity``, ``--features`` and
``--categories`` name a file (a .parquet or .csv / .tsv table) or columns of the evaluated file;
these functions read them into what :func:`topkeval.evaluate` takes in Python (``catalog=``,
``history=``, ``popularity=``, ``features=``, ``categories=``), which checks what they mean where
the metrics read them (:mod:`topkeval.analysis.beyond`): shares in (0, 1], vectors of numbers, every
item shown present. Item and query ids are read as evaluate reads them (a CSV file's as text: "007"
is not 7), so that they match the log's.

================  ==================================================================================
``catalog``       a whole number (the catalogue's size), or a table of the catalogue's items: its item
                  column (named as the log's), or its only column
``history``       a table of (query, item) rows, the columns named as the log's
``popularity``    a table of the item column and one column of shares (or one named ``popularity``), or
                  a column of the log holding each row's item's share
``features``      a table of the item column and the vector's columns (numbers), or columns of the log
                  (``f1,f2,f3``) holding each row's item's vector
``categories``    a table of the item column and one column of categories (or one named ``category``),
                  or a column of the log
================  ==================================================================================

A value read from the log's rows is one per item: an item whose rows disagree is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ColumnError, DataError, ParameterError, show
from .formats import format_of
from .ids import ids_as_objects
from .tables import column_names, read_columns


def _is_table(text: str) -> bool:
    """A table file by its name (:mod:`topkeval.inputs.formats`), or a folder (a parquet dataset)."""
    return format_of(text) is not None or Path(text).is_dir()


def _ids(values) -> np.ndarray:
    return ids_as_objects(values)


def _file(text: str, flag: str, what: str) -> str:
    """``text`` as the path of an existing table file, or a message naming ``flag``."""
    if not os.path.exists(text):
        raise ParameterError(f"{flag} {text!r}: no such file ({what}).")
    return text


def _source(text: str, flag: str, data, what: str, columns_ok: bool = True) -> tuple[str, list[str]]:
    """Whether ``text`` names a file (``("file", [])``) or columns of the log ``data``
    (``("columns", names)``); refused when it is neither."""
    if _is_table(text) and os.path.exists(text):
        return "file", []
    if columns_ok and data is not None:
        names = [n.strip() for n in text.split(",")]
        known = column_names(data) if isinstance(data, (str, os.PathLike)) else [str(c) for c in getattr(data, "columns",
                                                                                                          [])]
        if names and all(n in known for n in names):
            return "columns", names
        if not _is_table(text):
            from ..errors import did_you_mean

            missing = next(n for n in names if n not in known)
            raise ColumnError(f"{flag} {text!r}: {missing!r} is not a column of the log, nor a file ({what})."
                              f"{did_you_mean(missing, known)}")
    raise ParameterError(f"{flag} {text!r}: no such file ({what}).")


def read_catalog(text: str, *, item: str, flag: str = "catalog=") -> int | list:
    """The catalogue: a whole number is its size; a table file, its items (the ``item`` column, or
    the table's only column)."""
    stripped = text.strip().replace("_", "")
    if stripped.isdigit():
        if int(stripped) == 0:  # a size of 0 (not an id: ids come in a file)
            raise ParameterError(f"{flag} {text!r}: the catalogue's number of items must be at least 1; for a "
                                 "catalogue of item ids (an item whose id is 0 among them), give a file that lists "
                                 "them.")
        return int(stripped)
    path = _file(text, flag, "the catalogue's items, or its number of items")
    names = column_names(path)
    column = item if item in names else (names[0] if len(names) == 1 else None)
    if column is None:
        raise ColumnError(f"{flag} {text!r}: the catalogue's file needs the item column {item!r} (or a single "
                          f"column); it has {', '.join(map(repr, names))}.")
    cols = read_columns(path, [column], owner="catalog", id_columns=[column], where=f"file '{path}'")
    return list(pd.unique(_ids(cols[column])))


def read_history(text: str, *, query: str, item: str, flag: str = "history=") -> pd.DataFrame:
    """The queries' past interactions: the (query, item) rows of a table file."""
    path = _file(text, flag, "a table of the queries' past interactions, with the query and item columns")
    cols = read_columns(path, [query, item], owner="history", id_columns=[query, item], where=f"file '{path}'",
                        roles={query: "query", item: "item"})
    return pd.DataFrame({query: _ids(cols[query]), item: _ids(cols[item])})


def _value_column(path: str, item: str, flag: str, preferred: str) -> str:
    names = [n for n in column_names(path) if n != item]
    if preferred in names:
        return preferred
    if len(names) == 1:
        return names[0]
    raise ColumnError(f"{flag} {path!r}: the file needs the item column {item!r} and one column of values (or one "
                      f"named {preferred!r}); it has {', '.join(map(repr, column_names(path)))}.")


def _per_item(item_ids: np.ndarray, values: pd.DataFrame, flag: str, column: str) -> pd.DataFrame:
    """One row of ``values`` per item: the log's rows of an item must agree."""
    frame = values.set_axis(pd.Index(item_ids, dtype=object))
    first = frame[~frame.index.duplicated(keep="first")]
    if len(first) < len(frame):
        kept = first.reindex(frame.index)  # each row: its item's first values
        for name in frame.columns:
            mine, theirs = frame[name].to_numpy(), kept[name].to_numpy()
            differ = ~((mine == theirs) | (pd.isna(mine) & pd.isna(theirs)))
            if differ.any():
                at = int(np.argmax(differ))
                raise DataError(f"{flag} {column!r} gives item {show(frame.index[at])} two values ("
                                f"{show(theirs[at])} and {show(mine[at])}): a column of the log read per item holds "
                                "one value per item.")
    return first


def read_item_values(text: str, *, item: str, data=None, flag: str, preferred: str, vector: bool = False):
    """Per item values: a Series (popularity, categories) or, with ``vector``, a DataFrame indexed by
    item (features), from a table file (the item column and the value columns) or from columns of
    the log ``data``, one value per item."""
    kind, names = _source(text, flag, data, f"a table of the item column {item!r} and its values, or a column of "
                                             "the log")
    if kind == "file":
        path = text
        if vector:
            names = [n for n in column_names(path) if n != item]
            if not names:
                raise ColumnError(f"{flag} {text!r}: the file needs the item column {item!r} and the vectors' "
                                  "columns.")
        else:
            names = [_value_column(path, item, flag, preferred)]
        cols = read_columns(path, [item, *names], owner=flag.rstrip("= "), id_columns=[item], where=f"file '{path}'",
                            roles={item: "item"})
        where = f"file {text!r}"
    else:
        if not vector and len(names) != 1:
            raise ParameterError(f"{flag} {text!r}: name one column of the log (or a file).")
        cols = read_columns(data, [item, *names], owner=flag.rstrip("= "), id_columns=[item], roles={item: "item"})
        where = "the log"
    values = pd.DataFrame({n: (_ids(cols[n]) if not vector and preferred == "category" else np.asarray(cols[n]))
                           for n in names})
    items = _ids(cols[item])
    if kind == "file":
        frame = values.set_axis(pd.Index(items, dtype=object))
        if frame.index.has_duplicates:
            twice = frame.index[frame.index.duplicated()][0]
            raise DataError(f"{flag} {text!r} lists item {show(twice)} more than once ({where}): give each item one "
                            "row.")
    else:
        frame = _per_item(items, values, flag, text)
    return frame if vector else frame[names[0]]
