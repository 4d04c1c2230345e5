"""Runs and judgments in the shapes of the IR tools, read by ``evaluate`` without renaming.

Three kinds of input are recognised, each by a rule stated here (docs/how-to/ir-ecosystem.md
says the same):

* **Rows as namedtuples**: an iterable (a list, a generator such as ir_datasets'
  ``dataset.qrels_iter()`` or ``scoreddocs_iter()``, ir_measures' ``read_trec_run``) whose first
  element is a namedtuple. Every element must be of that namedtuple's class; its fields become the
  columns (ir_datasets' ``TrecQrel(query_id, doc_id, relevance, iteration)`` and
  ``GenericScoredDoc(query_id, doc_id, score)``, ir_measures' ``Qrel`` and ``ScoredDoc``).
  The rows are read once (a generator is consumed).
* **A dict of dicts** ``{query: {doc: value}}`` (ir_measures, pytrec_eval, ranx): a mapping
  whose every value is a mapping. It holds one value per (query, doc): a score when it is the run
  (``data`` with ``qrels=``), a grade when it is the judgments (``qrels=``). The columns are named
  as ir_measures names them: ``query_id``, ``doc_id``, ``score`` or ``relevance``. As ``data``
  without ``qrels=`` it is refused (a score and a grade cannot both be in it).
* **A tool's column names** (pandas, polars and Arrow tables, dicts of columns, the two forms
  above): a table is in a tool's shape when it has that tool's two id columns,

  ==========================  =========  =========  ==============  =========
  tool                        query      item       grade (qrels)   score
  ==========================  =========  =========  ==============  =========
  ir_measures, ir_datasets    query_id   doc_id     relevance       score
  PyTerrier                   qid        docno      label           score
  ==========================  =========  =========  ==============  =========

  and then the query left at its default (``query="query"``) is the tool's query id, and the item
  (no ``item=``) its document id, even beside a ``query`` column: PyTerrier's frames carry one that
  PyTerrier defines as the query's text, and a PyTerrier frame renamed for ir_measures keeps it (two
  queries with the same text stay apart). The grade left at its default (``relevance="relevance"``)
  is read from the tool's grade column when the table lacks a ``relevance`` column. A table with both
  tools' id columns is refused as ambiguous, unless ``query=`` or ``item=`` names one tool's column
  (then that tool's shape gives the other roles). PyTerrier's ``rank`` column is ignored (the score
  ranks, as in ir_measures and trec_eval; ``ties="first"`` is the order PyTerrier's ``add_ranks``
  gives tied documents), and so is ``docid`` (Terrier's internal number).

  Several systems' tables, as ``pt.Experiment`` takes them (a list, or a dict by name), are
  refused with the way to evaluate them: stacked into one table with a name column, ``model=``.

  The judgments (``qrels=``) are matched column by column to the run's names; when they lack one
  of them and are in a tool's shape, that tool's column is read (ir_datasets' judgments with a
  PyTerrier run, for instance).

Nothing here computes a metric; :func:`recognise` returns the inputs as tables and the column names
``evaluate`` reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter

from ..errors import ColumnError, DataError
from .tables import column_names


@dataclass(frozen=True)
class Shape:
    """A tool's names of the columns of runs and judgments."""

    tool: str
    query: str
    item: str
    relevance: str


#: The tools whose shapes are recognised, by their two id columns.
SHAPES = (
    Shape("ir_measures / ir_datasets", "query_id", "doc_id", "relevance"),
    Shape("PyTerrier", "qid", "docno", "label"),
)

#: evaluate()'s default column names: a role left at its default may take a tool's column.
DEFAULT_QUERY, DEFAULT_RELEVANCE = "query", "relevance"

#: Packages whose objects are tables or arrays, never rows of namedtuples (iterating an Arrow
#: record batch reader would consume it; touching a polars LazyFrame's columns warns).
_TABLE_MODULES = frozenset({"pandas", "polars", "pyarrow", "pyspark", "numpy", "torch", "narwhals", "duckdb"})


def _module(obj) -> str:
    return type(obj).__module__.split(".")[0]


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _may_be_rows(obj) -> bool:
    """An iterable that is neither text, a path, a mapping nor a table or an array."""
    return (obj is not None and not isinstance(obj, (str, bytes, os.PathLike, Mapping))
            and _module(obj) not in _TABLE_MODULES and isinstance(obj, Iterable))


def _id_column(values: list, name: str = "id", where: str = "The data"):
    """Ids as Arrow text when every one is text (Arrow hashes them without Python objects), else the list.

    Raises
    ------
    ColumnError
        Text that is not valid Unicode (a lone surrogate, as Python decodes bytes that are not
        UTF-8 with ``errors="surrogateescape"``): it has no UTF-8 form to compare or order.
    """
    import pyarrow as pa

    try:
        column = pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers, or ids of several kinds: read as typed
        return values
    except UnicodeEncodeError:
        bad = next(v for v in values if isinstance(v, str) and not _encodes(v))
        raise not_text(bad, name, where) from None
    return values if column.null_count else column  # a missing id: said where ids are read


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_text(value: str, name: str, where: str) -> ColumnError:
    """The error for an id that is not valid Unicode text."""
    char = next(c for c in value if not _encodes(c))
    return ColumnError(f"{where}: the id {value!r} of column {name!r} is not valid text: it holds the lone surrogate {char!r} "
                       "(Python's stand-in for a byte that is not UTF-8, from decoding with "
                       "errors='surrogateescape'). Decode the ids with their real encoding, or with "
                       "errors='replace'.")


def _rows(obj, where: str, empty: bool = False) -> dict | None:
    """An iterable of namedtuples as a dict of columns (its fields); None when ``obj`` is not one.
    ``empty``: an iterator without rows is an empty dict (else an error)."""
    if isinstance(obj, (list, tuple)):
        if not obj or not _is_namedtuple(obj[0]):
            return None
        rows = obj
    else:
        iterator = iter(obj)
        first = next(iterator, _END)
        if first is _END:
            if empty:
                return {}
            raise DataError(f"{where} is an iterator without rows: there is nothing to evaluate.")
        if not _is_namedtuple(first):
            raise DataError(f"{where} is an iterator ({type(obj).__name__}) of {type(first).__name__}s; an iterator "
                            "is read when it yields namedtuples (ir_datasets' qrels_iter() and scoreddocs_iter(), "
                            "ir_measures' Qrel and ScoredDoc), each with fields such as query_id, doc_id and score "
                            "or relevance. Give such rows, or a table.")
        rows = [first, *iterator]
    kind = type(rows[0])
    if len(set(map(type, rows))) > 1:
        odd = next(i for i, row in enumerate(rows) if type(row) is not kind)
        other = type(rows[odd])
        a, b = kind.__name__, other.__name__
        if a == b:  # two classes of one name: say where each comes from
            a, b = f"{a} (of {kind.__module__}, fields {kind._fields})", \
                f"{b} (another class of that name, of {other.__module__}, fields {getattr(other, '_fields', None)})"
        raise DataError(f"{where} mixes rows of two kinds: row 0 is a {a}, row {odd} a {b}; give rows of one "
                        "namedtuple class.")
    columns = Rows((name, list(map(itemgetter(i), rows))) for i, name in enumerate(kind._fields))
    columns.described = f"the rows ({kind.__name__} namedtuples)"
    for name, values in columns.items():
        columns[name] = _id_column(values, name, where) if name in ("query_id", "doc_id", "qid", "docno") \
            else _value_column(values)
    return columns


def _value_column(values: list):
    """Scores or grades as a numpy array when they are all floats or all ints; else the list (read as
    typed where columns are read: numbers mixed with text, ints beyond 2**53 among floats)."""
    import numpy as np

    kinds = set(map(type, values))
    if kinds == {float}:
        return np.array(values, dtype=np.float64)
    if kinds == {int}:
        return np.asarray(values)  # int64, or objects beyond it (refused as grades where they are read)
    return values


_END = object()


class Rows(dict):
    """A dict of columns read from rows (namedtuples, a dict of dicts), which says what it was read from
    in messages (``described``: "the rows (ScoredDoc namedtuples)")."""

    described = "the rows"


def _dict_of_dicts(obj, value: str, where: str, empty: bool = False) -> dict | None:
    """``{query: {doc: value}}`` as a dict of columns (query_id, doc_id and ``value``); None when
    ``obj`` is not a dict of dicts. ``empty``: one without any pair is an empty dict (else an error)."""
    if not isinstance(obj, Mapping) or not obj:
        return None
    inner = [isinstance(v, Mapping) for v in obj.values()]
    if not any(inner):
        return None
    if not all(inner):
        bad = next(k for k, v in obj.items() if not isinstance(v, Mapping))
        raise DataError(f"{where} is a dict whose values are dicts ({{query: {{doc: {value}}}}}, as ir_measures takes "
                        f"it) except the value of {bad!r}, a {type(obj[bad]).__name__}: give a dict of dicts, or a "
                        "dict of columns.")
    queries: list = []
    docs: list = []
    values: list = []
    for q, inner_docs in obj.items():
        queries.extend([q] * len(inner_docs))
        docs.extend(inner_docs.keys())
        values.extend(inner_docs.values())
    if not queries:
        if empty:
            return {}
        raise DataError(f"{where} is a dict of dicts without any (query, doc) pair: there is nothing to evaluate.")
    out = Rows(query_id=_id_column(queries, "query_id", where), doc_id=_id_column(docs, "doc_id", where))
    out[value] = _value_column(values)
    out.described = f"the dict of dicts ({{query: {{doc: {value}}}}})"
    return out


def as_table(obj, role: str, empty: bool = False):
    """``obj`` as a table when it is rows of namedtuples or a dict of dicts; anything else as it is.

    ``role``: ``"run"`` (the data, with judgments apart), ``"qrels"`` or ``"table"`` (the data,
    without judgments apart). ``empty``: an iterator without rows, or a dict of dicts without a
    pair, is an empty dict (ir_measures takes them); by default they are refused (nothing to evaluate).
    """
    where = {"run": "The run (data)", "qrels": "The judgments (qrels=)", "table": "The data"}[role]
    _refuse_collections(obj, where)
    if isinstance(obj, Mapping):
        if role == "table" and _dict_of_dicts(obj, "score", where) is not None:
            raise DataError("The data is a dict of dicts ({query: {doc: value}}, as ir_measures takes a run or "
                            "judgments), which holds one value per pair, not both a grade and a score: pass the run "
                            "as data and the judgments apart, qrels={query: {doc: grade}}.")
        found = _dict_of_dicts(obj, "relevance" if role == "qrels" else "score", where, empty)
        return obj if found is None else found
    if _may_be_rows(obj):
        found = _rows(obj, where, empty)
        return obj if found is None else found
    return obj


def _is_table(value) -> bool:
    """A pandas, polars or Arrow table (not a column)."""
    return _module(value) in ("pandas", "polars", "pyarrow") and (hasattr(value, "columns") or hasattr(value, "schema")
                                                                  and hasattr(value, "num_columns"))


#: How several systems' result frames are evaluated together (pt.Experiment's list of systems).
STACK = ("stack them into one table with a column naming each system, "
         "pd.concat([frame.assign(name=name) for name, frame in systems.items()]), and pass model='name' (each "
         "system is then a model: compare, compare_all and report take them)")


def _refuse_collections(obj, where: str) -> None:
    """Refuse what is no table nor rows: a list or dict of tables (several systems), rows of dicts."""
    if isinstance(obj, Mapping) and obj and all(_is_table(v) for v in obj.values()):
        raise DataError(f"{where} is a dict of {len(obj)} tables ({', '.join(map(repr, list(obj)[:3]))}"
                        f"{', ...' if len(obj) > 3 else ''}), one per system as pt.Experiment takes them: {STACK}.")
    if isinstance(obj, (list, tuple)) and obj and all(_is_table(v) for v in obj):
        raise DataError(f"{where} is a list of {len(obj)} tables, one per system as pt.Experiment takes them: {STACK}.")
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], Mapping):
        raise DataError(f"{where} is a list of dicts (records); topkeval reads tables, and rows as namedtuples: "
                        "pass pd.DataFrame(records), whose columns are the dicts' keys.")
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], tuple) and not _is_namedtuple(obj[0]):
        raise DataError(f"{where} is a list of plain tuples, whose fields have no names; rows are read when they are "
                        "namedtuples (ir_datasets' and ir_measures' rows), with fields such as query_id, doc_id and "
                        "score or relevance. Give such rows, or a table: pd.DataFrame(rows, columns=[...]).")


def _shape(columns: list[str], where: str, query: str | None = None, item: str | None = None) -> Shape | None:
    """The tool whose two id columns ``columns`` has, or None; both tools' is ambiguous unless ``query=``
    or ``item=`` name one tool's column."""
    found = [s for s in SHAPES if s.query in columns and s.item in columns]
    named = [s for s in found if s.query == query or s.item == item]
    if len(found) > 1 and len(named) == 1:
        return named[0]
    if len(found) > 1:
        a, b = found[0], found[1]
        raise ColumnError(f"{where} has the id columns of {a.tool} ({a.query!r}, {a.item!r}) and of {b.tool} "
                          f"({b.query!r}, {b.item!r}): which to read is ambiguous. Name them: query='<column>', "
                          "item='<column>'.")
    return found[0] if found else None


def _renamed(table, names: dict):
    """``table`` with columns renamed (``{old: new}``), without copying its values where the library can."""
    mod = _module(table)
    if isinstance(table, Mapping):
        return {names.get(k, k): v for k, v in table.items()}
    if mod == "pandas":
        return table.rename(columns=names)
    if mod == "polars":
        return table.rename(names)
    if mod == "pyarrow" and hasattr(table, "rename_columns"):
        return table.rename_columns([names.get(n, n) for n in table.schema.names])
    return table  # a file or another kind: read as named (a missing column is said there)


def recognise(data, qrels, *, query: str, relevance: str | None, item: str | None):
    """The inputs as tables and the columns to read: ``(data, qrels, query, relevance, item)``.

    Rows of namedtuples and dicts of dicts become tables; a tool's shape gives the roles left at
    their defaults (see the module docstring); judgments that lack one of the run's column names
    and are in a tool's shape have that tool's columns renamed to the run's names.

    Raises
    ------
    ColumnError
        A table in two tools' shapes.
    DataError
        An iterator of other things than namedtuples, rows of mixed kinds, a dict of dicts as data
        without judgments.
    """
    from . import is_trec_path

    data = as_table(data, "run" if qrels is not None else "table")
    qrels = as_table(qrels, "qrels") if qrels is not None else None
    trec_run = is_trec_path(data) or (isinstance(data, (list, tuple)) and bool(data)
                                      and all(isinstance(p, (str, os.PathLike)) for p in data))
    if not trec_run and (query == DEFAULT_QUERY or item is None or (qrels is None and relevance == DEFAULT_RELEVANCE)):
        columns = column_names(data)
        shape = _shape(columns, "The data", None if query == DEFAULT_QUERY else query, item)
        if shape is not None:
            # in a tool's shape its query id is the query, even beside a 'query' column (PyTerrier's query text,
            # which a frame renamed for ir_measures keeps)
            if query == DEFAULT_QUERY:
                query = shape.query
            if item is None:
                item = shape.item
            if qrels is None and relevance == DEFAULT_RELEVANCE and DEFAULT_RELEVANCE not in columns \
                    and shape.relevance in columns:
                relevance = shape.relevance
    own = column_names(qrels) if qrels is not None and not is_trec_path(qrels) else []
    if own and any(name is not None and name not in own for name in (query, item, relevance)):
        shape = _shape(own, "The judgments (qrels=)", query, item)
        if shape is not None:
            names = {}
            for wanted, theirs in ((query, shape.query), (item, shape.item), (relevance, shape.relevance)):
                if wanted is not None and wanted not in own and theirs in own and theirs != wanted:
                    names[theirs] = wanted
            if names:
                qrels = _renamed(qrels, names)
    return data, qrels, query, relevance, item
