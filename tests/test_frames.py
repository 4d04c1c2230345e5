"""Tables out: Results.to_arrow and Results.to_polars hold to_pandas's values in faithful column types."""

from __future__ import annotations

import datetime
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import topkeval as tk

pl = pytest.importorskip("polars")

METRICS = ["recall@2", "ndcg@3", "P@1"]


def _log(query_values, dtype):
    """Four queries of three candidates (some ties), two models, the query ids in ``dtype``."""
    rng = np.random.default_rng(7)
    q = np.repeat(query_values, 3)
    return pl.DataFrame({"user": pl.Series(q, dtype=dtype), "item": pl.Series(np.tile(["a", "b", "c"], 4)),
                         "relevance": [1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 1],
                         "old": rng.integers(0, 3, 12).astype(float), "new": rng.random(12)})


@pytest.mark.parametrize("values,dtype", [
    (["u1", "u2", "u3", "u4"], pl.String),
    ([7, 3, 5, 1], pl.Int32),
    ([7, 3, 5, 2**62], pl.Int64),
    ([7, 3, 5, 1], pl.UInt64),
    (["007", "7", "x y", "é"], pl.String),  # text that looks like a number stays that text
])
def test_polars_in_polars_out_in_one_call_with_the_ids_as_given(values, dtype):
    log = _log(values, dtype)
    res = tk.evaluate(log, METRICS, query="user", score=["old", "new"], item="item")
    out = res.to_polars()
    assert isinstance(out, pl.DataFrame)
    assert out.columns == ["model", "user", *METRICS]
    assert out.schema["user"] == dtype and out.schema["model"] == pl.String
    assert all(out.schema[m] == pl.Float64 for m in METRICS)
    want = res.to_pandas()
    assert out["user"].to_list() == want["user"].tolist() and set(out["user"].to_list()) == set(values)
    assert out["model"].to_list() == want["model"].tolist()
    for metric in METRICS:
        assert np.array_equal(out[metric].to_numpy(), want[metric].to_numpy(), equal_nan=True)
    # Arrow: the same table
    table = res.to_arrow()
    assert isinstance(table, pa.Table) and table.column_names == out.columns
    assert pl.from_arrow(table).equals(out)
    assert table.schema.metadata is None  # a plain table, without pandas' metadata
    if dtype == pl.String:
        assert pa.types.is_string(table.schema.field("user").type) or pa.types.is_large_string(
            table.schema.field("user").type)


def test_pandas_and_arrow_inputs_keep_their_id_types():
    frame = pd.DataFrame({"query": np.repeat(np.array([10, 20], dtype=np.int16), 2), "relevance": [1, 0, 0, 1],
                          "s": [0.9, 0.1, 0.5, 0.6]})
    assert tk.evaluate(frame, ["P@1"], score="s").to_arrow().schema.field("query").type == pa.int16()
    text = pa.table({"query": ["b", "b", "a", "a"], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.5, 0.6]})
    out = tk.evaluate(text, ["P@1"], score="s").to_polars()
    assert out.schema["query"] == pl.String and out["query"].to_list() == ["b", "a"]
    dates = pl.DataFrame({"day": [datetime.datetime(2024, 1, 1)] * 2 + [datetime.datetime(2024, 1, 2)] * 2,
                          "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.5, 0.6]})
    out = tk.evaluate(dates, ["P@1"], query="day", score="s").to_polars()
    assert out.schema["day"].is_temporal() and out["day"].to_list()[0] == datetime.datetime(2024, 1, 1)


def test_the_summary_and_the_segments_as_tables():
    log = _log(["u1", "u2", "u3", "u4"], pl.String).with_columns(
        device=pl.Series(np.repeat(["m", "d", "m", "d"], 3)))
    res = tk.evaluate(log, METRICS, query="user", score=["old", "new"], item="item", by="device")
    pd.testing.assert_frame_equal(res.to_pandas("summary"), res.summary)
    pd.testing.assert_frame_equal(res.to_pandas("segments"), res.segments)
    summary = res.to_polars("summary")
    assert summary.columns == ["model", *METRICS] and summary["model"].to_list() == ["old", "new"]
    assert np.array_equal(summary.select(METRICS).to_numpy(), res.summary.to_numpy(), equal_nan=True)
    segments = res.to_arrow("segments")
    assert segments.column_names[:2] == ["device", "model"] and "queries" in segments.column_names
    assert segments.column("device").to_pylist() == res.segments.reset_index()["device"].tolist()
    assert res.to_polars("per_query").columns == res.to_pandas().columns.tolist() == ["model", "user", "device", *METRICS]
    plain = tk.evaluate(log, METRICS, query="user", score="old", item="item")
    for method in (plain.to_pandas, plain.to_arrow, plain.to_polars):
        with pytest.raises(tk.ParameterError, match="no segments"):
            method("segments")
        with pytest.raises(tk.ParameterError, match="'table' parameter of"):
            method("means")


def test_results_that_kept_only_sums_give_an_empty_table_of_the_same_types(tmp_path):
    path = tmp_path / "log.parquet"
    _log(["u1", "u2", "u3", "u4"], pl.String).write_parquet(path)
    res = tk.evaluate(path, METRICS, query="user", score=["old", "new"], item="item", chunk_rows=6,
                      keep_per_query=False)
    out = res.to_polars()
    assert out.height == 0 and out.schema["model"] == pl.String and out.columns[2:] == METRICS
    assert res.to_polars("summary").height == 2


def test_a_missing_polars_is_one_line_naming_the_extra(monkeypatch):
    res = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [0.9, 0.1]}, ["P@1"], score="s")
    monkeypatch.setitem(sys.modules, "polars", None)  # import polars raises ImportError
    with pytest.raises(tk.ParameterError) as info:
        res.to_polars()
    assert str(info.value) == 'to_polars needs polars, an optional dependency of topkeval: pip install "topkeval[polars]"'
    assert res.to_arrow().num_rows == 1  # Arrow is a dependency: always there


def test_tables_out_import_polars_only_when_asked():
    code = ("import sys, topkeval as tk; res = tk.evaluate({'query': [1, 1], 'relevance': [1, 0], 'score': [.1, .2]},"
            " metrics=['recall@1']); res.to_arrow(); res.to_pandas('summary'); print('polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
