"""Results.beyond_accuracy: coverage, novelty, popularity, Gini and diversity of the top k.

The engine's values equal the brute-force reference (explicit lists, every order of the tied
candidates) under every convention; hand-computed cases pin each definition; the peers'
definitions are transcribed where they are matched; bad input raises clear errors.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import topkeval as tk
from reference import beyond_lists_reference, beyond_reference, shown_items_reference
from strategies import conventions, logs
from topkeval.kernels import cpu

NAMES = ("coverage", "novelty", "popularity", "gini", "diversity")


def _close(a, b):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _vector(i):
    """Features of item i (items 0..13 in the strategies): never the zero vector."""
    return [math.cos(i), math.sin(i), (i % 3) - 1.0]


def _cosine(a, b):
    u, v = _vector(a), _vector(b)
    return sum(x * y for x, y in zip(u, v)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))


def _evaluate(rows, conv):
    return tk.evaluate(pd.DataFrame(rows), metrics=["recall@3"], query="query", relevance="grade", score=["a", "b"],
                       item="item", **conv)


@given(rows=logs(max_queries=4, max_len=6), conv=conventions(), k=st.integers(1, 7), how=st.sampled_from(["f", "s"]))
def test_beyond_accuracy_equals_reference(rows, conv, k, how):
    res = _evaluate(rows, conv)
    features = {i: _vector(i) for i in range(14)} if how == "f" else None
    similarity = _cosine if how == "s" else None
    got = res.beyond_accuracy(k=k, features=features, similarity=similarity)
    ref = beyond_reference(rows, ["a", "b"], conv, k, similarity=_cosine)
    assert list(got.index) == ["a", "b"]
    assert list(got.columns) == [f"{n}@{k}" for n in NAMES]
    for model in ("a", "b"):
        for name in NAMES:
            assert _close(float(got.loc[model, f"{name}@{k}"]), ref[model][name]), (model, name, got, ref)


@given(rows=logs(max_queries=4, max_len=6), conv=conventions(), k=st.integers(1, 5),
       extra=st.integers(0, 3), shares=st.lists(st.sampled_from([0.01, 0.2, 0.5, 1.0]), min_size=14, max_size=14))
def test_given_popularity_and_catalog_equal_reference(rows, conv, k, extra, shares):
    res = _evaluate(rows, conv)
    popularity = dict(enumerate(shares))
    catalog = list(range(14 + extra))
    got = res.beyond_accuracy(k=k, popularity=popularity, catalog=catalog)
    ref = beyond_reference(rows, ["a", "b"], conv, k, popularity=popularity, catalog=catalog)
    for model in ("a", "b"):
        for name in NAMES[:4]:
            assert _close(float(got.loc[model, f"{name}@{k}"]), ref[model][name]), (model, name)
    as_size = res.beyond_accuracy(k=k, popularity=pd.Series(popularity), catalog=len(catalog))
    pd.testing.assert_frame_equal(as_size, got)


@given(rows=logs(max_queries=3, max_len=7, models=("a",)), conv=conventions(), k=st.integers(1, 7))
def test_exposure_kernel_equals_mean_over_orders(rows, conv, k):
    """cpu.exposure: every row's probability of being in the top k, relevant or not, and the
    probability that two rows are both in it, equal the shares of the orders that put them there."""
    from reference import ranked_orders

    res = tk.evaluate(pd.DataFrame(rows), metrics=["recall@1"], query="query", relevance="grade", score="a",
                      item="item", **conv)
    [(log, _)] = list(res.evaluation.sources())
    from topkeval.engine.rules import comparable_scores, tie_rule

    c = res.conventions
    tie, items = tie_rule(log, c, comparable_scores(log.scores["a"], c))
    thr = -np.inf if c.score_threshold is None else c.score_threshold
    p, g, e = cpu.exposure(log.offsets, comparable_scores(log.scores["a"], c), log.relevant(c),
                           log.grades.astype(float), items, thr, tie, np.full(log.n_queries, k, np.int64))
    interpreted = cpu.exposure.py_func(log.offsets, comparable_scores(log.scores["a"], c), log.relevant(c),
                                       log.grades.astype(float), items, thr, tie, np.full(log.n_queries, k, np.int64))
    for x, y in zip((p, g, e), interpreted):
        np.testing.assert_array_equal(x, y)
    ids = log.item_ids(log.items)
    for q in range(log.n_queries):
        lo, hi = int(log.offsets[q]), int(log.offsets[q + 1])
        cands = [r for r in rows if r["query"] == log.queries[q]]
        by_item = {r["item"]: j for j, r in enumerate(cands)}
        rel = [(r["grade"] > 0) if conv["threshold"] is None else (r["grade"] >= conv["threshold"]) for r in cands]
        orders = ranked_orders([r["a"] for r in cands], rel, [r["item"] for r in cands], conv,
                               [r["grade"] for r in cands])
        tops = [set(o[:k]) for o in orders]
        for row in range(lo, hi):
            j = by_item[ids[row]]
            assert abs(p[row] - sum(j in t for t in tops) / len(tops)) < 1e-12
        if conv["ties"] == "expected":
            for r1, r2 in itertools.combinations(range(lo, hi), 2):
                if p[r1] > 0 and p[r2] > 0 and g[r1] == g[r2]:
                    s = round(p[r1] * e[r1])
                    both = sum(by_item[ids[r1]] in t and by_item[ids[r2]] in t for t in tops) / len(tops)
                    assert abs(both - s * (s - 1) / (e[r1] * (e[r1] - 1))) < 1e-12


def _three_queries(**conv):
    """q1: x (relevant) above y; q2: x, y and z tied, z relevant; q3: x (relevant) alone."""
    return tk.evaluate({"query": [1, 1, 2, 2, 2, 3], "item": ["x", "y", "x", "y", "z", "x"],
                        "rel": [1, 0, 0, 0, 1, 1], "s": [2.0, 1.0, 0.5, 0.5, 0.5, 1.0]},
                       metrics=["recall@1"], relevance="rel", score="s", item="item", **conv)


SIM = {frozenset("xy"): 0.2, frozenset("xz"): 0.0, frozenset("yz"): 1.0}


def _sim(a, b):
    return SIM[frozenset((a, b))]


def test_hand_computed_values_under_expected_ties():
    got = _three_queries().beyond_accuracy(k=2, similarity=_sim).loc["s"]
    # Top 2: q1 {x, y}; q2 two of its three tied items, each with probability 2/3; q3 {x} (L = 1).
    # pop, over the 3 queries with a relevant item: x 2/3, z 1/3, y relevant nowhere: 0 (novelty: 1/3).
    assert got["coverage@2"] == pytest.approx((1 + 1 + 2 / 3) / 3)
    a = math.log2(3)  # -log2(1/3); -log2(2/3) = a - 1
    q1, q2, q3 = ((a - 1) + a) / 2, 2 / 3 * ((a - 1) + a + a) / 2, a - 1
    assert got["novelty@2"] == pytest.approx((q1 + q2 + q3) / 3)
    assert got["popularity@2"] == pytest.approx((2 / 3 / 2 + 2 / 3 * (2 / 3 + 0 + 1 / 3) / 2 + 2 / 3) / 3)
    # exposures x 8/3, y 5/3, z 2/3 (sum 5), sorted ascending, weights 2j - n - 1 = -2, 0, 2
    assert got["gini@2"] == pytest.approx((-2 * 2 / 3 + 0 + 2 * 8 / 3) / (3 * 5))
    # q1: 1 - 0.2; q2: each pair both shown with probability 2*1/(3*2) = 1/3; q3 has one item (left out)
    assert got["diversity@2"] == pytest.approx((0.8 + (0.8 + 1.0 + 0.0) / 3) / 2)


def test_hand_computed_values_under_a_deterministic_rule():
    got = _three_queries(ties="first").beyond_accuracy(k=2, similarity=_sim, catalog=10).loc["s"]
    # q2 shows x and y (input order): z is never shown; exposures x 3, y 2 over a catalogue of 10
    assert got["coverage@2"] == pytest.approx(2 / 10)
    x = sorted([0.0] * 8 + [2.0, 3.0])
    assert got["gini@2"] == pytest.approx(sum((2 * j - 11) * v for j, v in enumerate(x, 1)) / (10 * 5))
    assert got["diversity@2"] == pytest.approx(0.8)


def test_score_threshold_and_empty_queries():
    """Candidates below score_threshold are not shown; queries skipped as empty show nothing."""
    frame = {"query": [1, 1, 2, 2], "item": ["x", "y", "z", "w"], "rel": [1, 0, 0, 0], "s": [2.0, 1.0, 3.0, 3.0]}
    skip = tk.evaluate(frame, metrics=["recall@1"], relevance="rel", score="s", item="item",
                       score_threshold=1.5).beyond_accuracy(k=2).loc["s"]
    assert skip["coverage@2"] == pytest.approx(1 / 4)  # only x, of x, y, z, w
    assert skip["popularity@2"] == pytest.approx(1.0)  # x is relevant in the one query with a relevant item
    keep = tk.evaluate(frame, metrics=["recall@1"], relevance="rel", score="s", item="item",
                       empty_queries="keep").beyond_accuracy(k=1).loc["s"]
    assert keep["coverage@1"] == pytest.approx((1 + 0.5 + 0.5) / 4)  # x; z or w in the kept query 2
    assert keep["gini@1"] == pytest.approx((-3 * 0 - 1 * 0.5 + 1 * 0.5 + 3 * 1) / (4 * 2))


def test_novelty_matches_rectools_mean_inv_user_freq():
    """RecTools' own example (rectools/metrics/novelty.py, MeanInvUserFreq docstring, commit 8b6f536):
    recommendations user 1: [3], user 2: [2, 3], user 3: [1, 2]; previous interactions (1, 1),
    (1, 2), (2, 1), (3, 1). RecTools gives per user [1.5849625, 1.5849625, 0] at k=1 and
    [1.5849625, 1.5849625, 0.79248125] at k=3: -log2(users(i) / n_users) averaged over the items
    of the list, a cold item counted as one user (``fillna(1)`` in ``MeanInvUserFreq.fit``).
    Here the interactions are the relevant rows, those not recommended scored below score_threshold."""
    frame = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2, 3, 3],
                          "item": [3, 1, 2, 2, 3, 1, 1, 2],
                          "clicked": [0, 1, 1, 0, 0, 1, 1, 0],
                          "score": [1.0, -1.0, -1.0, 2.0, 1.0, -1.0, 2.0, 1.0]})
    res = tk.evaluate(frame, metrics=["recall@1"], query="user", relevance="clicked", score="score", item="item",
                      score_threshold=0.0)
    assert res.beyond_accuracy(k=1).loc["score", "novelty@1"] == pytest.approx((1.5849625 * 2 + 0) / 3)
    assert res.beyond_accuracy(k=3).loc["score", "novelty@3"] == pytest.approx((1.5849625 * 2 + 0.79248125) / 3)
    # the same example with the previous interactions given as history= (MeanInvUserFreq.fit's
    # prev_interactions: users(i) over the users of the history, 3, not over its 2 items)
    reco = _ranked({1: [3], 2: [2, 3], 3: [1, 2]}, {1: {3}, 2: {2}, 3: {1}})
    prev = pd.DataFrame({"query": [1, 1, 2, 3], "item": [1, 2, 1, 1]})
    for k, want in ((1, [1.5849625, 1.5849625, 0.0]), (3, [1.5849625, 1.5849625, 0.79248125])):
        got = _per_query(tk.evaluate(reco, [f"novelty@{k}"], score="s", item="item", history=prev), f"novelty@{k}")
        assert [got[u] for u in (1, 2, 3)] == pytest.approx(want, abs=1e-7)


def test_popularity_matches_rectools_avg_rec_popularity():
    """RecTools' own example (rectools/metrics/popularity.py, AvgRecPopularity docstring):
    recommendations user 1: [1, 2], user 2: [3, 1, 2], user 3: [3, 2]; interactions (1, 1), (1, 2),
    (2, 1), (2, 3), (3, 1), (3, 2). RecTools gives [3, 1, 1] at k=1 and [2.5, 2, 1.5] at k=3, in
    interaction counts; topkeval's shares are those counts over the 3 users."""
    frame = pd.DataFrame({"user": [1, 1, 2, 2, 2, 3, 3, 3],
                          "item": [1, 2, 3, 1, 2, 3, 2, 1],
                          "clicked": [1, 1, 1, 1, 0, 0, 1, 1],
                          "score": [3.0, 2.0, 3.0, 2.0, 1.0, 3.0, 2.0, -1.0]})
    res = tk.evaluate(frame, metrics=["recall@1"], query="user", relevance="clicked", score="score", item="item",
                      score_threshold=0.0)
    assert res.beyond_accuracy(k=1).loc["score", "popularity@1"] == pytest.approx((3 + 1 + 1) / 3 / 3)
    assert res.beyond_accuracy(k=3).loc["score", "popularity@3"] == pytest.approx((2.5 + 2 + 1.5) / 3 / 3)


def test_runs_with_judgments_apart():
    """Two runs kept apart (qrels=): each run's lists; a relevant (query, item) counts once for
    popularity, though both runs' logs hold it."""
    recs = pd.DataFrame({"user": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "s1": [2.0, 1.0, 1.0, 1.0],
                         "s2": [1.0, 2.0, 2.0, 1.0]})
    truth = pd.DataFrame({"user": [1, 2, 2], "item": ["a", "c", "d"], "relevance": [1, 1, 1]})
    got = tk.evaluate(recs, metrics=["recall@1"], query="user", item="item", score=["s1", "s2"],
                      qrels=truth).beyond_accuracy(k=1)
    # catalogue: a, b, c (the candidates); pop: a 1/2 (user 1), c 1/2 (user 2), b 0
    # s1: user 1 shows a, user 2 ties a and c (1/2 each); s2: user 1 shows b, user 2 shows a
    assert got.loc["s1"].tolist() == pytest.approx([1.5 / 3, 1.0, 0.5, (2 * 1.5 - 2 * 0) / (3 * 2)])
    assert got.loc["s2"].tolist() == pytest.approx([2 / 3, (-math.log2(1 / 2) * 2) / 2, (0 + 0.5) / 2,
                                                    (2 * 1 - 2 * 0) / (3 * 2)])
    assert tk.evaluate(recs, metrics=["novelty@1"], query="user", item="item", score=["s1", "s2"],
                       qrels=truth).info["beyond_defaults"]["popularity"] == {"from": "relevant candidates", "items": 2,
                                                                             "queries": 2}


def test_stacked_runs_need_the_catalogue_and_the_popularity():
    """Runs kept apart in a stacked table (model=, or TREC run files): each run's rows are its own lists,
    so the items of all of them (the old default) changed a run's coverage and novelty with the runs
    beside it, and the items of its own rows are its own lists (coverage 1). Both are given instead,
    every input missing said at once; given, the numbers are those of a hand count."""
    recs = pd.DataFrame({"user": [1, 1, 2, 2, 1, 1, 2, 2], "item": ["a", "b", "a", "c", "a", "b", "a", "c"],
                         "run": ["s1"] * 4 + ["s2"] * 4, "score": [2.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 1.0]})
    truth = pd.DataFrame({"user": [1, 2, 2], "item": ["a", "c", "d"], "relevance": [1, 1, 1]})
    res = tk.evaluate(recs, metrics=["recall@1"], query="user", item="item", model="run", qrels=truth)
    with pytest.raises(tk.ParameterError, match=r"novelty@1 and popularity@1 read each item's popularity.*Pass "
                       r"history=.* coverage@1 and gini@1 divide by the catalogue's size.*Pass catalog="):
        res.beyond_accuracy(k=1)
    with pytest.raises(tk.ParameterError, match=r"^novelty@1 and popularity@1 read each item's popularity.*Pass "
                       r"history=[^:]*$"):
        res.beyond_accuracy(k=1, catalog=["a", "b", "c"])
    with pytest.raises(tk.ParameterError, match=r"^novelty@1 reads each item's popularity"):
        tk.evaluate(recs, metrics=["novelty@1"], query="user", item="item", model="run", qrels=truth)
    got = res.beyond_accuracy(k=1, catalog=["a", "b", "c"], history={1: ["a"], 2: ["c"]})
    assert got.attrs["defaults"] == {}
    # catalogue: a, b, c; pop: a 1/2 (user 1), c 1/2 (user 2), b none (cold: one of the 2 users)
    assert got.loc["s1"].tolist() == pytest.approx([1.5 / 3, 1.0, 0.5, (2 * 1.5 - 2 * 0) / (3 * 2)])
    assert got.loc["s2"].tolist() == pytest.approx([2 / 3, (-math.log2(1 / 2) * 2) / 2, (0 + 0.5) / 2,
                                                    (2 * 1 - 2 * 0) / (3 * 2)])


def _cosine_features():
    res = _three_queries()
    got = res.beyond_accuracy(k=2, features=pd.DataFrame({"f": [1.0, 0.0, 1.0], "g": [0.0, 1.0, 1.0]},
                                                          index=["x", "y", "z"]))
    return got.loc["s", "diversity@2"]


def test_features_give_cosine_similarity():
    # x = (1, 0), y = (0, 1), z = (1, 1): 1 - cos = 1 (x, y), 1 - 1/sqrt 2 (x, z and y, z)
    d = 1 - 1 / math.sqrt(2)
    assert _cosine_features() == pytest.approx((1.0 + (1.0 + d + d) / 3) / 2)


def _res(**kw):
    return tk.evaluate({"query": [1, 1], "item": ["x", "y"], "rel": [1, 0], "s": [0.9, 0.1]},
                       metrics=["recall@1"], relevance="rel", score="s", **kw)


ERRORS = [
    (dict(k=0), "'k' parameter of beyond_accuracy must be"),
    (dict(k=1.5), "'k' parameter of beyond_accuracy"),
    (dict(popularity={"x": 0.5}), r"1 item shown in a top k has no popularity \(for example 'y'\); 1 of the 2 match"),
    (dict(popularity={"x": 0.5, "y": 0.0}), r"share in \(0, 1\]"),
    (dict(popularity={"x": 0.5, "y": 2}), r"share in \(0, 1\]"),
    (dict(popularity=[0.5, 0.5]), "must be a mapping or a pandas Series"),
    (dict(catalog=1), "catalog=1, but the models show 2 distinct items"),
    (dict(catalog=["x"]), r"1 item shown in a top k is not in catalog= \(for example 'y'\); 1 of the 2 match"),
    (dict(catalog="xy"), "'catalog' parameter of beyond_accuracy must be None or a positive int or a list of ids"),
    (dict(features={"x": [1.0]}), "have no features"),
    (dict(features={"x": [1.0], "y": [0.0]}), "norm 0.0"),
    (dict(features={"x": [1.0], "y": [1.0, 2.0]}), "one length"),
    (dict(features={"x": [1.0], "y": [1.0]}, similarity=lambda a, b: 0.0), "not both"),
    (dict(similarity=0.5), "'similarity' parameter of beyond_accuracy must be None or a function"),
]


@pytest.mark.parametrize(("kwargs", "message"), ERRORS)
def test_errors(kwargs, message):
    res = _res(item="item")
    with pytest.raises(tk.ParameterError, match=message):
        res.beyond_accuracy(**{"k": 2, **kwargs})


def test_inputs_whose_ids_are_not_the_logs_are_refused():
    """history=, popularity= and catalog= match the log's ids through one path (7 is not '7', '007'
    is not '7'): a history sharing no item with the log, or (for what reads each query's past) no
    query, is an id mismatch, refused with the count and both sides' ids; partly matching histories
    are taken (an item never seen is cold, a query may have no past), a model showing only items
    never seen too."""
    log = pd.DataFrame({"query": ["q0"] * 4 + ["q1"] * 3, "item": ["000", "007", "012", "099", "000", "007", "012"],
                        "rel": [1, 0, 0, 0, 0, 1, 0], "s": [0.9, 0.5, 0.1, 0.05, 0.2, 0.8, 0.4]})
    history = pd.DataFrame({"query": ["q0", "q1", "q1"], "item": ["007", "000", "007"]})
    names = ["novelty@2", "popularity@2", "novelty(variant=replay)@2"]
    res = tk.evaluate(log, names, relevance="rel", score="s", item="item", history=history)
    # by hand: shares 000 1/2, 007 2/2; q0 shows 000, 007; q1 shows 007, 012 (cold: share 1/2)
    assert res.per_query[names].to_numpy().tolist() == [[0.5, 0.75, 0.5], [0.5, 0.5, 0.5]]
    mismatches = [
        (history.assign(item=[7, 0, 7]), r"none of the 4 items of the log is in history= \(its 2 distinct ids\)\. "
         r"The log's ids are text \('000', '007', '012', \.\.\.\), those of history= whole numbers \(7, 0\)"),
        (history.assign(item=["7", "0", "7"]), r"none of the 4 items of the log is in history=.* look like '000', "
         r"'007', '012', \.\.\., those of history= like '7', '0': ids match as written"),
        (history.assign(query=[0, 1, 1]), r"none of the 2 queries of the log is in history= \(its 2 distinct ids\)\. "
         r"The log's ids are text \('q0', 'q1'\), those of history= whole numbers \(0, 1\)"),
        (pd.DataFrame({"query": [], "item": []}), r"none of the 4 items .* history= has no ids"),
    ]
    for bad, message in mismatches:
        with pytest.raises(tk.ParameterError, match=message):
            tk.evaluate(log, names, relevance="rel", score="s", item="item", history=bad)
    # a model that shows only items never seen (the log's 099 seen): taken, every item cold (share 1/2)
    cold = tk.evaluate(log, names, relevance="rel", score="s", item="item",
                       history=pd.DataFrame({"query": ["q0", "q1"], "item": ["099", "099"]}))
    assert cold.per_query[names].to_numpy().tolist() == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    # a history of other users (a training set) gives the items' popularity; each query's past needs its own
    others = history.assign(query=["u1", "u2", "u2"])
    got = tk.evaluate(log, names[:2], relevance="rel", score="s", item="item", history=others)
    assert got.per_query[names[:2]].to_numpy().tolist() == res.per_query[names[:2]].to_numpy().tolist()
    with pytest.raises(tk.ParameterError, match="none of the 2 queries of the log is in history="):
        tk.evaluate(log, names[2:], relevance="rel", score="s", item="item", history=others)
    with pytest.raises(tk.ParameterError, match=r"3 items shown in a top k have no popularity \(for example '000', "
                                                r"'007', '012'\); 0 of the 3 match\. The log's ids are text .* those "
                                                r"of popularity= whole numbers"):
        tk.evaluate(log, names[:1], relevance="rel", score="s", item="item", popularity={0: 0.5, 7: 1.0, 12: 0.1})
    with pytest.raises(tk.ParameterError, match=r"3 items shown in a top k are not in catalog=.*0 of the 3 match.* "
                                                r"ids match by value and kind"):
        res.beyond_accuracy(k=2, metrics=["coverage@2"], catalog=range(20))


def test_results_without_item_ids_or_rows_refuse():
    with pytest.raises(tk.ParameterError, match="pass item='<column>'"):
        _res().beyond_accuracy()
    matrix = tk.evaluate_matrix(np.array([[0.9, 0.1]]), np.array([[1, 0]]), metrics=["recall@1"])
    with pytest.raises(tk.ParameterError, match="do not keep"):
        matrix.beyond_accuracy()
    by_hand = tk.Results.from_per_query(matrix.per_query, query="user")
    with pytest.raises(tk.ParameterError, match="do not keep"):
        by_hand.beyond_accuracy()


def test_cosine_diversity_kernel_equals_the_pairwise_loop():
    """Features take the kernel (no pairs: |sum p u|^2, the straddling group's pairs corrected); a
    similarity function the pairwise loop: the same values, with ties and without."""
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({"query": rng.integers(0, 150, n), "item": rng.integers(0, 80, n), "grade": rng.integers(0, 2, n),
                       "a": rng.integers(0, 4, n), "b": rng.random(n)}).drop_duplicates(["query", "item"])
    features = {i: _vector(i % 14) for i in range(80)}
    for ties in ("expected", "first"):
        res = tk.evaluate(df, metrics=["recall@3"], query="query", relevance="grade", score=["a", "b"], item="item",
                          ties=ties)
        loop = res.beyond_accuracy(k=5, similarity=lambda x, y: _cosine(x % 14, y % 14))["diversity@5"]
        got = res.beyond_accuracy(k=5, features=features)["diversity@5"]
        np.testing.assert_allclose(got.to_numpy(), loop.to_numpy(), rtol=1e-12)
        assert got.notna().all()


# ---------------------------------------------------------------------------------------------
# every family against its written-out definition (tests/reference.py: beyond_lists_reference)

PER_QUERY = [("novelty", {}), ("novelty", {"variant": "replay"}), ("popularity", {}), ("tail", {}),
             ("tail", {"share": 0.5}), ("mean_pop_rank", {}), ("diversity", {}), ("category_diversity", {}),
             ("unexpectedness", {}), ("serendipity", {}), ("serendipity", {"variant": "recommenders"}),
             ("serendipity", {"variant": "evidently"}), ("pauc", {}), ("pap", {}), ("rbp_norm", {}),
             ("rbp_norm", {"p": 0.5})]
CATALOG = [("coverage", {}), ("gini", {}), ("entropy", {}), ("entropy", {"variant": "recbole"}),
           ("personalization", {})]


def _name(family, params, k):
    inside = ",".join(f"{n}={v}" for n, v in params.items())
    return f"{family}({inside})@{k}" if inside else f"{family}@{k}"


def _specs(families, k, ties):
    out = []
    for family, params in families:
        if family == "serendipity" and params.get("variant") == "evidently" and ties == "expected":
            continue  # refused: the order of tied candidates decides whether the query counts
        out.append((_name(family, params, k), family, k, params))
    return out


HISTORY = st.lists(st.tuples(st.sampled_from(["q0", "q1", "q2", "q3", "q9"]), st.integers(0, 15)), min_size=1,
                   max_size=12)


@given(rows=logs(max_queries=4, max_len=6), conv=conventions(), k=st.integers(1, 7), history=HISTORY,
       given_pop=st.booleans(), shares=st.lists(st.sampled_from([0.01, 0.2, 0.5, 1.0]), min_size=16, max_size=16))
def test_every_family_equals_its_definition(rows, conv, k, history, given_pop, shares):
    res = _evaluate(rows, conv)
    popularity = dict(enumerate(shares)) if given_pop else None
    inputs = dict(popularity=popularity, features={i: _vector(i) for i in range(16)},
                  categories={i: i % 3 for i in range(16)},
                  history=pd.DataFrame({"query": [q for q, _ in history], "item": [i for _, i in history]}),
                  baseline="b")
    specs = _specs(PER_QUERY, k, conv["ties"])
    shown = shown_items_reference(rows, ["a", "b"], conv, [k])
    if (shown and not {r["item"] for r in rows} & {i for _, i in history}) or \
            not {r["query"] for r in rows} & {q for q, _ in history}:
        # nothing in common with the log's items or queries (novelty(variant=replay) reads each
        # query's past): refused as ids that are not the log's
        with pytest.raises(tk.ParameterError, match=r"none of the \d+ (items|queries) of the log "
                                                    r"is in history="):
            res.with_beyond([s[0] for s in specs], **inputs)
        return
    got = res.with_beyond([s[0] for s in specs], **inputs)
    ref = beyond_lists_reference(rows, ["a", "b"], conv, specs + _specs(CATALOG, k, conv["ties"]),
                                 popularity=popularity, similarity=_cosine, categories=inputs["categories"],
                                 history=history, baseline="b")
    pq = {(r["model"], r["query"]): r for r in got.per_query.to_dict("records")}
    for model in ("a", "b"):
        per_query, _ = ref[model]
        assert sorted(q for m, q in pq if m == model) == sorted(per_query)
        for q, values in per_query.items():
            for label, want in values.items():
                assert _close(float(pq[model, q][label]), want), (model, q, label, pq[model, q][label], want)
    catalog = res.beyond_accuracy(metrics=[s[0] for s in _specs(CATALOG, k, conv["ties"])],
                                  popularity=popularity, history=inputs["history"])
    for model in ("a", "b"):
        for label, want in ref[model][1].items():
            assert _close(float(catalog.loc[model, label]), want), (model, label, catalog.loc[model, label], want)


def test_interpreted_kernels_equal_compiled_ones():
    """The beyond kernels give the same numbers interpreted (small inputs) and compiled, on a log
    with heavy ties, under every tie rule."""
    import json
    import os
    import subprocess
    import sys

    script = r"""
import json, numpy as np, pandas as pd, topkeval as tk
rng = np.random.default_rng(5)
n = 1500
df = pd.DataFrame({"query": rng.integers(0, 60, n), "item": rng.integers(0, 90, n), "grade": rng.integers(0, 3, n),
                   "a": rng.integers(0, 4, n) / 2, "b": rng.random(n)}).drop_duplicates(["query", "item"])
hist = pd.DataFrame({"query": rng.integers(0, 60, 300), "item": rng.integers(0, 90, 300)})
names = ["novelty@5", "novelty(variant=replay)@5", "popularity@5", "tail@5", "mean_pop_rank@5", "diversity@5",
         "category_diversity@5", "unexpectedness@5", "serendipity@5", "serendipity(variant=recommenders)@5",
         "pauc@3", "pap@3", "rbp_norm@5"]
out = {}
for ties in ("expected", "first", "optimistic", "pessimistic", "item_desc"):
    res = tk.evaluate(df, ["recall@5"], relevance="grade", score=["a", "b"], item="item", ties=ties)
    res = res.with_beyond(names, features={i: [np.cos(i), np.sin(i), 1.0] for i in range(90)},
                          categories={i: i % 7 for i in range(90)}, history=hist, baseline="b")
    out[ties] = res.per_query[names].to_numpy().tolist()
print(json.dumps(out))
"""
    got = {}
    for mode in ("0", "1"):
        env = {**os.environ, "TOPKEVAL_JIT": mode}
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
        got[mode] = json.loads(proc.stdout.replace("NaN", "null"))
    for ties, values in got["1"].items():
        np.testing.assert_allclose(np.array(got["0"][ties], dtype=float), np.array(values, dtype=float), rtol=0,
                                   atol=1e-12, err_msg=ties)


# ---------------------------------------------------------------------------------------------
# the peers' own published examples, transcribed (each file at the commit of docs/conventions.md)


def _ranked(lists: dict, relevant: dict | None = None, model: str = "s") -> pd.DataFrame:
    """A log from ranked lists {query: [item, ...]} (score: minus the rank), relevance from
    ``relevant`` {query: {item, ...}}."""
    rows = [(q, i, -float(r), int(i in (relevant or {}).get(q, ()))) for q, items in lists.items()
            for r, i in enumerate(items, 1)]
    return pd.DataFrame(rows, columns=["query", "item", model, "relevance"])


def _per_query(res, label):
    return res.per_query.set_index("query")[label].to_dict()


def test_rectools_serendipity_docstring():
    """rectools/metrics/serendipity.py, Serendipity docstring: [0, 0.25, 0, 0.25] at k=1 and
    [0, 0.5, 0, 0.125] at k=2 (catalogue i1..i4, popularity ranks from prev_interactions)."""
    reco = _ranked({"u1": ["i1", "i2"], "u2": ["i2", "i3"], "u3": ["i3"], "u4": ["i2", "i3"]})
    truth = pd.DataFrame({"query": ["u1", "u1", "u2", "u2", "u3", "u4"], "item": ["i1", "i2", "i2", "i3", "i2", "i2"],
                          "relevance": 1})
    prev = pd.DataFrame({"query": ["u1", "u1", "u2", "u2", "u3"], "item": ["i1", "i2", "i1", "i2", "i1"]})
    for k, want in ((1, [0, 0.25, 0, 0.25]), (2, [0, 0.5, 0, 0.125])):
        res = tk.evaluate(reco.drop(columns="relevance"), [f"serendipity@{k}"], score="s", item="item", qrels=truth,
                          history=prev, catalog=["i1", "i2", "i3", "i4"])
        got = _per_query(res, f"serendipity@{k}")
        assert [got[u] for u in ("u1", "u2", "u3", "u4")] == pytest.approx(want)


def test_rectools_partial_auc_and_pap_docstrings():
    """rectools/metrics/auc.py, PartialAUC and PAP docstrings: [1, 1, 0] at k=1, [1, 1, 1/3] at k=3."""
    reco = _ranked({1: [1, 2], 2: [3, 1, 2], 3: [3, 2]})
    truth = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": [1, 2, 1, 3, 1, 2], "relevance": 1})
    for k, want in ((1, [1, 1, 0]), (3, [1, 1, 1 / 3])):
        res = tk.evaluate(reco.drop(columns="relevance"), [f"pauc@{k}", f"pap@{k}"], score="s", item="item",
                          qrels=truth)
        for name in (f"pauc@{k}", f"pap@{k}"):
            got = _per_query(res, name)
            assert [got[u] for u in (1, 2, 3)] == pytest.approx(want), name


REPLAY_RECS = {1: [3, 7, 10, 11, 2], 2: [5, 8, 11, 1, 3], 3: [4, 9, 2]}
REPLAY_TRAIN = pd.DataFrame({"query": [1] * 5 + [2] * 5 + [3] * 3,
                             "item": [5, 6, 8, 9, 2, 5, 8, 11, 1, 3, 4, 9, 2]})


def test_replay_novelty_docstring():
    """replay/metrics/novelty.py, Novelty docstring: Novelty(2) per user {1: 1.0, 2: 0.0, 3: 0.0}."""
    res = tk.evaluate(_ranked(REPLAY_RECS), ["novelty(variant=replay)@2"], score="s", item="item",
                      history=REPLAY_TRAIN, empty_queries="keep")
    assert _per_query(res, "novelty(variant=replay)@2") == {1: 1.0, 2: 0.0, 3: 0.0}


def test_replay_categorical_diversity_docstring():
    """replay/metrics/categorical_diversity.py: CategoricalDiversity([3, 5]) per user {1: 1, 2: 1, 3: 1}
    at 3 and {1: 1, 2: 1, 3: 0.6} at 5 (the lists of categories, each its own item here)."""
    res = tk.evaluate(_ranked(REPLAY_RECS), ["category_diversity@3", "category_diversity@5"], score="s",
                      item="item", categories={i: i for i in range(12)}, empty_queries="keep")
    assert _per_query(res, "category_diversity@3") == {1: 1.0, 2: 1.0, 3: 1.0}
    assert _per_query(res, "category_diversity@5") == pytest.approx({1: 1.0, 2: 1.0, 3: 0.6})


def test_replay_unexpectedness_docstring():
    """replay/metrics/unexpectedness.py: Unexpectedness([2, 4]) per user {1: 0.5, 2: 0, 3: 0} at 2 and
    {1: 0.5, 2: 0.5, 3: 0.5} at 4; base_rec holds tied ratings (user 1: items 3 and 7 at 0.5). User 4,
    whom the base lacks, scores 0 (RePlay: ``if not base_recs or not recs: 0.0``)."""
    recs = _ranked(REPLAY_RECS | {4: [1, 2]}).assign(run="model").rename(columns={"s": "score"})
    base = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2, 3, 3], "item": [3, 7, 2, 5, 8, 3, 4, 9],
                         "score": [0.5, 0.5, 0.7, 0.6, 0.6, 0.3, 1.0, 0.5], "run": "base"})
    runs = pd.concat([recs.drop(columns="relevance"), base], ignore_index=True)
    judged = pd.DataFrame({"query": [1, 2, 3, 4], "item": [3, 5, 4, 1], "relevance": 1})
    res = tk.evaluate(runs, ["unexpectedness@2", "unexpectedness@4"], score="score", item="item", model="run",
                      qrels=judged, baseline="base")
    mine = res.per_query[res.per_query["model"] == "model"].set_index("query")
    assert mine["unexpectedness@2"].to_dict() == {1: 0.5, 2: 0.0, 3: 0.0, 4: 0.0}
    assert mine["unexpectedness@4"].to_dict() == {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.0}


def test_evidently_personalization_test_case():
    """evidently tests/metrics/recsys/test_personalisation.py: 0.16666666 at k=4."""
    log = _ranked({1: [1, 2, 3, 4], 2: [1, 2, 3, 4], 3: [1, 3, 2, 5]}, {1: {1}, 2: {1}, 3: {1}})
    res = tk.evaluate(log, ["recall@4"], score="s", item="item")
    assert res.beyond_accuracy(metrics=["personalization@4"]).loc["s", "personalization@4"] == pytest.approx(1 / 6)


def test_personalization_under_expected_ties_by_hand():
    """Two lists at k = 1: A ties x and y (each first with probability 1/2), B has x first. Their expected
    overlap is 1/2, so personalization is 1 - 1/2 = 1/2 (the sum of squared exposures alone, without each
    item's variance p(1 - p), would give 3/4)."""
    log = pd.DataFrame({"query": ["A", "A", "B", "B"], "item": ["x", "y", "x", "z"], "s": [1.0, 1.0, 2.0, 1.0],
                        "relevance": [1, 0, 1, 0]})
    res = tk.evaluate(log, ["recall@1"], query="query", score="s", item="item", relevance="relevance",
                      ties="expected")
    assert res.beyond_accuracy(metrics=["personalization@1"]).loc["s", "personalization@1"] == pytest.approx(0.5)


def test_evidently_serendipity_test_case():
    """evidently tests/metrics/recsys/test_serendipity.py: 0.8632630527478137 at k=3, items' features
    (item_f1, item_f2), train 1b: 10a, 2b: 2a, 3b: 5a; 3b has no relevant item and is left out."""
    log = _ranked({"1b": ["0a", "1a", "5a", "6a"], "2b": ["0a", "1a", "5a", "6a"], "3b": ["0a", "4a", "6a", "10a"]},
                  {"1b": {"5a"}, "2b": {"0a"}})
    features = {"0a": [1, 0], "1a": [1, 0.1], "5a": [1, 1], "6a": [-0.1, 0.9], "4a": [1, 0.9], "10a": [-1, 0],
                "2a": [1, 0.2]}
    train = pd.DataFrame({"query": ["1b", "2b", "3b"], "item": ["10a", "2a", "5a"]})
    res = tk.evaluate(log, ["serendipity(variant=evidently)@3"], score="s", item="item", features=features,
                      history=train, ties="first", empty_queries="keep")
    assert res.summary.loc["s", "serendipity(variant=evidently)@3"] == pytest.approx(0.8632630527478137)
    assert math.isnan(_per_query(res, "serendipity(variant=evidently)@3")["3b"])


MS_TRAIN = pd.DataFrame({"query": [1, 1, 1, 2, 2, 3, 3, 3], "item": [1, 2, 4, 3, 4, 3, 4, 5]})
MS_RECO = _ranked({1: [3, 5], 2: [2, 5], 3: [1, 2]}, {1: {3}, 2: {2, 5}, 3: {1}})
MS_FEATURES = {1: [0, 1, 1, 0, 0], 2: [0, 1, 0, 1, 0], 3: [0, 0, 1, 1, 0], 4: [0, 0, 1, 0, 1], 5: [0, 0, 0, 1, 1]}


def test_microsoft_recommenders_test_cases():
    """recommenders tests/unit/recommenders/evaluation/test_python_evaluation.py (fixture
    diversity_data in its conftest.py): user_serendipity with item_feature_vector [0.25, 0.625,
    0.3333] (serendipity 0.4028), user_diversity [0.5, 0.5, 0.5], distributional_coverage 1.9183,
    novelty 2.83333 (popularity: interactions of the item / all 8 interactions)."""
    res = tk.evaluate(MS_RECO, ["serendipity(variant=recommenders)@2", "diversity@2"], score="s", item="item",
                      features=MS_FEATURES, history=MS_TRAIN)
    assert [_per_query(res, "serendipity(variant=recommenders)@2")[u] for u in (1, 2, 3)] == \
        pytest.approx([0.25, 0.625, 1 / 3])
    assert res.summary.loc["s", "serendipity(variant=recommenders)@2"] == pytest.approx(0.4028, abs=1e-4)
    assert list(_per_query(res, "diversity@2").values()) == pytest.approx([0.5, 0.5, 0.5])
    choice = {i: c / 8 for i, c in MS_TRAIN["item"].value_counts().items()}
    table = res.beyond_accuracy(metrics=["entropy@2", "novelty@2"], popularity=choice)
    assert table.loc["s", "entropy@2"] == pytest.approx(1.9183, abs=1e-4)
    assert table.loc["s", "novelty@2"] == pytest.approx(2.83333, abs=1e-5)


RECBOLE_ITEMS = [[5, 7, 3], [4, 5, 2], [2, 3, 5], [1, 4, 6], [5, 3, 7]]
RECBOLE_COUNT = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}


def test_recbole_test_cases():
    """RecBole tests/metrics/test_topk_metrics.py: item_matrix of 5 users x 3, num_items 8,
    item_count {1: 0, ..., 6: 5} (item 7 has none). ItemCoverage 7/8; GiniIndex; ShannonEntropy (the
    mean of p ln p over the 7 items shown); AveragePopularity in counts (here shares of the 5 users of
    a history holding those counts, times 5); TailPercentage (tail_ratio 0.1: item 1 alone)."""
    log = _ranked({u: items for u, items in enumerate(RECBOLE_ITEMS)}, {u: {items[0]} for u, items in
                                                                       enumerate(RECBOLE_ITEMS)})
    res = tk.evaluate(log, ["recall@3"], score="s", item="item")
    table = res.beyond_accuracy(metrics=["coverage@3", "gini@3", "ShannonEntropy@3"], catalog=8)
    assert table.loc["s", "coverage@3"] == 7 / 8
    x = [0, 1, 1, 2, 2, 2, 3, 4]  # exposures of the 8 items, ascending
    assert table.loc["s", "gini@3"] == pytest.approx(sum((2 * j - 9) * v for j, v in enumerate(x, 1)) / (8 * 15))
    shares = [1 / 15, 2 / 15, 3 / 15, 2 / 15, 4 / 15, 1 / 15, 2 / 15]
    assert table.loc["s", "ShannonEntropy@3"] == pytest.approx(-np.mean([p * np.log(p) for p in shares]))
    history = pd.DataFrame([(f"h{u}", i) for i, c in RECBOLE_COUNT.items() for u in range(c)],
                           columns=["query", "item"])
    arp = {k: _per_query(res.with_beyond([f"popularity@{k}"], history=history), f"popularity@{k}") for k in (1, 2, 3)}
    want = [[4, 4 / 2, 6 / 3], [3, 7 / 2, 8 / 3], [1, 3 / 2, 7 / 3], [0, 3 / 2, 8 / 3], [4, 6 / 2, 6 / 3]]
    for u, row in enumerate(want):
        assert [5 * arp[k][u] for k in (1, 2, 3)] == pytest.approx(row)
    # count 0 (item 1) as a tiny share; item 7, absent from RecBole's counts, never tail: a large one
    popularity = {i: max(c, 1e-6) / 5 for i, c in RECBOLE_COUNT.items()} | {7: 1.0}
    tail = {k: _per_query(res.with_beyond([f"tail@{k}"], popularity=popularity), f"tail@{k}") for k in (1, 2, 3)}
    want = [[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 1 / 2, 1 / 3], [0, 0, 0]]
    for u, row in enumerate(want):
        assert [tail[k][u] for k in (1, 2, 3)] == pytest.approx(row)


def test_lenskit_rbp_normalized_and_mean_pop_rank():
    """lenskit tests/eval/test_rank_rbp.py: a perfect list normalised is 1 (test_rbp_perfect_k_norm);
    recs [1, 2] of truth {1, 2, 3}, patience 0.5: (1 + 0.5) / (1 + 0.5) = 1; recs [4, 1]: 0.5 / 1.5.
    tests/eval/test_rank_popularity.py: the mean of the average ascending ranks of the counts over
    their number (test_mpr_random's formula), 1 for the most popular (test_mpr_single_max)."""
    truth = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2], "item": [1, 2, 3, 1, 2, 3], "relevance": 1})
    run = _ranked({1: [1, 2], 2: [4, 1]}).drop(columns="relevance")
    res = tk.evaluate(run, ["rbp_norm(p=0.5)@2", "rbp_norm@5"], score="s", item="item", qrels=truth)
    assert _per_query(res, "rbp_norm(p=0.5)@2") == pytest.approx({1: 1.0, 2: 0.5 / 1.5})
    assert _per_query(res, "rbp_norm@5")[1] == pytest.approx(1.0)
    popularity = {"a": 0.5, "b": 0.25, "c": 0.25, "d": 0.1}
    log = _ranked({1: ["a", "d"], 2: ["a"], 3: ["b", "c"]}, {1: {"a"}, 2: {"a"}, 3: {"b"}})
    got = _per_query(tk.evaluate(log, ["mean_pop_rank@2"], score="s", item="item", popularity=popularity),
                     "mean_pop_rank@2")
    assert got == pytest.approx({1: (1 + 0.25) / 2, 2: 1.0, 3: 0.625})


def test_categories_and_pap_within_a_tie_group_by_hand():
    """One query, three candidates tied, two slots (k = 2): two of category x, one of y. x is surely
    shown (C(1, 2) = 0 ways to miss both), y with chance 1 - C(2, 2) / C(3, 2) = 2/3: 5/3 distinct
    categories, over k. Relevant: two of the three, R = 2; pap@1 over the 6 orders: the first
    relevant candidate beats the one non-relevant candidate in 4 of them (2/3); pauc@1: 6 of the
    12 (relevant, order) pairs (1/2). A group of 4 (3 relevant) at k = 2: the enumeration
    (tests/reference.py) against the hypergeometric places."""
    log = pd.DataFrame({"query": [1, 1, 1], "item": ["a", "b", "c"], "relevance": [1, 1, 0], "s": [1.0, 1.0, 1.0]})
    res = tk.evaluate(log, ["category_diversity@2", "pap@1", "pauc@1"], score="s", item="item",
                      categories={"a": "x", "b": "y", "c": "x"})
    row = res.per_query.iloc[0]
    assert row["category_diversity@2"] == pytest.approx(5 / 3 / 2)
    assert row["pap@1"] == pytest.approx(2 / 3) and row["pauc@1"] == pytest.approx(1 / 2)
    rows = [{"query": "q", "item": i, "grade": g, "a": 1.0, "b": 0.0} for i, g in enumerate([1, 1, 0, 1, 0])]
    rows[4]["a"] = 2.0  # a non-relevant candidate above the tie group of four
    conv = {"ties": "expected", "empty_queries": "skip", "undefined": 0.0, "threshold": None}
    for log in (rows, rows[:4]):  # after one non-relevant candidate, and at the top
        for k in (1, 2, 3):
            res = _evaluate(log, conv).with_beyond([f"pap@{k}", f"pauc@{k}"])
            ref = beyond_lists_reference(log, ["a"], conv, [(f"pap@{k}", "pap", k, {}), (f"pauc@{k}", "pauc", k, {})])
            got = res.per_query[res.per_query["model"] == "a"].iloc[0]
            for name, want in ref["a"][0]["q"].items():
                assert got[name] == pytest.approx(want), (k, name)


@pytest.mark.parametrize("ties", ["expected", "first"])
def test_the_short_path_ranks_as_the_main_kernel_s_sort(monkeypatch, ties):
    """Queries of at most kernels.beyond.SHORT candidates are ranked by an insertion sort, the others
    by cpu._sort_path (the main kernel's): both give the same rows shown, in the same order, with the
    same p, g, e and b, on queries short and long, with heavy ties, a score threshold and a depth."""
    from topkeval.engine.rules import comparable_scores, tie_rule
    from topkeval.kernels import beyond as kb

    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 130, 40)
    frame = pd.DataFrame({"query": np.repeat(np.arange(40), sizes), "item": np.arange(sizes.sum()),
                          "rel": rng.integers(0, 2, sizes.sum()), "s": rng.integers(0, 6, sizes.sum()) / 2})
    res = tk.evaluate(frame, ["recall@5"], relevance="rel", score="s", item="item", ties=ties)
    [(log, _)] = list(res.evaluation.sources())
    scores = comparable_scores(log.scores["s"], res.conventions)
    tie, items = tie_rule(log, res.conventions, scores)
    n, n_q = len(scores), log.n_queries
    keep = np.arange(n_q) % 7 != 3  # some queries left out
    for k, thr in ((5, -np.inf), (17, 0.5), (3, -np.inf)):
        args = (log.offsets, scores, log.relevant(res.conventions), log.grades.astype(float), items, log.items, thr,
                tie, k, np.full(n_q, k, np.int64), keep)
        got = {}
        for short in (0, 10**9):
            monkeypatch.setattr(kb, "SHORT", short)
            out = [np.zeros(n, np.int64), np.zeros(n), *(np.zeros(n, np.int32) for _ in range(3)), np.zeros(n, bool),
                   np.zeros(n, np.int64), np.zeros(n_q, np.int64)]
            kb.top_rows.py_func(*args, 0, n_q, *out)
            count = out[-1]
            got[short] = [np.concatenate([x[log.offsets[q]:log.offsets[q] + count[q]] for q in range(n_q)])
                          for x in out[:-1]] + [count]
        for x, y in zip(*got.values()):
            np.testing.assert_array_equal(x, y)
        soff, rows, qix, p, g, e, b, rel, item = kb.ranked_rows(*args)  # compiled, threads, packed
        for x, y in zip((rows, p, g, e, b, rel, item, np.diff(soff)), got[0]):
            np.testing.assert_array_equal(x, y)
        assert (p > 0).all() and np.array_equal(qix, np.repeat(np.arange(n_q), np.diff(soff)))


# ---------------------------------------------------------------------------------------------
# per-query beyond-accuracy values are metric columns like any other


def _segmented():
    return pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": ["x", "y", "x", "z", "y", "z"],
                         "relevance": [1, 0, 0, 1, 1, 0], "a": [0.9, 0.1, 0.9, 0.1, 0.5, 0.4],
                         "b": [0.1, 0.9, 0.1, 0.9, 0.4, 0.5], "device": ["m", "m", "d", "d", "m", "m"],
                         "w": [1.0, 1.0, 3.0, 3.0, 2.0, 2.0]})


def test_beyond_columns_flow_through_means_weights_segments_compare_and_curves():
    popularity = {"x": 0.5, "y": 0.25, "z": 0.125}  # novelty of the top 1: x 1, y 2, z 3 bits
    res = tk.evaluate(_segmented(), ["recall@1", "novelty@1"], score=["a", "b"], item="item", by="device", weight="w",
                      popularity=popularity)
    pq = res.per_query.set_index(["model", "query"])["novelty@1"]
    assert pq.to_dict() == {("a", 1): 1.0, ("a", 2): 1.0, ("a", 3): 2.0, ("b", 1): 2.0, ("b", 2): 3.0, ("b", 3): 3.0}
    assert res.summary.loc["a", "novelty@1"] == pytest.approx((1 * 1 + 1 * 3 + 2 * 2) / 6)  # weighted by w
    assert res.segments.loc[("d", "b"), "novelty@1"] == 3.0
    compared = res.compare("a", metrics=["novelty@1"], n_resamples=200).set_index("device")
    assert compared.loc["(all)", "delta"] == pytest.approx(((2 - 1) * 1 + (3 - 1) * 3 + (3 - 2) * 2) / 6)
    ci = res.summary_ci(n_resamples=200)
    assert set(ci["metric"]) == {"recall@1", "novelty@1"}
    assert res.info["metric_names"]["novelty@1"] == "novelty@1" and res.metrics == ["recall@1", "novelty@1"]
    curves = res.curves(["novelty"], ks=[1, 2]).set_index(["model", "k"])["value"]
    assert curves.loc[("a", 1)] == pytest.approx(res.summary.loc["a", "novelty@1"])
    again = tk.Results.from_per_query(res.per_query.drop(columns=["device", "w"]))  # the names round-trip
    assert again.summary.loc["b", "novelty@1"] == pytest.approx(8 / 3)


def test_beyond_metrics_alone_leave_out_the_engine_s_stand_in():
    res = tk.evaluate(_segmented(), ["pauc@1", "novelty@1"], score=["a", "b"], item="item")
    assert res.metrics == ["pauc@1", "novelty@1"] and list(res.summary.columns) == ["pauc@1", "novelty@1"]
    assert "tp@1" not in res.per_query.columns and res.info["metrics"] == ["pauc@1", "novelty@1"]
    assert list(res.curves(ks=[1, 2])["metric"].unique()) == ["pauc", "novelty"]
    more = res.with_beyond(["popularity@1"])
    assert more.metrics == ["pauc@1", "novelty@1", "popularity@1"]


BEYOND_ERRORS = [
    (lambda r: r.with_beyond(["recall@1"]), "not a beyond-accuracy metric"),
    (lambda r: r.with_beyond(["coverage@2"]), r"Ask Results.beyond_accuracy\(metrics=\['coverage@2'\]\)"),
    (lambda r: r.with_beyond(["recall@1".replace("recall", "novelty")]).with_beyond(["miuf@1"]), "evaluated already"),
    (lambda r: r.with_beyond(["diversity@2"]), "pass features="),
    (lambda r: r.with_beyond(["category_diversity@2"]), "pass categories="),
    (lambda r: r.with_beyond(["category_diversity@2"], categories={"x": 1}),
     r"2 items shown in a top k have no category \(for example 'y', 'z'\)"),
    (lambda r: r.with_beyond(["unexpectedness@2"]), "pass baseline="),
    (lambda r: r.with_beyond(["unexpectedness@2"], baseline="c"), "baseline 'c' is not a model"),
    (lambda r: r.with_beyond(["novelty(variant=replay)@2"]), "pass history="),
    (lambda r: r.with_beyond(["serendipity(variant=evidently)@2"], features={}, history={1: ["x"]}),
     "not computed exactly under ties='expected'"),
    (lambda r: r.with_beyond(["novelty@2"], history=pd.DataFrame({"user": [1], "item": ["x"]})),
     "the query column 'query'"),
    (lambda r: r.with_beyond(["novelty@2"], history={1: "x"}), "maps each query to a list of items"),
    (lambda r: r.with_beyond(["novelty@2"], history=[(1, "x")]), "must be a DataFrame of"),
    (lambda r: r.with_beyond(["novelty@2"], categories=["x"]), "must be a mapping or a pandas Series"),
    (lambda r: r.with_beyond(["novelty(variant=rectool)@2"]), "variant must be one of rectools, replay"),
    (lambda r: r.beyond_accuracy(metrics=["recall@2"]), "not a beyond-accuracy metric"),
]


@pytest.mark.parametrize(("call", "message"), BEYOND_ERRORS)
def test_with_beyond_errors(call, message):
    res = tk.evaluate(_segmented(), ["recall@1"], score=["a", "b"], item="item")
    with pytest.raises(tk.TopkevalError, match=message):
        call(res)


def test_evaluate_beyond_errors():
    log = _segmented()
    with pytest.raises(tk.ParameterError, match="popularity= is read by the beyond-accuracy metrics"):
        tk.evaluate(log, ["recall@1"], score="a", item="item", popularity={"x": 1.0})
    with pytest.raises(tk.ParameterError, match="has no per-query value"):
        tk.evaluate(log, ["gini@1"], score="a", item="item")
    with pytest.raises(tk.ParameterError, match="pass item="):
        tk.evaluate(log, ["novelty@1"], score="a")
    with pytest.raises(tk.ParameterError, match="not estimated under inverse propensity weights"):
        tk.evaluate(log.assign(pos=[1, 2, 1, 2, 1, 2]), ["novelty@1"], score="a", item="item", position="pos",
                    propensity={1: 1.0, 2: 0.5})
    matrix = tk.evaluate_matrix(np.array([[0.9, 0.1]]), np.array([[1, 0]]), metrics=["recall@1"])
    with pytest.raises(tk.ParameterError, match="do not keep"):
        matrix.with_beyond(["novelty@1"])
    with pytest.raises(tk.ParameterError, match="beyond-accuracy metric"):
        tk.evaluate_matrix(np.array([[0.9, 0.1]]), np.array([[1, 0]]), metrics=["novelty@1"])


def _hamming(a, b):
    """A Hamming distance on made-up binary features of items 0..13: the features that differ (0 to 4)."""
    return sum(((a >> bit) & 1) != ((b >> bit) & 1) for bit in range(4))


def test_diversity_over_a_distance_is_rectools_intra_list_diversity_by_hand():
    """RecTools' IntraListDiversity docstring example (PairwiseHammingDistanceCalculator: the number of
    features that differ, which exceeds 1): items 1..4 with features (0,0), (0,1), (1,1), (0,0); user 1
    shown 1, 2, 3 and user 2 shown 1, 4. RecTools: k=2 [1, 0], k=3 [4/3, 0]; k=1, a list of one item,
    0 in RecTools, undefined (NaN) here, as for every diversity."""
    features = {1: (0, 0), 2: (0, 1), 3: (1, 1), 4: (0, 0)}

    def hamming(a, b):
        return sum(x != y for x, y in zip(features[a], features[b]))

    reco = pd.DataFrame({"user": [1, 1, 1, 2, 2], "item": [1, 2, 3, 1, 4], "score": [3.0, 2.0, 1.0, 3.0, 2.0],
                         "relevance": [1, 0, 0, 1, 0]})
    res = tk.evaluate(reco, ["diversity@1", "diversity@2", "diversity@3"], query="user", item="item", distance=hamming)
    pq = res.per_query.set_index("user")
    assert pq["diversity@2"].tolist() == [1.0, 0.0]
    assert pq["diversity@3"].tolist() == pytest.approx([4 / 3, 0.0], abs=1e-15)
    assert pq["diversity@1"].isna().all()
    means = res.beyond_accuracy(k=3, metrics=["diversity@3"], distance=hamming)
    assert means.loc["score", "diversity@3"] == pytest.approx(2 / 3)
    # a distance wins over features for diversity (features serve serendipity)
    vectors = {i: [float(i), 1.0] for i in range(1, 5)}
    both = tk.evaluate(reco, ["recall@2"], query="user", item="item").with_beyond(["ild@2"], distance=hamming,
                                                                                   features=vectors)
    assert both.per_query["ild@2"].tolist() == [1.0, 0.0]


@given(rows=logs(max_queries=4, max_len=6), conv=conventions(), k=st.integers(1, 7))
def test_diversity_over_a_distance_equals_the_reference_under_every_tie_rule(rows, conv, k):
    """Any distance >= 0 (here up to 4): the mean over the pairs of each list of the distance, over
    every order of the tied candidates (the reference's 1 - similarity, with similarity 1 - distance)."""
    res = _evaluate(rows, conv)
    label = f"diversity@{k}"
    got = res.with_beyond([label], distance=_hamming)
    ref = beyond_lists_reference(rows, ["a", "b"], conv, [(label, "diversity", k, {})],
                                 similarity=lambda a, b: 1 - _hamming(a, b))
    pq = {(r["model"], r["query"]): r[label] for r in got.per_query.to_dict("records")}
    for model in ("a", "b"):
        for q, values in ref[model][0].items():
            assert _close(float(pq[model, q]), values[label]), (model, q, pq[model, q], values[label])


@pytest.mark.parametrize(("distance", "message"), [
    (lambda a, b: -1.0, "distance must return a value >= 0"),
    (lambda a, b: float("inf"), "distance must return a finite number"),
    (lambda a, b: "far", "distance must return a finite number"),
    (lambda a, b: 1 / 0, r"distance\('x', 'y'\) raised ZeroDivisionError"),
])
def test_a_distance_that_is_no_distance_is_refused(distance, message):
    res = _res(item="item")
    with pytest.raises(tk.ParameterError, match=message):
        res.beyond_accuracy(k=2, metrics=["diversity@2"], distance=distance)


@pytest.mark.parametrize("ties", ["first", "expected", "pessimistic"])
def test_a_new_beyond_family_is_one_registered_formula(ties):
    """A toy family registered in a few lines over the lists' statistics (the share of each top k
    that is relevant, ``sum(p rel) / min(k, n)``) is computed by with_beyond through the registry;
    the oracle is precision@k with short_lists="shrink" from the kernel's statistics (another path
    through another engine), under each tie rule."""
    from topkeval.metrics import FAMILIES, beyond, names
    from topkeval.metrics.registry import register

    register("toy_shown_relevant", beyond="query", cutoff="required", summary="toy", formula="sum(p rel) / L")(
        lambda top, m, conv: beyond.mean_over_list(top, top.rel.astype(np.float64)))
    names.refresh()  # the name grammar reads the registry's names
    try:
        rows = {"query": [1, 1, 1, 1, 2, 2, 3, 3, 3], "item": [1, 2, 3, 4, 1, 5, 2, 3, 6],
                "relevance": [1, 0, 1, 0, 0, 1, 1, 1, 0], "s": [0.9, 0.5, 0.5, 0.5, 0.4, 0.4, 0.3, 0.2, 0.1]}
        conv = dict(ties=ties, short_lists="shrink")
        got = tk.evaluate(rows, ["precision@3"], score="s", item="item", **conv).with_beyond(["toy_shown_relevant@3"])
        pq = got.per_query
        assert pq["precision@3"].notna().all()
        np.testing.assert_allclose(pq["toy_shown_relevant@3"], pq["precision@3"], rtol=1e-12)
        if ties == "expected":  # query 1: the first, then 2 of the 3 tied (one relevant) in the top 3
            assert pq["toy_shown_relevant@3"].iloc[0] == pytest.approx((1 + 2 / 3) / 3)
    finally:
        FAMILIES.pop("toy_shown_relevant", None)
        names.refresh()


def test_a_plan_holds_the_list_only_metrics_apart():
    """The plan of evaluate() holds the beyond-accuracy metrics apart (engine.Plan.lists), with no
    statistic of theirs; a plan of them alone is valid; where lists are not asked for, each is refused."""
    from topkeval import engine
    from topkeval.conventions import resolve

    conv = resolve(None)
    plan = engine.make_plan(["novelty@3", "recall@2", "Gini@4"], conv, lists=True)
    assert plan.names == ["recall@2"] and plan.list_labels == ("novelty@3", "Gini@4")
    assert [str(m) for m in plan.lists] == ["novelty@3", "gini@4"]
    assert plan.metrics == engine.make_plan(["recall@2"], conv).metrics
    alone = engine.make_plan(["novelty@3"], conv, lists=True)
    assert alone.metrics == () and alone.names == [] and alone.cutoffs.tolist() == [1] and not alone.ranked
    with pytest.raises(tk.ParameterError, match="novelty@3 is a beyond-accuracy metric: it reads the items"):
        engine.make_plan(["novelty@3"], conv)


def test_list_only_metrics_alone_are_the_engine_s_counts_without_a_stand_in():
    """Beyond-accuracy metrics alone: no other column, and every number the same as beside a metric of
    the engine (the oracle: tp@1 evaluated beside them, which the engine once evaluated in their place
    and dropped: the same counts of queries, rows and ties at cutoff 1), on a tied log under every rule."""
    popularity = {"x": 0.5, "y": 0.25, "z": 0.125}
    log = _segmented().assign(a=[0.5, 0.5, 0.9, 0.1, 0.4, 0.4])  # ties in queries 1 and 3
    for ties in ("expected", "first", "optimistic"):
        alone = tk.evaluate(log, ["novelty@1", "unexpectedness@1"], score=["a", "b"], item="item", ties=ties,
                            popularity=popularity, baseline="b")
        beside = tk.evaluate(log, ["tp@1", "novelty@1", "unexpectedness@1"], score=["a", "b"], item="item", ties=ties,
                             popularity=popularity, baseline="b")
        assert alone.metrics == ["novelty@1", "unexpectedness@1"]
        pd.testing.assert_frame_equal(alone.summary, beside.summary[alone.metrics])
        pd.testing.assert_frame_equal(alone.per_query, beside.per_query.drop(columns="tp@1"))
        skip = {"metrics", "metric_names"}
        assert {k: v for k, v in alone.info.items() if k not in skip} == \
            {k: v for k, v in beside.info.items() if k not in skip}
        assert alone.summary.loc["b", "unexpectedness@1"] == 0.0  # b against itself: nothing it lacks
        # evaluated again at other cutoffs through a plan of list-only metrics: each value as evaluated directly
        curves = alone.curves("novelty", ks=[1, 2])
        at2 = tk.evaluate(log, ["novelty@2"], score=["a", "b"], item="item", ties=ties, popularity=popularity)
        for model in ("a", "b"):
            got = curves[(curves["model"] == model) & (curves["k"] == 2)]["value"].tolist()
            # by hand: a top 2 shows both items of each query, (1 + 2) / 2, (1 + 3) / 2, (2 + 3) / 2 bits
            assert got == [at2.summary.loc[model, "novelty@2"]] == [2.0]


def test_what_a_beyond_family_declares_is_read_where_it_is_refused():
    """The registry declares what a family reads without a default (reads=) and the tie rules of a
    variant (variant_ties=); the refusals are made from the declarations."""
    from topkeval.metrics import FAMILIES
    from topkeval.metrics.names import parse_metric
    from topkeval.metrics.registry import exact_under

    assert [n for n, f in FAMILIES.items() if f.reads] == ["unexpectedness"]
    assert FAMILIES["unexpectedness"].reads == ("baseline",)
    evidently = parse_metric("serendipity(variant=evidently)@2")
    assert exact_under(evidently, "first") is None and exact_under(parse_metric("serendipity@2"), "expected") is None
    allowed, why = exact_under(evidently, "expected")
    assert "expected" not in allowed and "first" in allowed and "Evidently" in why
    assert exact_under(parse_metric("infap"), "expected")[0] == FAMILIES["infap"].ties
    res = tk.evaluate(_segmented(), ["recall@1"], score=["a", "b"], item="item")
    with pytest.raises(tk.ParameterError, match=r"^unexpectedness@2 reads baseline=, which has no default: pass "
                                                r"baseline='<model>' \(a model of these results"):
        res.with_beyond(["unexpectedness@2"])
    with pytest.raises(tk.ParameterError, match=r"^serendipity\(variant=evidently\)@2 is not computed exactly under "
                                                r"ties='expected' \(Evidently leaves out a query .*\): pass ties= one "
                                                r"of 'optimistic', 'pessimistic', 'first'"):
        res.with_beyond(["serendipity(variant=evidently)@2"], features={}, history={1: ["x"]})
