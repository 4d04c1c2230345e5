"""Streaming a parquet file in chunks equals the in-memory path, for grouped and shuffled logs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import topkeval as tk

METRICS = ["recall@5", "precision@3", "r_precision", "ndcg@4", "ap", "hit_rate@2", "specificity@5"]


def _log(seed=0, queries=300):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, queries)
    n = int(sizes.sum())
    return pd.DataFrame({"query": np.repeat(np.arange(queries) * 7 + 3, sizes), "item": np.arange(n),
                         "relevance": rng.choice([0, 0, 0, 1, 2], n), "a": rng.integers(0, 5, n) / 4,
                         "b": rng.random(n)})


@pytest.mark.parametrize("chunk_rows", [7, 100, 1000])
@pytest.mark.parametrize("shuffled", [False, True])
def test_stream_equals_in_memory(tmp_path, chunk_rows, shuffled):
    frame = _log()
    if shuffled:
        frame = frame.sample(frac=1.0, random_state=0).reset_index(drop=True)
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=333)
    kwargs = dict(metrics=METRICS, score=["a", "b"], item="item", ties="expected")
    memory = tk.evaluate(frame, **kwargs)
    seen = []
    streamed = tk.evaluate(path, chunk_rows=chunk_rows, progress=seen.append, **kwargs)
    assert sum(seen) == len(frame) if not shuffled else sum(seen) >= len(frame)  # + the partitioning pass
    if not shuffled:
        pd.testing.assert_frame_equal(memory.per_query, streamed.per_query)
        pd.testing.assert_frame_equal(memory.summary, streamed.summary, check_exact=True)
    else:
        key = ["model", "query"]
        pd.testing.assert_frame_equal(memory.per_query.sort_values(key).reset_index(drop=True),
                                      streamed.per_query.sort_values(key).reset_index(drop=True))
        pd.testing.assert_frame_equal(memory.summary, streamed.summary, rtol=1e-12)
    for k in ("queries", "evaluated", "skipped_empty", "ties_at_cutoff"):
        assert memory.info[k] == streamed.info[k]
    assert streamed.info["chunks"] > 1


def test_stream_directory_and_missing_column(tmp_path):
    frame = _log(1, 50)
    (tmp_path / "d").mkdir()
    pq.write_table(pa.Table.from_pandas(frame.iloc[:400], preserve_index=False), tmp_path / "d" / "a.parquet")
    pq.write_table(pa.Table.from_pandas(frame.iloc[400:], preserve_index=False), tmp_path / "d" / "b.parquet")
    res = tk.evaluate(tmp_path / "d", metrics=["recall@5"], score="a", chunk_rows=50)
    assert res.summary.iloc[0, 0] == pytest.approx(tk.evaluate(frame, metrics=["recall@5"], score="a").summary.iloc[0, 0])
    with pytest.raises(tk.ColumnError, match="Did you mean 'a'"):
        tk.evaluate(tmp_path / "d", metrics=["recall@5"], score="aa", chunk_rows=50)


@pytest.mark.parametrize("shuffled", [False, True])
def test_stream_without_per_query_rows(tmp_path, shuffled):
    frame = _log(2)
    if shuffled:
        frame = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    kwargs = dict(metrics=METRICS, score=["a", "b"], undefined="nan")
    memory = tk.evaluate(frame, **kwargs)
    lean = tk.evaluate(path, chunk_rows=500, keep_per_query=False, **kwargs)
    pd.testing.assert_frame_equal(memory.summary, lean.summary, rtol=1e-12)
    assert lean.per_query.empty and lean.info["evaluated"] == memory.info["evaluated"]
