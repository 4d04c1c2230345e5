"""Inverse propensity weighted metrics of a click log (evaluate(position=, propensity=)) against a
brute-force definition written here from the formulas (every order of the tied candidates
enumerated under ties="expected"), hand computations, and the bad inputs the issue lists."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.errors import DataError, ParameterError

METRICS = ["precision@2", "precision@4", "tp@3", "recall@2", "recall@3", "f1@3", "r_precision", "ap", "ap@3",
           "dcg@3", "dcg", "ndcg@3", "ndcg", "rbp(p=0.8)@4"]


def _values(order, click, w):
    """Every metric of METRICS for one order of the candidates (a list of row indices)."""
    cw = np.where(click, w, 0.0)
    rw = cw[order]
    rel = click[order]
    R, Rw = int(click.sum()), float(cw.sum())

    def h(k):
        return float(rw[:k].sum())

    def dcg(k):
        return float(sum(rw[i] / math.log2(i + 2) for i in range(min(k, len(rw)))))

    def idcg(k):  # the ideal list of the relevant items the clicks stand for: Rw places of gain 1
        places = min(Rw, k)
        whole = int(math.floor(places))
        return float(sum(1 / math.log2(i + 2) for i in range(whole)) + (places - whole) / math.log2(whole + 2))

    def ap(k):
        total, above = 0.0, 0.0
        for i in range(min(k, len(rw))):
            if rel[i]:
                total += rw[i] * (1.0 + above) / (i + 1)
                above += rw[i]
        return total / Rw

    n = len(order)
    return {"precision@2": h(2) / 2, "precision@4": h(4) / 4, "tp@3": h(3), "recall@2": h(2) / Rw,
            "recall@3": h(3) / Rw, "f1@3": 2 * h(3) / (3 + Rw), "r_precision": h(R) / Rw, "ap": ap(n), "ap@3": ap(3),
            "dcg@3": dcg(3), "dcg": dcg(n), "ndcg@3": dcg(3) / idcg(3), "ndcg": dcg(n) / idcg(math.inf),
            "rbp(p=0.8)@4": 0.2 * sum(rw[i] * 0.8 ** i for i in range(min(4, n)))}


def brute_force(scores, click, w, ties):
    """Each metric of one query: under "first" the rows in input order within a tie, under
    "expected" the mean over every order of the tied candidates."""
    rows = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if ties == "first":
        return _values(rows, click, w)
    groups = [list(g) for _, g in itertools.groupby(rows, key=lambda i: scores[i])]
    totals, count = {}, 0
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        values = _values([i for p in parts for i in p], click, w)
        for name, v in values.items():
            totals[name] = totals.get(name, 0.0) + v
        count += 1
    return {name: v / count for name, v in totals.items()}


def random_log(rng, queries=40):
    frames = []
    for q in range(queries):
        n = int(rng.integers(2, 7))
        click = rng.random(n) < 0.45
        if not click.any():
            click[int(rng.integers(n))] = True
        frames.append(pd.DataFrame({"query": q, "item": np.arange(n), "click": click.astype(int),
                                    "position": rng.permutation(n) + 1,
                                    "p": rng.choice([1.0, 0.5, 0.3, 0.125], n),
                                    "new": rng.integers(0, 3, n).astype(float)}))  # ties
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("ties", ["first", "expected"])
@pytest.mark.parametrize("seed", range(4))
def test_ips_equals_the_brute_force_definition(seed, ties):
    log = random_log(np.random.default_rng(seed))
    res = tk.evaluate(log, METRICS, relevance="click", score="new", item="item", position="position",
                      propensity="p", ties=ties)
    per_query = res.per_query.set_index("query")
    for q, rows in log.groupby("query"):
        want = brute_force(rows["new"].to_numpy(), rows["click"].to_numpy().astype(bool), 1.0 / rows["p"].to_numpy(),
                           ties)
        for name in METRICS:
            assert per_query.loc[q, name] == pytest.approx(want[name], rel=1e-12, abs=1e-12), (q, name)


def test_weights_of_one_equal_the_clicks_as_relevance():
    log = random_log(np.random.default_rng(7))
    log["p"] = 1.0
    plain = tk.evaluate(log, METRICS, relevance="click", score="new", item="item")
    ips = tk.evaluate(log, METRICS, relevance="click", score="new", item="item", position="position", propensity="p")
    pd.testing.assert_frame_equal(plain.per_query, ips.per_query, check_exact=False, rtol=1e-12)


def test_hand_computed_log():
    # query 1: clicks at old positions 1 (p=1) and 3 (p=0.25); the new ranker puts them at ranks 2 and 1
    log = pd.DataFrame({"query": [1, 1, 1], "item": ["a", "b", "c"], "click": [1, 0, 1], "position": [1, 2, 3],
                        "new": [0.5, 0.1, 0.9]})
    res = tk.evaluate(log, ["precision@1", "precision@2", "recall@1", "ap", "dcg@2"], relevance="click", score="new",
                      item="item", position="position", propensity={1: 1.0, 2: 0.5, 3: 0.25})
    row = res.per_query.iloc[0]
    assert row["precision@1"] == 4.0            # 1/0.25 at rank 1
    assert row["precision@2"] == (4 + 1) / 2
    assert row["recall@1"] == 4 / 5
    assert row["ap"] == pytest.approx((4 * 1 / 1 + 1 * (1 + 4) / 2) / 5)
    assert row["dcg@2"] == pytest.approx(4 + 1 / math.log2(3))
    info = res.info["ips"]
    assert info["clicks"] == 2 and info["effective_sample_size"] == pytest.approx(25 / 17)
    assert info["estimators"]["recall@1"] == "snips" and info["estimators"]["precision@1"] == "ips"


def test_clip_caps_the_weights():
    log = pd.DataFrame({"query": [1, 1], "item": ["a", "b"], "click": [1, 0], "position": [5, 1], "new": [1.0, 0.0]})
    res = tk.evaluate(log, ["precision@1"], relevance="click", score="new", item="item", position="position",
                      propensity={1: 1.0, 5: 0.1}, clip=4)
    assert res.summary.iloc[0, 0] == 4.0
    assert res.info["ips"]["clipped"] == 1


BASE = dict(relevance="click", score="new", item="item")


def _log():
    return pd.DataFrame({"query": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "click": [1, 0, 0, 1],
                         "position": [1.0, 2.0, 2.0, 1.0], "new": [0.3, 0.2, 0.5, 0.1]})


@pytest.mark.parametrize("change, kwargs, error, words", [
    (lambda d: d.assign(position=[0.0, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[1.5, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[-1.0, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[np.nan, 1, 2, 1]), {}, DataError, "never showed"),
    (lambda d: d, {"propensity": {1: 0.0, 2: 0.5}}, DataError, "(0, 1]"),
    (lambda d: d, {"propensity": {1: 1.5, 2: 0.5}}, DataError, "(0, 1]"),
    (lambda d: d, {"propensity": {2: 0.5}}, DataError, "without a propensity"),
    (lambda d: d, {"propensity": {0: 0.5}}, ParameterError, "whole numbers >= 1"),
    (lambda d: d, {"propensity": [0.5]}, ParameterError, "mapping position"),
])
def test_bad_click_logs_are_clear_errors(change, kwargs, error, words):
    kwargs = {"propensity": {1: 1.0, 2: 0.5}} | kwargs
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        tk.evaluate(change(_log()), ["precision@1"], position="position", **BASE, **kwargs)


def test_propensity_needs_position_and_ips_metrics():
    with pytest.raises(ParameterError, match="position="):
        tk.evaluate(_log(), ["precision@1"], propensity={1: 1.0}, **BASE)
    with pytest.raises(ParameterError, match="hit_rate.*per-item"):
        tk.evaluate(_log(), ["hit_rate@1", "precision@1"], position="position", propensity={1: 1.0, 2: 0.5}, **BASE)
    with pytest.raises(ParameterError, match="clip="):
        tk.evaluate(_log(), ["precision@1"], clip=3, **BASE)
    with pytest.raises(ParameterError, match="clip"):
        tk.evaluate(_log(), ["precision@1"], position="position", propensity={1: 1.0, 2: 0.5}, clip=0.5, **BASE)
