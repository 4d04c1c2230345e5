"""Backends as plugins (topkeval.backends.plugins): each declares the data it takes and what it
supports; the dispatcher takes the first that accepts the data and refuses what it does not declare
with a message made from the declarations. A toy backend (a custom data type wrapping a table,
evaluated by the CPU backend) is a few lines and one registration; its numbers are the CPU
backend's on the same rows (the oracle: tests/test_reference.py's brute force behind it) and a hand
count."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval import backends
from topkeval.backends import local
from topkeval.backends.plugins import BackendPlugin

LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 1, 0, 1], "score": [0.9, 0.8, 0.1, 0.5, 0.4],
                    "seg": ["a", "a", "a", "b", "b"]})


@dataclass(frozen=True)
class Wrapped:
    """A custom data type: a table held by another library's object."""

    frame: pd.DataFrame


@pytest.fixture
def toy():
    plugin = BackendPlugin(
        "toy", "a wrapped table", lambda data, plan: isinstance(data, Wrapped), frozenset({"rows", "judgments"}),
        hints={"segments": "unwrap it (data.frame) to evaluate segments"},
        evaluate=lambda r: local.evaluate(replace(r, data=r.data.frame)))
    backends.register_backend(plugin)
    yield plugin
    backends.unregister_backend("toy")


def test_a_registered_backend_takes_its_data(toy):
    assert backends.select(Wrapped(LOG)) == "toy" and backends.select(LOG) == "cpu"
    res = tk.evaluate(Wrapped(LOG), ["recall@2", "precision@2"])
    assert res.summary.loc["score"].tolist() == [0.75, 0.5]  # q1: 1 of 2 relevant in the top 2, q2: 1 of 1
    pd.testing.assert_frame_equal(res.summary, tk.evaluate(LOG, ["recall@2", "precision@2"]).summary)
    assert res.curves("recall", ks=[1, 2]).shape[0] == 2  # evaluated again at other metrics, through the toy


def test_what_a_backend_does_not_declare_is_refused_from_its_declarations(toy):
    with pytest.raises(tk.ParameterError) as caught:
        tk.evaluate(Wrapped(LOG), ["recall@2"], by="seg")
    assert str(caught.value) == ("by= is not supported for a wrapped table: unwrap it (data.frame) to evaluate "
                                 "segments. It is supported for: a Spark DataFrame, a table in memory, a table file "
                                 "or TREC run files.")
    with pytest.raises(tk.ParameterError, match=r"^chunk_rows= is not supported for a wrapped table\. It is "
                                                r"supported for: a table in memory"):
        tk.evaluate(Wrapped(LOG), ["recall@2"], chunk_rows=10)
    with pytest.raises(tk.ParameterError, match=r"^position= is not supported for a wrapped table\. It is supported "
                                                r"for: a table in memory, a table file or TREC run files\.$"):
        tk.evaluate(Wrapped(LOG), ["recall@2"], position="score")


def test_a_score_matrix_given_to_evaluate_names_evaluate_matrix():
    with pytest.raises(tk.ParameterError, match=r"^evaluate\(\) is not supported for a score matrix \(users x "
                                                r"items\): evaluate_matrix\(scores, relevant\) evaluates"):
        tk.evaluate(np.zeros((2, 3)))


def test_evaluate_matrix_goes_through_the_dispatcher(monkeypatch):
    seen = []
    matrix = next(b for b in backends.backends() if b.name == "matrix")
    spy = replace(matrix, evaluate=lambda r: seen.append(r) or matrix.evaluate(r))
    monkeypatch.setattr(backends, "_REGISTRY", [spy if b is matrix else b for b in backends.backends()])
    scores, truth = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]]), np.array([[1, 0, 1], [1, 0, 0]])
    res = tk.evaluate_matrix({"m": scores}, truth, metrics=["recall@1"])  # a dict of matrices: the matrix backend
    assert res.summary.loc["m", "recall@1"] == 0.25 and len(seen) == 1
    assert backends.with_capability(scores, "matrices") is spy


def test_the_accumulating_front_doors_go_through_the_dispatcher(monkeypatch):
    """MatrixEvaluator's and TopkMetrics' updates go to the backend that declares ``updates`` (its
    ``prepare``); without one, the refusal is the one the declarations make. The numbers are
    counted by hand: user 0 has R = 2 and its top item relevant (recall@1 = 1/2), user 1 its relevant
    item ranked third (0)."""
    seen = []
    matrix = next(b for b in backends.backends() if b.name == "matrix")
    assert [b.name for b in backends.backends() if b.supports("updates")] == ["matrix"]
    spy = replace(matrix, prepare=lambda r: seen.append(r) or matrix.prepare(r))
    monkeypatch.setattr(backends, "_REGISTRY", [spy if b is matrix else b for b in backends.backends()])
    scores, truth = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]]), np.array([[1, 0, 1], [1, 0, 0]])
    ev = tk.MatrixEvaluator(["recall@1"])
    ev.update(scores[:1], truth[:1])
    ev.update(scores[1:], truth[1:])
    assert ev.compute().summary.loc["scores", "recall@1"] == 0.25 and len(seen) == 2
    try:
        from topkeval.integrations.torchmetrics import TopkMetrics
    except tk.TopkevalError:  # without torchmetrics: MatrixEvaluator alone
        pass
    else:
        metric = TopkMetrics(["recall@1"])
        metric.update(scores, truth)
        assert float(metric.compute()["recall@1"]) == 0.25 and len(seen) == 3
    monkeypatch.setattr(backends, "_REGISTRY", [b for b in backends.backends() if b.name != "matrix"])
    with pytest.raises(tk.ParameterError, match=r"^No registered backend supports MatrixEvaluator and TopkMetrics "
                                                r"\(score matrices batch by batch\)\.$"):
        tk.MatrixEvaluator(["recall@1"]).update(scores, truth)


def test_a_backend_declares_known_capabilities_only():
    with pytest.raises(ValueError, match="unknown capabilities"):
        BackendPlugin("bad", "bad data", lambda data, plan: False, frozenset({"teleport"}))


def test_the_list_only_metrics_go_only_to_a_backend_declaring_lists(toy):
    """Beyond-accuracy metrics (engine.Plan.lists) need the ``lists`` capability: refused, from the
    declarations, where a backend lacks it; taken, alone in their plan, where one declares it (its
    numbers by hand: novelty@2 = the mean of -log2 popularity over each top 2)."""
    items = LOG.assign(item=["x", "y", "z", "x", "y"])
    with pytest.raises(tk.ParameterError) as caught:
        tk.evaluate(Wrapped(items), ["recall@2", "novelty@2"], item="item", popularity={"x": 0.5, "y": 0.25})
    assert str(caught.value) == ("novelty@2 (a beyond-accuracy metric) is not supported for a wrapped table. It is "
                                 "supported for: a table in memory, a table file or TREC run files.")
    plans = []
    backends.register_backend(replace(toy, name="toy_lists", capabilities=toy.capabilities | {"lists"},
                                      accepts=lambda data, plan: isinstance(data, Wrapped) and "item" in data.frame,
                                      evaluate=lambda r: plans.append(r.plan) or toy.evaluate(r)))
    try:
        res = tk.evaluate(Wrapped(items), ["novelty@2"], item="item", popularity={"x": 0.5, "y": 0.25, "z": 0.125})
    finally:
        backends.unregister_backend("toy_lists")
    assert res.metrics == ["novelty@2"] and [(p.names, p.list_labels) for p in plans] == [([], ("novelty@2",))]
    assert res.summary.loc["score", "novelty@2"] == ((1 + 2) / 2 + (1 + 2) / 2) / 2  # q1: x, y; q2: x, y
