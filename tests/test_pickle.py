"""Results pickle, copy and deep-copy on every path, and keep what their methods read.

Every way in (a table, a stacked table, judgments apart, TREC run files, a streamed file, a score
matrix, the matrix evaluator, a click log, segments and weights, beyond-accuracy columns, per-query
values of one's own): the Results read back have the same summary, per-query table and info, and
their methods that read the rows again or evaluate other metrics (side_by_side, diff, curves,
beyond_accuracy, bounds, segments) answer as the original's do. What cannot be pickled (a user's
lambda among the inputs) is dropped, and the method that needs it says so; the rest still answers.
(Spark: tests/test_spark.py.)
"""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.results import Results

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")


def _log(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(q, i, int(rng.integers(0, 3)) if q % 5 else 0) for q in range(12) for i in range(20) if rng.random() < 0.4]
    log = pd.DataFrame(rows, columns=["query", "item", "relevance"])
    log["a"] = rng.integers(0, 4, len(log)).astype(float)
    log["b"] = rng.random(len(log))
    log["device"] = np.where(log["query"] % 2 == 0, "phone", "desktop")
    log["traffic"] = (log["query"] % 3 + 1).astype(float)
    return log


def _same(a: Results, b: Results) -> None:
    assert type(b) is Results and b is not a
    pd.testing.assert_frame_equal(a.summary, b.summary, check_exact=True)
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert repr(a.info) == repr(b.info)
    assert repr((a.query_name, a.by, a.weight, a.conventions)) == repr((b.query_name, b.by, b.weight, b.conventions))
    assert repr(a) == repr(b)


def _answer(call):
    try:
        return call()
    except tk.TopkevalError as exc:
        return (type(exc).__name__, str(exc))


def _same_answer(a, b) -> None:
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
    else:
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def _views(res: Results) -> dict:
    """What the methods that read the rows again, or evaluate again, answer (or the error they raise)."""
    first = res.per_query[res.query_name].iloc[0] if len(res.per_query) else 1
    models = res.models
    return {
        "curves": _answer(lambda: res.curves(ks=[1, 2, 3])),
        "side_by_side": _answer(lambda: res.side_by_side(first, k=3, baseline=models[0], model=models[-1])),
        "diff": _answer(lambda: res.diff(models[0], models[-1], res.metrics[0])),
        "beyond": _answer(lambda: res.beyond_accuracy(k=2, metrics=["coverage@2", "novelty@2", "gini@2"],
                                                      catalog=list(range(20)), history={0: [1, 2], 1: [3]})),
        "compare": _answer(lambda: res.compare(n_resamples=100)),
        "segments": _answer(lambda: res.segments) if res.by else None,
        "bounds": _answer(lambda: res.bounds()),
    }


def _check(res: Results) -> dict:
    """Every round trip of ``res``: the same results, and the same answers of its methods."""
    want = _views(res)
    for back in (pickle.loads(pickle.dumps(res)), pickle.loads(pickle.dumps(res, protocol=2)), copy.copy(res),
                 copy.deepcopy(res)):
        _same(res, back)
        got = _views(back)
        for name, value in want.items():
            if value is not None:
                _same_answer(value, got[name])
    return want


def _answered(views: dict, *names: str) -> None:
    """These views answered (not refused): the round trips were checked against numbers."""
    for name in names:
        assert not isinstance(views[name], tuple), (name, views[name])


def test_a_table():
    _answered(_check(tk.evaluate(_log(), ["recall@3", "ndcg@3"], score=["a", "b"], item="item")),
              "curves", "side_by_side", "diff", "beyond", "compare")


def test_segments_and_weights():
    views = _check(tk.evaluate(_log(), ["recall@3"], score=["a", "b"], item="item", by="device", weight="traffic"))
    _answered(views, "curves", "side_by_side", "segments")


def test_a_stacked_table_and_judgments_apart():
    log = _log()
    stacked = pd.concat([log.assign(model="a", score=log["a"]), log.assign(model="b", score=log["b"]).iloc[::2]])
    _answered(_check(tk.evaluate(stacked, ["recall@3"], score="score", item="item", model="model")),
              "curves", "side_by_side", "diff", "beyond")
    truth = log[["query", "item", "relevance"]]
    runs = stacked.drop(columns="relevance")
    _answered(_check(tk.evaluate(runs, ["recall@3"], score="score", item="item", model="model", qrels=truth)),
              "curves", "side_by_side", "diff", "beyond")
    _answered(_check(tk.evaluate(log.drop(columns="relevance"), ["recall@3"], score=["a", "b"], item="item",
                                 qrels=truth)), "curves", "side_by_side", "diff", "beyond")


def test_trec_run_files(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n2 0 d1 1\n")
    for name, lines in (("x", "1 Q0 d1 1 0.9 x\n1 Q0 d2 2 0.5 x\n2 Q0 d1 1 0.8 x\n"),
                        ("y", "1 Q0 d2 1 0.9 y\n1 Q0 d1 2 0.5 y\n2 Q0 d3 1 0.8 y\n")):
        (tmp_path / f"{name}.run").write_text(lines)
    res = tk.evaluate([str(tmp_path / "x.run"), str(tmp_path / "y.run")], ["P@1", "map"], qrels=str(qrels))
    _answered(_check(res), "curves", "side_by_side", "diff")


def test_a_streamed_file(tmp_path):
    path = tmp_path / "log.parquet"
    _log().to_parquet(path)
    views = _check(tk.evaluate(str(path), ["recall@3"], score=["a", "b"], item="item", chunk_rows=30))
    _answered(views, "curves", "side_by_side", "diff", "beyond")
    means = tk.evaluate(str(path), ["recall@3"], score=["a", "b"], item="item", chunk_rows=30, keep_per_query=False)
    _check(means)


def test_score_matrices_and_the_evaluator():
    rng = np.random.default_rng(1)
    scores = {"a": rng.random((8, 6)), "b": rng.integers(0, 3, (8, 6)).astype(float)}
    truth = rng.random((8, 6)) < 0.3
    _answered(_check(tk.evaluate_matrix(scores, truth, metrics=["recall@2", "ndcg@3"])), "curves")
    evaluator = tk.MatrixEvaluator(["recall@2"])
    evaluator.update(scores["a"], truth)
    back = pickle.loads(pickle.dumps(evaluator))  # an evaluator mid-way pickles too, and goes on
    back.update(scores["a"], truth)
    evaluator.update(scores["a"], truth)
    _same(evaluator.compute(), back.compute())
    _check(evaluator.compute())


def test_a_click_log():
    log = _log()
    log["relevance"] = (log["relevance"] > 0).astype(int)
    log["position"] = log.groupby("query").cumcount() + 1
    log = log[log["position"] <= 10]
    rng = np.random.default_rng(2)
    shown = [(q, i, (i + r) % 10 + 1) for q in range(4) for r in range(10) for i in range(10)]  # every position
    impressions = pd.DataFrame(shown, columns=["query", "item", "position"])
    impressions["click"] = (rng.random(len(impressions)) < 0.9 / impressions["position"] ** 0.5).astype(int)
    bias = tk.estimate_position_bias(impressions, n_resamples=5)
    for propensity in ({p: 1 / p for p in range(1, 20)}, bias):
        res = tk.evaluate(log, ["recall_micro@3", "precision@3"], score=["a", "b"], item="item", position="position",
                          propensity=propensity)
        _answered(_check(res), "curves", "bounds")


def test_beyond_accuracy_columns_and_what_cannot_be_pickled():
    """Beyond-accuracy columns keep their inputs (features, history) for curves; a similarity= lambda
    cannot be pickled: the results read back lack only the re-evaluation that needs it, and say so,
    while everything else answers."""
    features = {i: [1.0, float(i % 3)] for i in range(20)}
    res = tk.evaluate(_log(), ["recall@3", "novelty@3", "diversity@3"], score=["a", "b"], item="item",
                      features=features)
    _answered(_check(res), "curves", "side_by_side", "beyond")
    with_lambda = tk.evaluate(_log(), ["recall@3", "diversity@3"], score=["a", "b"], item="item",
                              similarity=lambda x, y: 1.0 if x == y else 0.25)
    back = pickle.loads(pickle.dumps(with_lambda))
    _same(with_lambda, back)
    with pytest.raises(tk.ParameterError, match=r"unpickled without how to evaluate its data at other metrics .*"
                                                r"could not be pickled \(.*lambda"):
        back.curves(metrics=["diversity"], ks=[2])
    _same_answer(with_lambda.side_by_side(1, k=3), back.side_by_side(1, k=3))  # the rows were kept
    _same_answer(with_lambda.beyond_accuracy(k=2, metrics=["coverage@2"]), back.beyond_accuracy(
        k=2, metrics=["coverage@2"]))
    # copies share what they read: nothing is dropped
    _same_answer(with_lambda.curves(metrics=["diversity"], ks=[2]),
                 copy.deepcopy(with_lambda).curves(metrics=["diversity"], ks=[2]))


def test_per_query_values_of_ones_own():
    frame = pd.DataFrame({"model": ["a", "a", "b", "b"], "query": [1, 2, 1, 2], "recall@10": [0.5, 1.0, 1.0, 1.0]})
    views = _check(Results.from_per_query(frame))
    assert isinstance(views["side_by_side"], tuple)  # these results never had rows: refused alike


def test_a_deep_copy_is_its_own():
    res = tk.evaluate(_log(), ["recall@3"], score=["a", "b"], item="item")
    twin = copy.deepcopy(res)
    twin.evaluation.info["queries"] = -1  # its counts are its own (the Evaluation's, not the copy handed out)
    assert res.info["queries"] != -1
    assert twin.evaluation.summary is not res.evaluation.summary
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(res))  # no warning either
