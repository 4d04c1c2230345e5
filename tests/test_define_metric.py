"""Metrics of your own (topkeval.define_metric): evaluated like the built-in ones on every path,
checked like every public parameter, and gone again with forget_metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.metrics import FAMILIES
from topkeval.metrics.define import forget_metric

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning:pyspark")

LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2, 3, 3, 3], "item": list("abcabdef"),
                    "relevance": [1, 0, 1, 0, 1, 0, 0, 0],
                    "a": [0.9, 0.8, 0.1, 0.5, 0.4, 0.3, 0.2, 0.1], "b": [0.1, 0.8, 0.9, 0.4, 0.5, 0.3, 0.2, 0.1]})


def _half_hits(c):
    """hits in the top k, each worth 1/2, over the relevant items: recall / 2, undefined when R = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c.R > 0, 0.5 * c.h / c.R, np.nan)


@pytest.fixture
def defined():
    def _half_hits(c):  # defined here, as in a notebook: sent to Spark's executors by value, not by module
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(c.R > 0, 0.5 * c.h / c.R, np.nan)

    tk.define_metric("half_recall", _half_hits, summary="recall / 2", formula="h(k) / (2 R)", undefined="R = 0",
                     needs_all_relevant=True)
    tk.define_metric("first_hit", lambda c: c.rr, cutoff="optional", ranks=True, summary="rr again",
                     formula="1 / rank of the first relevant")
    yield
    for name in ("half_recall", "first_hit"):
        if name in FAMILIES:
            forget_metric(name)


def test_a_defined_metric_is_evaluated_like_a_built_in_one(defined):
    res = tk.evaluate(LOG, ["half_recall@2", "recall@2", "first_hit@2", "first_hit", "rr"], score=["a", "b"],
                      item="item")
    pq = res.per_query
    # by hand: model a, query 1 finds 1 of 2 in its top 2, query 2 its only one; query 3 has none (skipped)
    assert pq.loc[pq["model"] == "a", "half_recall@2"].tolist() == [0.25, 0.5]
    np.testing.assert_array_equal(pq["half_recall@2"], pq["recall@2"] / 2)
    np.testing.assert_array_equal(pq["first_hit"], pq["rr"])
    assert res.summary.loc["b", "half_recall@2"] == 0.375  # b: 1 of 2 in query 1, 1 of 1 in query 2, halved
    row = res.compare("a", metrics=["half_recall@2"], n_resamples=200).iloc[0]
    assert (row["wins"], row["losses"], row["ties"]) == (0, 0, 2)


def test_a_defined_metric_on_every_path(defined, tmp_path):
    table = tk.evaluate(LOG, ["half_recall@2"], score="a", item="item").per_query
    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)
    streamed = tk.evaluate(path, ["half_recall@2"], score="a", item="item", chunk_rows=3).per_query
    pd.testing.assert_frame_equal(streamed, table)
    run, qrels = LOG[["query", "item", "a"]], LOG[["query", "item", "relevance"]]
    apart = tk.evaluate(run, ["half_recall@2"], score="a", item="item", qrels=qrels).per_query
    np.testing.assert_array_equal(apart["half_recall@2"], table["half_recall@2"])
    matrix = tk.evaluate_matrix(np.array([[0.9, 0.8, 0.1], [0.5, 0.4, 0.0]]), np.array([[1, 0, 1], [0, 1, 0]]),
                                metrics=["half_recall@2"])
    assert matrix.per_query["half_recall@2"].tolist() == [0.25, 0.5]


def test_a_defined_metric_on_spark(defined, spark):
    res = tk.evaluate(spark.createDataFrame(LOG), ["half_recall@2", "first_hit"], score=["a", "b"], item="item")
    local = tk.evaluate(LOG, ["half_recall@2", "first_hit"], score=["a", "b"], item="item")
    pd.testing.assert_frame_equal(res.summary, local.summary)
    diff = res.diff("a", "b", "half_recall@2")  # one more Spark job, the metric defined on the executors again
    assert diff.set_index("query").loc[1, "gained"] == ["c"]


def test_a_defined_metric_is_listed_and_forgotten(defined, capsys):
    from topkeval.cli import main

    assert main(["metrics"]) == 0
    assert "half_recall@" in capsys.readouterr().out
    assert str(tk.parse_metric("half_recall@5")) == "half_recall@5"
    forget_metric("half_recall")
    with pytest.raises(tk.UnknownMetricError):
        tk.parse_metric("half_recall@5")


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="Half Recall"), "lowercase letters"),
    (dict(name="recall"), "built-in metric"),
    (dict(name="p"), "already names precision"),
    (dict(name="map"), "already names ap"),
    (dict(name="half_recall"), "defined already; pass replace=True"),
    (dict(function=3), "function"),
    (dict(cutoff="sometimes"), "cutoff"),
])
def test_definitions_that_would_clash_or_cannot_work_are_refused(defined, kwargs, match):
    args = dict(name="another", function=_half_hits, summary="s", formula="f") | kwargs
    with pytest.raises(tk.ParameterError, match=match):
        tk.define_metric(**args)


@pytest.mark.parametrize("function,match", [
    (lambda c: 1 / 0, "raised ZeroDivisionError"),
    (lambda c: c.h[:1], "one real number per query"),
    (lambda c: np.full(len(c.h), "x"), "one real number per query"),
    (lambda c: c.h * np.inf, "infinite"),
])
def test_a_function_that_fails_is_named(function, match):
    tk.define_metric("broken", function, summary="s", formula="f", replace=True)
    try:
        with pytest.raises(tk.ParameterError, match=match):
            tk.evaluate(LOG, ["broken@2"], score="a")
    finally:
        forget_metric("broken")


def test_a_defined_metric_can_be_defined_again_in_a_notebook(defined):
    tk.define_metric("half_recall", lambda c: c.h, summary="hits", formula="h(k)", replace=True)
    res = tk.evaluate(LOG, ["half_recall@2"], score="a")
    assert res.per_query["half_recall@2"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("function,takes", [
    (lambda h, n, R, N: h / R, "(h, n, R, N)"),
    (lambda: 1.0, "()"),
    (lambda c, *, scale: c.h * scale, "(c, *, scale)"),
])
def test_a_function_of_another_signature_is_refused_and_not_kept(function, takes):
    with pytest.raises(tk.ParameterError, match=r"must take one argument, a Counts .*; this one takes "
                       + __import__("re").escape(takes)):
        tk.define_metric("wrong_signature", function, summary="s", formula="f")
    assert "wrong_signature" not in FAMILIES
    with pytest.raises(tk.UnknownMetricError):
        tk.parse_metric("wrong_signature@2")
    tk.define_metric("wrong_signature", lambda c: c.h, summary="s", formula="f")  # the fix needs no replace=True
    try:
        assert tk.evaluate(LOG, ["wrong_signature@2"], score="a").per_query["wrong_signature@2"].tolist() == [1, 1]
    finally:
        forget_metric("wrong_signature")


class _NoSignature:
    """A callable whose signature cannot be read (as some built-in functions): called as it is."""

    __signature__ = "unknown"

    def __call__(self, h, n):
        return h


def test_a_function_without_a_readable_signature_called_wrongly_is_named():
    tk.define_metric("no_signature", _NoSignature(), summary="s", formula="f")
    try:
        with pytest.raises(tk.ParameterError, match="'no_signature' raised TypeError.*must take one argument, a Counts"):
            tk.evaluate(LOG, ["no_signature@2"], score="a")
    finally:
        forget_metric("no_signature")
    tk.define_metric("inner_type_error", lambda c: len(c.k), summary="s", formula="f")
    try:  # a TypeError inside the function is its own: no word about the signature
        with pytest.raises(tk.ParameterError, match="raised TypeError: object of type .int. has no len") as caught:
            tk.evaluate(LOG, ["inner_type_error@2"], score="a")
        assert "Counts" not in str(caught.value)
    finally:
        forget_metric("inner_type_error")


def test_a_defined_function_sees_the_evaluated_queries_only():
    """Queries without a relevant item are skipped (empty_queries='skip'): a function of define_metric
    is never called on them, so that h / R needs no guard against R = 0 (a warning is an error here)."""
    seen = []

    def share(c):
        seen.append(len(c.R))
        return c.h / c.R

    tk.define_metric("share_found", share, summary="h / R", formula="h(k) / R", replace=True)
    try:
        res = tk.evaluate(LOG, ["share_found@2", "recall@2"], score="a")
        assert (res.info["skipped_empty"], seen) == (1, [res.info["evaluated"]])
        np.testing.assert_array_equal(res.per_query["share_found@2"], res.per_query["recall@2"])
    finally:
        forget_metric("share_found")
