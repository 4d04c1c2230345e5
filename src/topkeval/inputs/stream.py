"""Evaluating files larger than memory (parquet, CSV), batch by batch, with the numbers of the in-memory path.

The file is read in batches of ``chunk_rows`` rows (only the needed columns; CSV ids as text).
When the rows are grouped by query, as logs written per query are, the rows of the last query of a
batch are held back and joined to the next batch, so no query is ever split; each batch becomes a
grouped log that the engine evaluates, and the per-query values are concatenated. Memory is
bounded by the batch, not the file (the per-query table grows with the number of queries, as the
output must; ``keep_per_query=False`` keeps running sums only).

When a query reappears after other queries (the rows are not grouped), the file is first
partitioned by a hash of the query id into temporary parquet files (one pass, bounded memory),
then each partition, which holds every row of its queries, is evaluated in memory. The results are
the same; only the order of queries in ``per_query`` follows the partitions.

``Results.diff`` of a streamed file reads the file again, batch by batch, for the item lists.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParameterError
from . import is_parquet_path, read_columns
from .formats import PARQUET, format_of
from .tables import _check_columns, file_format

#: Parquet files with more rows than this are streamed even without ``chunk_rows``.
STREAM_ABOVE_ROWS = 20_000_000
STREAM_CHUNK_ROWS = 5_000_000


class NotGrouped(Exception):
    pass


def _is_csv(path: Path) -> bool:
    """A delimited text file (CSV, TSV), whose rows are not counted before they are read."""
    fmt = format_of(path)
    return fmt is not None and fmt.text


def should_stream(data, chunk_rows: int | None) -> bool:
    """Whether ``data`` is a file to evaluate batch by batch: a parquet or CSV path with ``chunk_rows``,
    or a parquet file of more than :data:`STREAM_ABOVE_ROWS` rows."""
    if not isinstance(data, (str, os.PathLike)) or not Path(data).exists():
        return False
    path = Path(data)
    if chunk_rows is not None:
        fmt = format_of(path)
        return is_parquet_path(path) or fmt is not None and fmt.batches is not None
    if not is_parquet_path(path):
        return False
    try:
        return count_rows(path) > STREAM_ABOVE_ROWS
    except Exception:  # unreadable: the in-memory reader words the error
        return False


def _tables(path: Path, columns, text_columns, chunk_rows: int, roles: dict | None = None):
    """The file's batches (its format's batch iterator), once its columns are checked."""
    import pyarrow as pa

    fmt = file_format(path)
    if fmt is None or fmt.batches is None:
        raise ParameterError(f"chunk_rows streams a file in batches; '{path}' is of a format read whole: drop "
                             "chunk_rows.")
    try:
        names = fmt.columns(path)
    except (pa.ArrowInvalid, OSError) as exc:
        if not fmt.text:  # a parquet file's own error, as the in-memory reader gives it
            raise
        from ..errors import InputFileError

        raise InputFileError(f"Cannot read '{path}': {str(exc).strip().splitlines()[0]}") from None
    _check_columns(columns, names, f"file '{path}'", roles)
    return fmt.batches(path, columns, text_columns, chunk_rows)


def count_rows(path: Path) -> int:
    """Rows of a parquet file or directory, from its metadata."""
    import pyarrow.parquet as pq

    if path.is_file():
        return pq.ParquetFile(path).metadata.num_rows
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").count_rows()


def _check_queries(table, first_row: int) -> None:
    """Refuse missing query ids (nulls) in a batch whose first row is row ``first_row`` of the file,
    with the message and row numbers of the in-memory path."""
    query = table.column(0)
    if query.null_count:
        import pyarrow.compute as pc

        from ..errors import ColumnError

        at = int(pc.index(pc.is_null(query), True).as_py())
        raise ColumnError(f"Column {table.column_names[0]!r} has missing query ids (nulls; the first at row "
                          f"{first_row + at}); drop those rows or fill them in.")


def _grouped_tables(tables):
    """The same rows, re-cut so that no query is split: each table's last query is carried over."""
    import pyarrow as pa
    import pyarrow.compute as pc

    carry = None
    seen: set = set()
    read = 0
    for table in tables:
        rows = table.num_rows
        _check_queries(table, read)
        read += rows
        if carry is not None:
            table = pa.concat_tables([carry, table])
        n = table.num_rows
        if n == 0:
            continue
        query = table.column(0)
        other = np.flatnonzero(~pc.equal(query, query[n - 1]).to_numpy(zero_copy_only=False))
        tail = n - 1 - int(other[-1]) if len(other) else n
        head = table.slice(0, n - tail)
        # a fresh copy of the (small) tail: a slice would keep every earlier batch's buffers alive
        carry = table.slice(n - tail).combine_chunks()
        if head.num_rows:
            ids = pc.unique(head.column(0)).to_pylist()  # distinct ids only: no object per row
            if not seen.isdisjoint(ids):  # set operations in C, not a Python loop over queries
                raise NotGrouped
            seen.update(ids)
            yield head, rows
        else:
            yield None, rows
    if carry is not None and carry.num_rows:
        if not seen.isdisjoint(pc.unique(carry.column(0)).to_pylist()):
            raise NotGrouped
        yield carry, 0


def _progress(progress, rows: int) -> None:
    """Tell the caller's ``progress`` function the rows read; an error it raises names it."""
    try:
        progress(rows)
    except Exception as exc:  # the user's function: its error, said as such
        raise ParameterError(f"progress({rows}) raised {type(exc).__name__}: {exc} (progress= is called with the "
                             "number of rows read after each batch)") from exc


def _partition(tables, parts: int, tmp: Path, progress=None) -> list[Path]:
    """Write the rows into ``parts`` parquet files by a hash of the query id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..files import scratch_error

    writers: dict[int, pq.ParquetWriter] = {}
    files = [tmp / f"part-{i:04d}{PARQUET.suffixes[0]}" for i in range(parts)]
    try:
        read = 0
        for table in tables:
            _check_queries(table, read)
            read += table.num_rows
            key = pd.util.hash_array(table.column(0).to_numpy(zero_copy_only=False)) % parts
            for p in np.unique(key):
                sub = table.filter(pa.array(key == p))
                try:
                    if p not in writers:
                        writers[p] = pq.ParquetWriter(files[p], sub.schema)
                    writers[p].write_table(sub)
                except OSError as exc:  # a full disk: in words, with the fix
                    raise scratch_error(exc, tmp) from None
            if progress:
                _progress(progress, table.num_rows)
    finally:
        try:
            for w in writers.values():
                w.close()
        except OSError as exc:
            raise scratch_error(exc, tmp) from None
    return [f for f in files if f.exists()]


def _file_state(path: Path) -> tuple:
    """What changes when a file (or a directory's files) is rewritten: each file's size, modification
    time and inode."""
    files = [path] if not path.is_dir() else sorted(p for p in path.rglob("*") if p.is_file())
    out = []
    for f in files:
        st = f.stat()
        out.append((str(f), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def _unchanged(path: Path, state: tuple, what: str) -> None:
    """Refuse to read ``path`` again for ``what`` if it changed since it was evaluated."""
    from ..errors import DataError

    try:
        now = _file_state(path)
    except OSError:
        now = ()
    if now != state:
        raise DataError(f"'{path}' changed (or was removed) since it was evaluated: {what} reads it again, which "
                        "would mix the old evaluation with the new rows. Evaluate the file again.")


class StreamedFile:
    """A parquet or CSV file read as grouped logs, each holding every row of its queries: in file order
    when its rows come grouped by query, otherwise hash-partitioned into scratch files first. The file
    is read again (diff, curves) only if it has not changed since."""

    def __init__(self, path, *, query: str, relevance: str, scores: list[str], item: str | None,
                 chunk_rows: int | None, ascending: bool = False, by: list[str] | None = None,
                 weight: str | None = None):
        self.path = Path(path)
        self.state = _file_state(self.path)  # the file read now: what diff and curves read again must be the same
        self.chunk_rows = chunk_rows or STREAM_CHUNK_ROWS
        self.query, self.relevance, self.scores, self.item = query, relevance, scores, item
        self.by, self.weight, self.ascending = list(by or []), weight, ascending
        self.attributes = self.by + ([weight] if weight else [])
        self.columns = [query, relevance, *scores] + ([item] if item else []) + self.attributes
        self.text = [query] + ([item] if item else [])
        self.roles = ({s: "score" for s in scores} | {query: "query", relevance: "relevance"}
                      | ({item: "item"} if item else {}) | {c: "by" for c in self.by} | ({weight: "weight"} if weight else {}))
        self.grouped = True

    def to_log(self, table, attrs: list | None = None):
        """One table (every row of its queries) as a grouped log; its queries' attributes into ``attrs``."""
        from .grouped import build_log
        from .segments import query_attributes

        q, item = self.query, self.item
        cols = read_columns(table, self.columns, id_columns=self.text)
        log = build_log(cols[q], cols[self.relevance], {s: cols[s] for s in self.scores}, cols[item] if item else None,
                        names=dict(query=q, relevance=self.relevance, item=item or "item"), ascending=self.ascending,
                        borrowed=False)  # read from the file: ours
        if attrs is not None and self.attributes:  # each table holds every row of its queries: attributes are whole
            attrs.append(query_attributes(cols[q], cols, self.by, self.weight, q, whole=False))
        return log

    def tables(self):
        """``(table or None, rows read)`` of the file in order, each table every row of its queries;
        raises :class:`NotGrouped` as soon as a query comes back after another (then read
        :meth:`partitioned`)."""
        return _grouped_tables(_tables(self.path, self.columns, self.text, self.chunk_rows, self.roles))

    def partitioned(self, progress=None):
        """``(table, 0)`` of the file's hash partitions (scratch files), each every row of its queries."""
        self.grouped = False
        return ((t, 0) for t in _partitioned(self.path, self.columns, self.text, self.chunk_rows, progress))

    def logs_again(self, what: str):
        """The file's logs read again the way they were first read (``(log, None)`` pairs), refused if
        the file changed since."""
        self.check_unchanged(what)
        tables = ((t for t, _ in _grouped_tables(_tables(self.path, self.columns, self.text, self.chunk_rows))
                   if t is not None) if self.grouped else _partitioned(self.path, self.columns, self.text,
                                                                         self.chunk_rows))
        return ((self.to_log(t), None) for t in tables)

    def check_unchanged(self, what: str) -> None:
        _unchanged(self.path, self.state, what)

    @staticmethod
    def progress(progress, rows: int) -> None:
        _progress(progress, rows)



def _partitioned(path: Path, columns, text, chunk_rows: int, progress=None):
    """The file's rows as tables that each hold every row of their queries (hash partitions)."""
    import pyarrow.parquet as pq

    total = count_rows(path) if not _is_csv(path) else None
    parts = max(1, math.ceil((total or chunk_rows * 8) / chunk_rows))
    from ..files import scratch_error

    try:
        scratch = tempfile.TemporaryDirectory(prefix="topkeval-", dir=os.environ.get("TOPKEVAL_TMP"))
    except OSError as exc:
        raise scratch_error(exc, os.environ.get("TOPKEVAL_TMP") or tempfile.gettempdir()) from None
    with scratch as tmp:
        for f in _partition(_tables(path, columns, text, chunk_rows), parts, Path(tmp), progress):
            yield pq.read_table(f)
