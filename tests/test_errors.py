"""Error table: (call, exception, message pattern). Every user error is a TopkevalError (a ValueError)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

LOG = pd.DataFrame({"query": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "relevance": [1, 0, 0, 1],
                    "score": [0.3, 0.2, 0.5, 0.1]})


def ev(**kw):
    data = kw.pop("data", LOG)
    return lambda: tk.evaluate(data, **kw)


CASES = [
    # one ranking
    (lambda: tk.recall_at_k([1, 0, 1], [0.1, 0.2], 1), tk.DataError, "same length"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 0), tk.ParameterError, "'k' parameter of recall_at_k must be a positive int"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1.5), tk.ParameterError, "positive int. Got 1.5"),
    (lambda: tk.precision_at_k([1, 0], [0.1, 0.2], True), tk.ParameterError, "positive int"),
    (lambda: tk.recall_at_k([1, 0], [np.nan, 0.2], 1), tk.DataError, "non-finite scores"),
    (lambda: tk.recall_at_k([1, 0], [np.inf, 0.2], 1), tk.DataError, "infinite"),
    (lambda: tk.recall_at_k([1, 0], ["x", "y"], 1), tk.ColumnError, "numeric scores"),
    (lambda: tk.recall_at_k(["yes", "no"], [0.1, 0.2], 1), tk.ColumnError, "numeric grades"),
    (lambda: tk.recall_at_k([], [], 1), tk.DataError, "empty ranking"),
    (lambda: tk.recall_at_k([0, 0], [0.1, 0.2], 1, empty_queries="error"), tk.EmptyQueryError, "no relevant item"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 5, short_lists="error"), tk.ShortListError, "only 2 candidates"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, ties="item_desc"), tk.ParameterError, "no item ids"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, ties="random"), tk.ParameterError, "'ties' parameter"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, ties="optimistc"), tk.ParameterError, "Did you mean 'optimistic'"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, undefined=0.5), tk.ParameterError, "0.0, 1.0 or nan"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, short_lists="cut"), tk.ParameterError, "'short_lists'"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, empty_queries="drop"), tk.ParameterError, "'empty_queries'"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, threshold="high"), tk.ParameterError, "'threshold'"),
    (lambda: tk.recall_at_k([1, 0], [0.1, 0.2], 1, conventions="trec"), tk.ParameterError, "Did you mean 'trec_eval'"),
    (lambda: tk.fbeta_at_k([1, 0], [0.1, 0.2], 1, beta=0), tk.ParameterError, "'beta'"),
    # a log
    (ev(score="scroe"), tk.ColumnError, "Column 'scroe' \\(score=\\) not found in the DataFrame. Did you mean 'score'"),
    (ev(metrics=["recal@10"]), tk.UnknownMetricError, "Did you mean 'recall@10'"),
    (ev(metrics=["recall"]), tk.UnknownMetricError, "needs a cutoff"),
    (ev(metrics=["recall@0"]), tk.UnknownMetricError, "positive integer"),
    (ev(metrics=["r_precision@5"]), tk.UnknownMetricError, "takes no cutoff"),
    (ev(metrics=["fbeta@5"]), tk.UnknownMetricError, "needs a parameter"),
    (ev(metrics=["iprec_avg"]), tk.ParameterError, "iprec_avg is not computed exactly under ties='expected'.*'item_desc'"),
    (ev(metrics=["iprec(recall=0.5)"], ties="expected"), tk.ParameterError, "not computed exactly"),
    (ev(metrics=["iprec(recall=1.5)"], ties="first"), tk.UnknownMetricError, "recall must be a number from 0 to 1"),
    (ev(metrics=["iprec"]), tk.UnknownMetricError, "needs a parameter"),
    (ev(metrics=["infAP"]), tk.ParameterError, "infap is not computed exactly under ties='expected'.*'item_desc'"),
    (ev(metrics=["infap@10"]), tk.UnknownMetricError, "takes no cutoff"),
    (ev(metrics=["err(max_grade=0.5)@3"]), tk.DataError, r"needs every grade to be at most 0.5.*err\(max_grade="),
    (ev(metrics=["err(max_grade=-1)"]), tk.UnknownMetricError, "max_grade must be a positive finite number"),
    (ev(metrics=[]), tk.UnknownMetricError, "empty"),
    (ev(data=LOG.assign(item=["a", "a", "b", "c"]), item="item"), tk.DataError, "duplicate \\(query, item\\)"),
    (ev(data=LOG.iloc[:0]), tk.DataError, "empty"),
    (ev(data=LOG.assign(score=[0.1, np.nan, 0.2, 0.3])), tk.DataError, "non-finite scores"),
    (ev(data=LOG.assign(relevance=["x", "y", "z", "w"])), tk.ColumnError, "numeric grades"),
    (ev(data=LOG.assign(query=[1, None, 2, 2])), tk.ColumnError, "missing query ids"),
    (ev(data=LOG.assign(item=["a", 1, "b", "c"]), item="item"), tk.ColumnError, "item ids of one kind"),
    (ev(data="/nonexistent/log.parquet"), tk.InputFileError, "File not found"),
    (ev(data={"query": [1, 2], "relevance": [1], "score": [0.1, 0.2]}), tk.DataError, "differ in length"),
    (ev(data=[1, 2, 3]), tk.DataError, "data of evaluate must be"),
    (ev(empty_queries="error", data=LOG.assign(relevance=[1, 0, 0, 0])), tk.EmptyQueryError, "for example 2"),
    (ev(score=["score", "score"]), tk.ParameterError, "twice"),
]


@pytest.mark.parametrize("call,exc,pattern", CASES)
def test_error_table(call, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert isinstance(info.value, tk.TopkevalError) and isinstance(info.value, ValueError)


def test_unreadable_files(tmp_path):
    bad = tmp_path / "log.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(tk.InputFileError, match="Cannot read"):
        tk.evaluate(bad)
    other = tmp_path / "log.xlsx"
    other.write_bytes(b"x")
    with pytest.raises(tk.InputFileError, match="unknown file type"):
        tk.evaluate(other)


def test_empty_query_single_function_values():
    assert np.isnan(tk.recall_at_k([0, 0], [0.1, 0.2], 1))  # skip: nothing to average
    assert tk.recall_at_k([0, 0], [0.1, 0.2], 1, empty_queries="keep") == 0.0
    assert tk.recall_at_k([0, 0], [0.1, 0.2], 1, empty_queries="keep", undefined=1.0) == 1.0
    assert np.isnan(tk.recall_at_k([0, 0], [0.1, 0.2], 1, empty_queries="keep", undefined="nan"))


def test_info_counts_skipped_and_ties():
    frame = pd.DataFrame({"query": [1, 1, 1, 2, 2, 3], "relevance": [1, 0, 0, 0, 0, 1],
                          "score": [0.5, 0.5, 0.1, 0.3, 0.2, 0.9]})
    res = tk.evaluate(frame, metrics=["precision@1", "recall@3"])
    assert res.info["queries"] == 3 and res.info["evaluated"] == 2 and res.info["skipped_empty"] == 1
    assert res.info["ties_at_cutoff"] == {"score": 1}  # query 1: a mixed tie straddles k = 1
    assert list(res.per_query["query"]) == [1, 3]
