"""TREC run and qrels files: reading (gzip, comments, BOM, line-numbered errors) and writing runs.

A run line is ``query Q0 item rank score tag`` (trec_eval ignores the rank column and, as here,
anything after the tag); a qrels line is ``query iteration item grade``. Fields are separated by
any whitespace; blank lines and lines starting with ``#`` are skipped; a UTF-8 byte order mark at
the start of the file is not part of the first query id. Ids stay text (``"007"`` is not ``7``).

Files are parsed by Arrow's C reader when every line is regular (one space or one tab between
fields, the usual case); any other file, and any file with a bad line, is read line by line so that
the error names the line.
"""

from __future__ import annotations

import gzip
import math
import mmap
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError, InputFileError, ParameterError, check_column_name
from ..params import Bool, Column, FilePath, Given, Paths, Text, validate_params

#: A number as trec_eval's files write them: ASCII digits only (Python's float() would also
#: accept "1_0", "١" or "nan").
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

_RUN_COLUMNS = ("query", "q0", "item", "rank", "score", "run")
_QRELS_COLUMNS = ("query", "iteration", "item", "relevance")


def _check_file(path, what: str) -> Path:
    """The path of a TREC file, checked (:func:`topkeval.inputs.paths.input_path`): a file, not empty,
    text or gzip-compressed text."""
    from .paths import _head, _looks_like_text, input_path

    path = input_path(path, what, folder=False)
    head = _head(path)
    if not _gzipped(path) and head.startswith(b"PAR1"):  # a table: the hint below would name its own suffix
        raise InputFileError(f"Cannot read '{path}' as {what}: it is a parquet table, not a TREC file (one line of "
                             "fields per row). Pass the table to evaluate (as data, or as qrels=), or read it with "
                             "pandas.read_parquet.")
    if not _gzipped(path) and not _looks_like_text(head):
        raise InputFileError(f"Cannot read '{path}' as {what}: it holds binary data, not text (a TREC file has one "
                             "line of fields per row; a table should be named .parquet, .csv or .tsv).")
    return path


def _gzipped(path: Path) -> bool:
    """Compressed with gzip, whatever the name says (the first two bytes of gzip data are 1f 8b)."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _lines(path: Path):
    opener = gzip.open if _gzipped(path) else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="strict") as f:
            for number, line in enumerate(f, 1):
                text = line.strip()
                if text and not text.startswith("#"):
                    yield number, text.split()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputFileError(f"Cannot read '{path}': {exc}") from None


def _bad(path, number, what, line):
    return DataError(f"{os.fspath(path)}, line {number}: {what}. Got: {' '.join(line)!r}")


def _fast(path: Path, names: tuple[str, ...], keep: dict):
    """The columns ``keep`` (name -> "id" or "number") of a file parsed by Arrow's multithreaded C
    reader: ids as Arrow strings (as written: no Python object per row, never parsed as numbers),
    numbers as float64. None when a line is not regular (then the line reader runs, and words any
    error with its line number)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        with (gzip.open(path, "rb") if _gzipped(path) else open(path, "rb")) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError):
        return None
    if not head.strip():
        return None
    delimiter = "\t" if b"\t" in head.split(b"\n", 1)[0] else " "
    types = {n: pa.string() if kind == "id" else pa.float64() for n, kind in keep.items()}
    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=list(names), block_size=_block_size(path)),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                            escape_char=False, newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(keep),
                                                strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, UnicodeDecodeError):
        return None  # a bad number, a line of another length: the slow reader says which line
    from ..kernels.arrow import one_chunk, text_buffers

    out = {}
    for name, kind in keep.items():
        column = table.column(name)
        if kind == "number":
            values = column.to_numpy()
            if not np.isfinite(values).all():
                return None
            out[name] = values
            continue
        column = one_chunk(column)
        if len(column):
            offsets, data = text_buffers(column)
            ends = offsets[1:]
            # an empty id (two separators in a row, a leading or trailing one), an id holding a
            # blank or another ASCII control byte (a line separated by tabs and spaces: the line
            # reader splits it at every blank), a comment line: the line reader
            if (ends == offsets[:-1]).any() or (data[offsets[0]:offsets[-1]] <= 32).any() \
                    or (name == names[0] and (data[offsets[:-1]] == ord("#")).any()):
                return None
        out[name] = _text(column)
    return out


def _split(path: Path, fields: dict, least: int, most: int, seeds: dict | None = None) -> dict | None:
    """The columns ``fields`` (name -> (position, "id" or "number")) of a file split by the compiled
    reader (:func:`topkeval.kernels.fields.split_fields`): per id, ``(codes, offsets, data)`` (codes
    into its distinct values, in order of first appearance, hashed once from the file's bytes, whose
    bytes are ``data[offsets[c]:offsets[c + 1]]``), per number, float64 values; ``seeds``: id name
    -> ``(offsets, data)`` of ids that take the first codes. None when the kernels do not run compiled
    here (the file is small: Arrow's reader is cheaper than loading them) or when the file is not one
    that reader takes (then Arrow's reader or the line reader reads it, as they would have)."""
    from ..kernels.fields import split_fields
    from ..kernels.jit import runs_compiled

    try:
        size = path.stat().st_size
        if not runs_compiled(size // 32):  # about a line per 32 bytes
            return None
        raw: bytes | mmap.mmap
        with open(path, "rb") as f:
            if _gzipped(path):
                raw = gzip.decompress(f.read())
            else:  # the file's pages as they are (no copy); released once split
                raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, EOFError, ValueError, gzip.BadGzipFile):
        return None
    names = list(fields)
    ids = [n for n in names if fields[n][1] == "id"]
    try:
        got = split_fields(raw, [fields[n][0] for n in names], [fields[n][1] == "number" for n in names], least,
                           most, seeds=[(seeds or {}).get(n) for n in ids])
    finally:
        if isinstance(raw, mmap.mmap):
            raw.close()
    if got is None or any(offsets[-1] >= 2**31 for _, offsets, _ in got[0]):
        return None
    out = dict(zip(ids, got[0]))
    out.update(zip([n for n in names if fields[n][1] == "number"], got[1]))
    return {n: out[n] for n in names}


def _labels(offsets: np.ndarray, data: np.ndarray) -> pd.CategoricalDtype:
    """The pandas dtype of ids coded into the distinct values ``data[offsets[c]:offsets[c + 1]]``."""
    import pyarrow as pa

    labels = pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
    index = pd.Index(labels.to_numpy(zero_copy_only=False), dtype=object)
    # the values are distinct text (the reader's hash table): pandas' own check of that, a hashing of
    # every value, is skipped where pandas offers to
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    return fast(index, False) if fast is not None else pd.CategoricalDtype(index)


def _categorical(codes: np.ndarray, dtype: pd.CategoricalDtype) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int32, copy=False), dtype=dtype, validate=False)


def _coded(path: Path, fields: dict, least: int, most: int) -> dict | None:
    """:func:`_split`'s columns, ids as pandas categoricals."""
    columns = _split(path, fields, least, most)
    if columns is None:
        return None
    return {n: _categorical(c[0], _labels(*c[1:])) if isinstance(c, tuple) else c for n, c in columns.items()}


_RUN_FIELDS = {"query": (0, "id"), "item": (2, "id"), "score": (4, "number"), "run": (5, "id")}
_QRELS_FIELDS = {"query": (0, "id"), "item": (2, "id"), "relevance": (3, "number")}


def coded_runs(paths, qrels=None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """:func:`read_runs` for an evaluation: the same table, its ids as pandas categoricals (no text per
    row: each id hashed once, by the compiled reader) where every file is one that reader takes;
    else :func:`read_runs`'s own table. With ``qrels`` (a TREC qrels file), that file too, read
    first, as :func:`read_qrels` reads it, its ids and the runs' in one label space (shared
    categories: the judgments' ids first, the runs' others after), or None where the compiled
    reader does not take it (or a grade is not an integer: :func:`read_qrels` then says where)."""
    paths = [os.fspath(p) for p in paths]
    if len(set(paths)) != len(paths):
        return read_runs(paths), None  # refused there
    judged = None
    if qrels is not None:
        judged = _split(_check_file(qrels, "a TREC qrels file"), _QRELS_FIELDS, 4, 4)
        if judged is not None and not _whole(judged["relevance"]):
            judged = None
    seeds = None if judged is None else {"query": judged["query"][1:], "item": judged["item"][1:]}
    splits = []
    for p in paths:
        columns = _split(_check_file(p, "a TREC run file"), _RUN_FIELDS, 6, 2**62, seeds)
        if columns is None:
            return read_runs(paths), None
        splits.append(columns)
    frames = [pd.DataFrame({n: _categorical(c[0], _labels(*c[1:])) if isinstance(c, tuple) else c
                            for n, c in columns.items()}, copy=False) for columns in splits]  # arrays of our own
    prefix = _run_prefixes(paths, [list(f["run"].cat.categories) for f in frames])  # named as read_runs names them
    if prefix is not None:
        frames = [f.assign(run=f["run"].cat.rename_categories([pre + ":" + t for t in f["run"].cat.categories]))
                  for f, pre in zip(frames, prefix)]
    if len(frames) == 1:
        table = frames[0]
    else:
        from pandas.api.types import union_categoricals

        table = pd.DataFrame({name: union_categoricals([f[name] for f in frames]) if name != "score" else
                              np.concatenate([f[name].to_numpy() for f in frames]) for name in frames[0].columns})
    if judged is None:
        return table, None
    # every file's ids start with the judgments' (its seeds), so the first file's, and the union's, do too
    return table, pd.DataFrame({"query": _categorical(judged["query"][0], table["query"].dtype),
                                "item": _categorical(judged["item"][0], table["item"].dtype),
                                "relevance": judged["relevance"].astype(np.int64)}, copy=False)


def _whole(grades: np.ndarray) -> bool:
    """Grades that are all integers as float64 holds them exactly (a qrels file's)."""
    return bool((np.abs(grades) < 2**53).all() and (grades == np.floor(grades)).all())


def _block_size(path: Path) -> int:
    """Bytes per block of Arrow's reader: blocks are parsed in parallel, so a file makes several per
    thread (a few large blocks would leave threads idle at the end), and none under 1 MiB."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 1 << 24
    return int(min(1 << 24, max(1 << 20, size // (4 * (os.cpu_count() or 1)))))


def _text(column):
    """Arrow strings as a pandas column that keeps them (no Python object per row)."""
    return pd.arrays.ArrowExtensionArray(column)


def _strings(values: list):
    """Ids of the line-by-line reader, as the fast reader gives them (Arrow strings)."""
    import pyarrow as pa

    return _text(pa.array(values, pa.string()))


@validate_params(path=FilePath())
def read_run(path) -> pd.DataFrame:
    """Read a TREC run file.

    Parameters
    ----------
    path : str or Path
        ``query Q0 item rank score tag`` per line; ``.gz`` is decompressed.

    Returns
    -------
    pandas.DataFrame
        Columns ``query``, ``item`` (text, as written, kept as Arrow strings), ``score`` (float),
        ``run`` (the tag), in file order.

    Raises
    ------
    DataError
        A line with fewer than 6 fields or a score that is not a finite number (the message gives
        the line number), or a file with no run line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> _ = p.write_text("q1 Q0 d1 1 0.9 bm25\\nq1 Q0 007 2 0.5 bm25\\n")
    >>> read_run(p)
      query item  score   run
    0    q1   d1    0.9  bm25
    1    q1  007    0.5  bm25
    """
    path = _check_file(path, "a TREC run file")
    columns = _fast(path, _RUN_COLUMNS, {"query": "id", "item": "id", "score": "number", "run": "id"})
    if columns is not None:
        return pd.DataFrame(columns)
    q, it, sc, tag = [], [], [], []
    for number, f in _lines(path):
        if len(f) < 6:
            swapped = ("; this looks like a qrels line (query iteration item grade): the run and the judgments may be "
                       "swapped") if len(f) == 4 else ""
            raise _bad(path, number, f"a run line needs 6 fields (query Q0 item rank score tag){swapped}", f)
        if not _NUMBER.fullmatch(f[4]):
            raise _bad(path, number, f"the score {f[4]!r} is not a finite number", f)
        s = float(f[4])
        if not np.isfinite(s):
            raise _bad(path, number, f"the score {f[4]!r} is not finite", f)
        q.append(f[0])
        it.append(f[2])
        sc.append(s)
        tag.append(f[5])
    if not q:
        raise DataError(f"{os.fspath(path)} has no run lines.")
    return pd.DataFrame({"query": _strings(q), "item": _strings(it), "score": np.asarray(sc, np.float64),
                         "run": _strings(tag)})


@validate_params(path=FilePath())
def read_qrels(path) -> pd.DataFrame:
    """Read a TREC qrels file.

    Parameters
    ----------
    path : str or Path
        ``query iteration item grade`` per line; ``.gz`` is decompressed.

    Returns
    -------
    pandas.DataFrame
        Columns ``query``, ``item`` (text, as written, kept as Arrow strings) and ``relevance`` (the
        grade, an integer).

    Raises
    ------
    DataError
        A line without 4 fields or with a grade that is not an integer (with the line number):
        trec_eval reads the leading digits of a grade, so that "1.5" or "1_0" would silently be 1.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
    >>> _ = p.write_text("q1 0 d1 1\\nq1 0 d3 2\\n")
    >>> read_qrels(p)
      query item  relevance
    0    q1   d1          1
    1    q1   d3          2
    """
    path = _check_file(path, "a TREC qrels file")
    columns = _fast(path, _QRELS_COLUMNS, {"query": "id", "item": "id", "relevance": "number"})
    if columns is not None:
        grade = columns["relevance"]
        if _whole(grade):
            return pd.DataFrame({**columns, "relevance": grade.astype(np.int64)})
    q, it, g = [], [], []
    for number, f in _lines(path):
        if len(f) != 4:
            swapped = ("; this looks like a run line (query Q0 item rank score tag): the run and the judgments may be "
                       "swapped") if len(f) == 6 and f[1].upper() == "Q0" else ""
            raise _bad(path, number, f"a qrels line needs 4 fields (query iteration item grade){swapped}", f)
        grade = float(f[3]) if _NUMBER.fullmatch(f[3]) else math.nan
        if math.isfinite(grade) and grade == math.floor(grade) and abs(grade) >= 2**53:
            raise _bad(path, number, f"the grade {f[3]!r} is beyond 2**53, past the integers a float64 holds "
                                     "exactly: use grades of ordinary size", f)
        if not (abs(grade) < 2**53 and grade == math.floor(grade)):
            raise _bad(path, number, f"the grade {f[3]!r} is not an integer (trec_eval would read only its "
                                     "leading digits)", f)
        q.append(f[0])
        it.append(f[2])
        g.append(int(grade))
    if not q:
        raise DataError(f"{os.fspath(path)} has no qrels lines.")
    return pd.DataFrame({"query": _strings(q), "item": _strings(it), "relevance": np.asarray(g, np.int64)})


def _writable_id(values, what: str) -> np.ndarray:
    from .ids import is_arrow

    if is_arrow(values) or hasattr(values, "codes"):  # Arrow strings, or codes into labels
        from .ids import as_text

        values = as_text(values)
        values = values.to_numpy(zero_copy_only=False) if is_arrow(values) else values
    text = np.asarray(values).astype(str) if not isinstance(values, np.ndarray) or values.dtype.kind != "O" \
        else np.array([str(v) for v in values], dtype=object)
    bad = np.array([not v or any(c.isspace() for c in v) for v in text])
    if bad.any():
        raise DataError(f"A TREC run cannot hold {what} {str(text[int(np.argmax(bad))])!r}: ids are separated by "
                        "whitespace, so they must be non-empty and contain none (spaces, tabs, newlines). "
                        "Rename those ids first.")
    return text


@validate_params(frame=Given("a table, read by io.tables"), path=FilePath(), query=Column(), item=Column(),
                 score=Column(), run_name=[Text(empty=False, max_length=1000), None], overwrite=Bool())
def write_run(frame: pd.DataFrame, path, *, query: str = "query", item: str = "item", score: str = "score",
              run_name: str | None = None, overwrite: bool = False) -> None:
    """Write a TREC run: per query, items by descending score, ranks from 1.

    The run name (the tag) is ``run_name``, else each row's value of a ``run`` column (as
    :func:`read_run` gives it; several runs stay apart), else ``topkeval``.

    Every score is written with full precision, so that :func:`read_run` reads back the same
    numbers. Ties keep the frame's order (trec_eval itself reorders ties by item id).

    Raises
    ------
    ColumnError
        A column is missing, an id is missing (None, NaN, NaT) or ids mix kinds ('1' and 1).
    DataError
        An id or the run name contains whitespace or is empty, an item is listed twice for a query,
        or a score is not finite or an integer beyond 2**53: the file could not be read back as
        written.
    OutputFileError
        ``path`` cannot be written: its folder is missing or read-only, something other than a
        regular file is there (a directory, a link, a device), a file is there and ``overwrite`` is
        False, or the disk filled up (the file is written atomically: nothing is left behind).
    ParameterError
        ``path`` is not a path (None, empty, a NUL byte), or ``run_name`` is empty.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.run"
    >>> write_run(pd.DataFrame({"query": ["q1", "q1"], "item": ["a", "b"], "score": [0.1, 0.7]}), p)
    >>> print(p.read_text(), end="")
    q1 Q0 b 1 0.7 topkeval
    q1 Q0 a 2 0.1 topkeval
    """
    from ..files import check_output_path, open_output
    from .ids import check_ids
    from .tables import column_names, read_columns

    for name, value in (("query", query), ("item", item), ("score", score)):
        check_column_name(value, name, "write_run")
    if run_name is not None and not isinstance(run_name, str):
        raise ParameterError(f"The 'run_name' parameter of write_run must be a string. Got {run_name!r} instead.")
    per_row = run_name is None and "run" in column_names(frame)  # a dict's or an Arrow table's too
    ids = [query, item] + (["run"] if per_row else [])
    cols = read_columns(frame, [query, item, score] + (["run"] if per_row else []), owner="write_run", id_columns=ids)
    for name, role in zip(ids, ("query", "item", "run")):  # a missing id would be written as the text 'nan'
        check_ids(cols[name], name, role)
    # run_name="" is refused by _writable_id (an empty tag cannot be read back), never replaced
    tags = _writable_id(cols["run"], "the run name") if per_row else \
        _writable_id(["topkeval" if run_name is None else run_name], "the run name").repeat(len(cols[score]))
    scores = cols[score]
    if scores.dtype.kind not in "iuf" or not np.isfinite(scores.astype(np.float64)).all():
        raise DataError(f"Column {score!r} must hold finite numbers to be written as TREC scores "
                        "(NaN and infinities cannot be read back).")
    if scores.dtype.kind in "iu" and len(scores) and (scores.max() > 2**53 or scores.min() < -(2**53)):
        raise DataError(f"Column {score!r} has integer scores beyond 2**53, which trec_eval and read_run read as "
                        "floats, which cannot hold them exactly (two different scores could become equal, and "
                        "ranks flip): rescale them.")
    q = _writable_id(cols[query], "the query id")
    i = _writable_id(cols[item], "the item id")
    twice = pd.DataFrame({"t": tags, "q": q, "i": i}).duplicated()
    if twice.any():  # trec_eval and read_run refuse a run that lists an item twice for a query
        at = int(np.argmax(twice.to_numpy()))
        raise DataError(f"write_run got query {str(q[at])!r}, item {str(i[at])!r} twice (run {str(tags[at])!r}): a "
                        "TREC run lists each item once per query, or trec_eval and read_run refuse it. Deduplicate "
                        "the rows first.")
    path = check_output_path(path, overwrite=overwrite, owner="write_run")
    order = pd.DataFrame({"t": tags, "q": q, "s": scores.astype(np.float64)}).sort_values(
        ["t", "q", "s"], ascending=[True, True, False], kind="stable")
    idx = order.index.to_numpy()
    ranks = order.groupby(["t", "q"], sort=False).cumcount().to_numpy() + 1
    with open_output(path, overwrite=overwrite, owner="write_run") as f:
        for row, r in zip(idx, ranks):
            f.write(f"{q[row]} Q0 {i[row]} {r} {float(scores[row])!r} {tags[row]}\n")


@validate_params(paths=Paths())
def read_runs(paths) -> pd.DataFrame:
    """Read several TREC run files into one frame; the ``run`` column names each run.

    A run is named by its tag. When two files share a tag, each run is named ``file:tag``; when two
    files also share a file name (``d1/a.run``, ``d2/a.run``), it is named ``path:tag`` with the
    path as given. The same path given twice is refused, and so are names that would still be equal
    (a colon in a file name or a tag): no two runs ever merge into one.
    """
    paths = [os.fspath(p) for p in paths]
    if len(set(paths)) != len(paths):
        twice = next(p for p in paths if paths.count(p) > 1)
        raise ParameterError(f"The run file {twice!r} is given twice; give each run once.")
    frames = [read_run(p) for p in paths]
    prefix = _run_prefixes(paths, [list(pd.unique(f["run"])) for f in frames])
    if prefix is not None:
        frames = [f.assign(run=pre + ":" + f["run"]) for f, pre in zip(frames, prefix)]
    return pd.concat(frames, ignore_index=True)


def _run_prefixes(paths: list[str], tags: list[list[str]]) -> list[str] | None:
    """None where every run's tag is its own name; else each file's prefix, runs being named
    ``prefix:tag``: the file's name, or its path where two files share a name. Refused where two runs
    would still share a name (a colon in a file name or a tag: ``a`` with tag ``b:c`` and ``a:b`` with
    tag ``c``), which would merge them into one model."""
    if len({t for ts in tags for t in ts}) == sum(len(ts) for ts in tags):
        return None
    names = [Path(p).name for p in paths]
    prefix = names if len(set(names)) == len(names) else paths
    seen: dict[str, tuple[str, str]] = {}
    for path, pre, ts in zip(paths, prefix, tags):
        for t in ts:
            other = seen.setdefault(f"{pre}:{t}", (path, t))
            if other != (path, t):
                raise ParameterError(
                    f"Two runs would both be named {pre + ':' + t!r}: the run {other[1]!r} of {other[0]!r} and the run "
                    f"{t!r} of {path!r} (runs that share a tag are named file:tag, and a colon in a file name or a tag "
                    "makes two such names equal). Rename one of the files, or give the runs distinct tags.")
    return prefix
