"""Evaluating parquet logs larger than memory, chunk by chunk, with results equal to the in-memory path.

The file is read in batches of ``chunk_rows`` rows (only the needed columns). When the rows are
grouped by query, as logs written per query are, the rows of the last query of a batch are held
back and joined to the next batch, so no query is ever split; each batch is evaluated by the same
engine and the per-query values are concatenated. Memory is bounded by the batch, not the file
(the per-query table grows with the number of queries, as the output must).

When a query reappears after other queries (the rows are not grouped), the log is first
partitioned by a hash of the query id into temporary parquet files (one pass, bounded memory),
then each partition, which holds every row of its queries, is evaluated in memory. The results are
the same; only the order of queries in ``per_query`` follows the partitions.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .results import Results


class _NotGrouped(Exception):
    pass


def _batches(path: Path, columns, chunk_rows: int):
    """Record batches of about ``chunk_rows`` rows, read one row group at a time.

    (``ParquetFile.iter_batches`` was measured to keep every batch's buffers alive: 1.7 GB of
    Arrow memory after 100M rows; reading row groups one by one stays flat.)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                 and p.suffix.lower() in (".parquet", ".pq"))
    pending, size = [], 0
    for file in files:
        pf = pq.ParquetFile(file)
        for i in range(pf.metadata.num_row_groups):
            table = pf.read_row_group(i, columns=list(columns))
            for start in range(0, table.num_rows, chunk_rows):
                part = table.slice(start, chunk_rows)
                pending.append(part)
                size += part.num_rows
                if size >= chunk_rows:
                    yield from pa.concat_tables(pending).combine_chunks().to_batches()
                    pending, size = [], 0
    if pending:
        yield from pa.concat_tables(pending).combine_chunks().to_batches()


def count_rows(path: Path) -> int:
    """Rows of a parquet file or directory, from its metadata."""
    import pyarrow.parquet as pq

    if path.is_file():
        return pq.ParquetFile(path).metadata.num_rows
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").count_rows()


def _evaluate_chunks(chunks, evaluate_table, progress=None) -> list:
    """Evaluate grouped chunks, carrying each chunk's last query over to the next."""
    import pyarrow as pa

    parts, carry, seen = [], None, set()
    for batch in chunks:
        table = pa.Table.from_batches([batch])
        if carry is not None:
            table = pa.concat_tables([carry, table])
        query = table.column(0).to_numpy(zero_copy_only=False)
        if len(query) == 0:
            continue
        last = query[-1]
        tail = int(np.argmax(query[::-1] != last)) if (query != last).any() else len(query)
        head = table.slice(0, len(query) - tail)
        # a fresh copy of the (small) tail: a slice would keep every earlier batch's buffers alive
        carry = table.slice(len(query) - tail).combine_chunks()
        if head.num_rows:
            parts.append(_run(head, evaluate_table, seen))
        if progress:
            progress(batch.num_rows)
    if carry is not None and carry.num_rows:
        parts.append(_run(carry, evaluate_table, seen))
    return parts


def _run(table, evaluate_table, seen: set) -> Results:
    ids = pd.unique(table.column(0).to_numpy(zero_copy_only=False)).tolist()
    if not seen.isdisjoint(ids):  # set operations in C, not a Python loop over queries
        raise _NotGrouped
    seen.update(ids)
    return _light(evaluate_table(table))


def _light(res):
    """Drop the chunk's grouped log (kept by Results for diff()): memory must not grow with the file."""
    if isinstance(res, Results):
        res._context = None
    return res


def _partition(path: Path, columns, chunk_rows: int, parts: int, tmp: Path, progress=None) -> list[Path]:
    """Write the rows into ``parts`` parquet files by a hash of the query id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writers: dict[int, pq.ParquetWriter] = {}
    files = [tmp / f"part-{i:04d}.parquet" for i in range(parts)]
    try:
        for batch in _batches(path, columns, chunk_rows):
            table = pa.Table.from_batches([batch])
            key = pd.util.hash_array(table.column(0).to_numpy(zero_copy_only=False)) % parts
            for p in np.unique(key):
                sub = table.filter(pa.array(key == p))
                if p not in writers:
                    writers[p] = pq.ParquetWriter(files[p], sub.schema)
                writers[p].write_table(sub)
            if progress:
                progress(batch.num_rows)
    finally:
        for w in writers.values():
            w.close()
    return [f for f in files if f.exists()]


class _Totals:
    """Running sums and counts of per-query values: a chunk's Results without its per-query rows."""

    def __init__(self, res: Results):
        self.models, self.metrics, self.info = res.models, res.metrics, res.info
        pq = res.per_query
        self.sums, self.counts = {}, {}
        for m in self.models:
            block = pq[pq["model"] == m]
            self.sums[m] = {c: float(np.nansum(block[c].to_numpy())) for c in self.metrics}
            self.counts[m] = {c: int(np.isfinite(block[c].to_numpy()).sum()) for c in self.metrics}


def _merge_totals(parts: list[_Totals]) -> Results:
    models, metrics = parts[0].models, parts[0].metrics
    summary = {}
    for m in models:
        summary[m] = {}
        for c in metrics:
            count = sum(p.counts[m][c] for p in parts)
            summary[m][c] = sum(p.sums[m][c] for p in parts) / count if count else math.nan
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=metrics)
    summary_df.index.name = "model"
    per_query = pd.DataFrame(columns=["model", "query", *metrics])
    return Results(summary_df, per_query, _merge_info(parts, models))


def _merge_info(parts, models) -> dict:
    info = dict(parts[0].info)
    for key in ("queries", "evaluated", "skipped_empty", "rows"):
        info[key] = sum(p.info[key] for p in parts)
    info["ties_at_cutoff"] = {m: sum(p.info["ties_at_cutoff"][m] for p in parts) for m in models}
    info["chunks"] = len(parts)
    return info


def merge_chunks(parts: list) -> Results:
    """Concatenate per-query values of chunks and average them as the in-memory path does."""
    if isinstance(parts[0], _Totals):
        return _merge_totals(parts)
    per_query = pd.concat([p.per_query for p in parts], ignore_index=True)
    models = parts[0].models
    metrics = parts[0].metrics
    if len(models) > 1:  # the in-memory order: model by model, queries in order within each
        per_query = pd.concat([per_query[per_query["model"] == m] for m in models], ignore_index=True)
    summary = {}
    for m in models:
        block = per_query[per_query["model"] == m]
        summary[m] = {c: (float(np.nanmean(v)) if np.isfinite(v := block[c].to_numpy()).any() else math.nan)
                      for c in metrics}
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=metrics)
    summary_df.index.name = "model"
    return Results(summary_df, per_query, _merge_info(parts, models))


def evaluate_parquet(path: Path, columns: list[str], evaluate_table, *, chunk_rows: int, progress=None,
                     partitions: int | None = None, keep_per_query: bool = True) -> Results:
    """Stream ``path`` (query column first in ``columns``) through ``evaluate_table(pyarrow.Table)``.

    With ``keep_per_query=False`` only running sums are kept, so memory does not grow with the
    number of queries; the summary is then the same up to the order of floating-point additions,
    and ``per_query`` is empty.
    """
    if not keep_per_query:
        inner = evaluate_table

        def evaluate_table(table):
            return _Totals(inner(table))

    try:
        parts = _evaluate_chunks(_batches(path, columns, chunk_rows), evaluate_table, progress)
    except _NotGrouped:
        total = count_rows(path)
        partitions = partitions or max(1, math.ceil(total / chunk_rows))
        with tempfile.TemporaryDirectory(prefix="topkeval-", dir=os.environ.get("TOPKEVAL_TMP")) as tmp:
            files = _partition(path, columns, chunk_rows, partitions, Path(tmp), progress)
            parts = [_light(evaluate_table(_read(f))) for f in files]
    return merge_chunks(parts)


def _read(path: Path):
    import pyarrow.parquet as pq

    return pq.read_table(path)
