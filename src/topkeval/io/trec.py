"""TREC run and qrels files: reading (gzip, comments, line-numbered errors) and writing runs.

A run line is ``query Q0 item rank score tag`` (trec_eval ignores the rank column and, as here,
anything after the tag); a qrels line is ``query iteration item grade``. Fields are separated by
any whitespace; blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError, InputFileError


def _lines(path):
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"File not found: '{path}'. Check the path.")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="strict") as f:
            for number, line in enumerate(f, 1):
                text = line.strip()
                if text and not text.startswith("#"):
                    yield number, text.split()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputFileError(f"Cannot read '{path}': {exc}") from None


def _bad(path, number, what, line):
    return DataError(f"{os.fspath(path)}, line {number}: {what}. Got: {' '.join(line)!r}")


def read_run(path) -> pd.DataFrame:
    """Read a TREC run file.

    Parameters
    ----------
    path : str or Path
        ``query Q0 item rank score tag`` per line; ``.gz`` is decompressed.

    Returns
    -------
    pandas.DataFrame
        Columns ``query``, ``item`` (strings), ``score`` (float), ``run`` (the tag), in file order.

    Raises
    ------
    DataError
        A line with fewer than 6 fields or a score that is not a finite number (the message gives
        the line number), or a file with no run line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> _ = p.write_text("q1 Q0 d1 1 0.9 bm25\\nq1 Q0 d2 2 0.5 bm25\\n")
    >>> read_run(p)
      query item  score   run
    0    q1   d1    0.9  bm25
    1    q1   d2    0.5  bm25
    """
    q, it, sc, tag = [], [], [], []
    for number, f in _lines(path):
        if len(f) < 6:
            raise _bad(path, number, "a run line needs 6 fields (query Q0 item rank score tag)", f)
        try:
            s = float(f[4])
        except ValueError:
            raise _bad(path, number, f"the score {f[4]!r} is not a number", f) from None
        if not np.isfinite(s):
            raise _bad(path, number, f"the score {f[4]!r} is not finite", f)
        q.append(f[0])
        it.append(f[2])
        sc.append(s)
        tag.append(f[5])
    if not q:
        raise DataError(f"{os.fspath(path)} has no run lines.")
    return pd.DataFrame({"query": q, "item": it, "score": np.asarray(sc, np.float64), "run": tag})


def read_qrels(path) -> pd.DataFrame:
    """Read a TREC qrels file.

    Parameters
    ----------
    path : str or Path
        ``query iteration item grade`` per line; ``.gz`` is decompressed.

    Returns
    -------
    pandas.DataFrame
        Columns ``query``, ``item`` (strings) and ``relevance`` (the grade, a number).

    Raises
    ------
    DataError
        A line without 4 fields or with a grade that is not a number (with the line number).

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
    q, it, g = [], [], []
    for number, f in _lines(path):
        if len(f) != 4:
            raise _bad(path, number, "a qrels line needs 4 fields (query iteration item grade)", f)
        try:
            grade = int(f[3])
        except ValueError:
            try:
                grade = float(f[3])
            except ValueError:
                raise _bad(path, number, f"the grade {f[3]!r} is not a number", f) from None
        q.append(f[0])
        it.append(f[2])
        g.append(grade)
    if not q:
        raise DataError(f"{os.fspath(path)} has no qrels lines.")
    return pd.DataFrame({"query": q, "item": it, "relevance": g})


def write_run(frame: pd.DataFrame, path, *, query: str = "query", item: str = "item", score: str = "score",
              run_name: str = "topkeval") -> None:
    """Write a TREC run: per query, items by descending score, ranks from 1.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.run"
    >>> write_run(pd.DataFrame({"query": ["q1", "q1"], "item": ["a", "b"], "score": [0.1, 0.7]}), p)
    >>> print(p.read_text(), end="")
    q1 Q0 b 1 0.7 topkeval
    q1 Q0 a 2 0.1 topkeval
    """
    order = frame.sort_values([query, score], ascending=[True, False], kind="stable")
    ranks = order.groupby(query, sort=False).cumcount() + 1
    with open(path, "w", encoding="utf-8") as f:
        for (q, i, s), r in zip(order[[query, item, score]].itertuples(index=False), ranks):
            f.write(f"{q} Q0 {i} {r} {float(s)!r} {run_name}\n")


def read_runs(paths) -> pd.DataFrame:
    """Read several TREC run files into one frame; the ``run`` column names each run.

    A run is named by its tag; when two files share a tag (or one file holds several), each run
    is named ``file:tag`` so that no two runs merge.
    """
    frames = [read_run(p) for p in paths]
    tags = [set(f["run"].unique()) for f in frames]
    clash = len(set().union(*tags)) < sum(len(t) for t in tags)
    if clash:
        frames = [f.assign(run=Path(p).name + ":" + f["run"]) for f, p in zip(frames, paths)]
    return pd.concat(frames, ignore_index=True)
