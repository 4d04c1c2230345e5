"""Hostile input data: never a silent wrong number, never a traceback from deep inside.

Each case is one row of a table, grouped by class: columns named like the columns of the results,
columns that appear twice, extreme query weights, inputs changed in place after the evaluation,
users with no candidate in a score matrix, values of the wrong kind (complex, zoned timestamps,
huge integers), shapes and containers (lists, ragged lists, sparse layouts, lazy frames, nulls),
beyond-accuracy inputs, and a sweep of further data of each class on every entry point.
Expected values are computed here by hand or exactly with fractions, never by the code under test.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import topkeval as tk
from topkeval import ColumnError, DataError, InputFileError, ParameterError

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")

LOG = {"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.9, 0.1]}


def _raises(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------------------------
# 1. a column named like a column of the results

def _named(name, **kw):
    log = dict(LOG)
    log[name] = log.pop("query")
    return lambda: tk.evaluate(log, ["recall@1"], query=name, score=["a", "b"], **kw)


@pytest.mark.parametrize("name", ["model", "recall@1", "ndcg@3", "ap", "baseline", "delta", "gained", "lost"])
def test_query_column_named_like_a_result_column_is_refused(name):
    # model and the metrics are columns of per_query; baseline, delta, gained and lost of diff; a
    # metric's canonical name is a column of every curve (Results.curves evaluates family@1..K)
    _raises(_named(name), ParameterError, f"query column is called '{re.escape(name)}'.*rename the column")


@pytest.mark.parametrize("name", ["score", "value", "query", "user", "P@1", "p_value"])
def test_query_column_with_another_name_gives_the_right_numbers(name):
    res = _named(name)()
    assert res.per_query.columns.tolist() == ["model", name, "recall@1"]
    # by hand: a ranks the relevant item first in query 1 only, b in neither -> delta -0.5
    row = res.compare(n_resamples=100).iloc[0]
    assert (row.delta, row.n_queries) == (-0.5, 2)
    diff = res.diff("a", "b", "recall@1")
    assert diff[name].tolist() == [1, 2] and diff["delta"].tolist() == [-1.0, 0.0]


@pytest.mark.parametrize("kwargs", [dict(by="ndcg@3"), dict(by="recall@5"), dict(weight="precision@2"),
                                    dict(weight="model"), dict(by="delta")])
def test_segment_and_weight_columns_named_like_a_result_column_are_refused(kwargs):
    # by="recall@5" with metrics recall@1 only: curves would evaluate recall@5 beside it
    name = next(iter(kwargs.values()))
    log = dict(LOG, **{name: [1.0, 1.0, 2.0, 2.0]})
    _raises(lambda: tk.evaluate(log, ["recall@1"], score=["a", "b"], **kwargs), ParameterError, "cannot be called")


# ---------------------------------------------------------------------------------------------
# 2. a column name given twice

def _dup_csv(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("query,relevance,score,score\n1,1,0.1,0.9\n1,0,0.9,0.1\n")
    return path


def _dup_parquet(tmp_path):
    path = tmp_path / "dup.parquet"
    pq.write_table(pa.table([[1, 1], [1, 0], [0.1, 0.9], [0.9, 0.1]], names=["query", "relevance", "score", "score"]),
                   path)
    return path


DUPLICATES = [
    ("csv", lambda p: tk.evaluate(_dup_csv(p), ["P@1"])),
    ("csv streamed", lambda p: tk.evaluate(_dup_csv(p), ["P@1"], chunk_rows=1)),
    ("parquet", lambda p: tk.evaluate(_dup_parquet(p), ["P@1"])),
    ("parquet streamed", lambda p: tk.evaluate(_dup_parquet(p), ["P@1"], chunk_rows=1)),
    ("arrow", lambda p: tk.evaluate(pa.table([[1, 1], [1, 0], [0.1, 0.9], [0.9, 0.1]],
                                             names=["query", "relevance", "score", "score"]), ["P@1"])),
    ("pandas", lambda p: tk.evaluate(pd.DataFrame([[1, 1, 0.1, 0.9]], columns=["query", "relevance", "score", "score"]),
                                     ["P@1"])),
    ("pandas 1 and '1'", lambda p: tk.evaluate(pd.DataFrame([[1, 1, 0.1, 0.9]], columns=["query", "relevance", "1", 1]),
                                               ["P@1"], score="1")),
    ("qrels table", lambda p: tk.evaluate({"query": [1], "item": ["a"], "score": [0.5]}, ["P@1"], item="item",
                                          qrels=pd.DataFrame([[1, "a", 1, 0]],
                                                             columns=["query", "item", "relevance", "relevance"]))),
    ("run table", lambda p: tk.evaluate(pd.DataFrame([[1, "a", 0.5, 0.1]], columns=["query", "item", "score", "score"]),
                                        ["P@1"], item="item", qrels={"query": [1], "item": ["a"], "relevance": [1]})),
]


@pytest.mark.parametrize("case,call", DUPLICATES, ids=[c for c, _ in DUPLICATES])
def test_a_column_name_given_twice_is_refused(tmp_path, case, call):
    with pytest.raises(ColumnError, match=r"has 2 columns named '(score|relevance|1)'.*Rename or drop"):
        call(tmp_path)


def test_columns_labelled_by_numbers_are_found_by_their_text():
    frame = pd.DataFrame({"query": [1, 1], "relevance": [1, 0], 0: [0.2, 0.9]})
    assert tk.evaluate(frame, ["P@1"], score="0").summary.iloc[0, 0] == 0.0  # the 0.9 is not relevant


def test_a_missing_column_of_a_lazy_frame_is_named():
    pl = pytest.importorskip("polars")
    lazy = pl.DataFrame({"query": [1], "relevance": [1], "s": [0.5]}).lazy()
    _raises(lambda: tk.evaluate(lazy, ["P@1"], score="x"), ColumnError, "'x' \\(score=\\) not found in the LazyFrame")


# ---------------------------------------------------------------------------------------------
# 3. weighted means with extreme but finite weights

P1_A = [1.0, 1.0, 0.0, 1.0, 0.0]  # precision@1 of model a per query (below), by hand
P1_B = [0.0, 1.0, 1.0, 0.0, 0.0]


def _weighted_log(weights):
    rel = [1, 0] * 5
    a = [0.9, 0.1, 0.9, 0.1, 0.1, 0.9, 0.9, 0.1, 0.1, 0.9]
    b = [0.1, 0.9, 0.9, 0.1, 0.9, 0.1, 0.1, 0.9, 0.1, 0.9]
    return {"query": np.repeat(np.arange(5), 2), "relevance": rel, "a": a, "b": b, "w": np.repeat(weights, 2),
            "seg": np.repeat(["x", "x", "y", "y", "y"], 2)}


def _exact_mean(values, weights) -> float:
    w = [Fraction(x) for x in weights]
    return float(sum(wi * Fraction(v) for wi, v in zip(w, values)) / sum(w))


WEIGHTS = {
    "equal 1e308": [1e308] * 5,  # the sum overflows
    "equal 5e-324": [5e-324] * 5,  # products with 0.5 would underflow
    "max float": [np.finfo(float).max] * 5,
    "1e308 and 1": [1e308, 1.0, 1e308, 1.0, 1.0],
    "5e-324 and 1": [5e-324, 1.0, 5e-324, 5e-324, 1.0],
    "every scale": [1e308, 5e-324, 1.0, 1e-300, 3e200],
    "sum overflows unevenly": [1.5e308, 1.5e308, 1e307, 0.0, 2.0],
    "subnormals": [5e-324, 1e-323, 1.5e-323, 2e-323, 2.5e-323],
}


@pytest.mark.parametrize("name", list(WEIGHTS))
def test_weighted_means_are_exact_for_any_finite_weights(name):
    weights = WEIGHTS[name]
    res = tk.evaluate(_weighted_log(weights), ["precision@1"], score=["a", "b"], weight="w", by="seg")
    want_a, want_b = _exact_mean(P1_A, weights), _exact_mean(P1_B, weights)
    assert res.summary["precision@1"].tolist() == pytest.approx([want_a, want_b], rel=1e-15, abs=1e-300)
    overall = res.segments.loc["(all)"]["precision@1"]
    assert overall.tolist() == pytest.approx([want_a, want_b], rel=1e-15, abs=1e-300)
    y = [2, 3, 4]
    seg_y = res.segments.loc["y"]["precision@1"]
    if sum(Fraction(weights[i]) for i in y) > 0:
        assert seg_y.tolist() == pytest.approx([_exact_mean([P1_A[i] for i in y], [weights[i] for i in y]),
                                                _exact_mean([P1_B[i] for i in y], [weights[i] for i in y])],
                                               rel=1e-15, abs=1e-300)
    ci = res.summary_ci(n_resamples=200).set_index(["seg", "model"]).loc["(all)"]
    assert ci["mean"].tolist() == pytest.approx([want_a, want_b], rel=1e-15, abs=1e-300)
    assert np.isfinite(ci[["ci_low", "ci_high"]].to_numpy()).all()
    cmp = res.compare(n_resamples=200).set_index("seg").loc["(all)"]
    assert cmp["value"] == pytest.approx(want_b, rel=1e-15, abs=1e-300)
    assert cmp["baseline"] == pytest.approx(want_a, rel=1e-15, abs=1e-300)
    assert cmp["delta"] == pytest.approx(want_b - want_a, rel=1e-14, abs=1e-300)
    assert np.isfinite([cmp["ci_low"], cmp["ci_high"], cmp["p_value"], cmp["effect_size"]]).all()


@pytest.mark.parametrize("w", [5e-324, 1e-320, 1e308, np.finfo(float).max])
def test_the_issue_case_of_equal_tiny_or_huge_weights(w):
    # recall@1 is 1 in query 1 and 1/2 in query 2 (two relevant, one first): equal weights, mean 3/4
    log = {"query": [1, 1, 2, 2, 2], "relevance": [1, 0, 1, 1, 0], "a": [0.9, 0.1, 0.9, 0.1, 0.5],
           "b": [0.1, 0.9, 0.9, 0.5, 0.1], "w": [w] * 5}
    res = tk.evaluate(log, ["recall@1"], score=["a", "b"], weight="w")
    assert res.summary["recall@1"].tolist() == [0.75, 0.25]  # b: 0 and 1/2
    assert res.summary_ci(n_resamples=100)["mean"].tolist() == [0.75, 0.25]
    row = res.compare(n_resamples=100, test="bootstrap").iloc[0]
    assert (row.value, row.baseline, row.delta) == (0.25, 0.75, -0.5)
    assert np.isfinite([row.ci_low, row.ci_high, row.p_value, row.effect_size]).all()


def test_weighted_statistics_do_not_depend_on_the_scale_of_the_weights():
    """Weights w and w * 2**k (k from -1074 to 1023) are the same weights: every number of
    summary_ci and compare (intervals, p-values, effect sizes) is the same."""
    base = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    out = []
    for k in (0, 1020, -1070):
        weights = np.ldexp(base, k)
        res = tk.evaluate(_weighted_log(weights), ["precision@1"], score=["a", "b"], weight="w")
        out.append((res.summary_ci(n_resamples=500).drop(columns="n_queries"),
                    res.compare(n_resamples=500, test="bootstrap").drop(columns="weight"),
                    res.compare(n_resamples=500, test="permutation").drop(columns="weight")))
    for got in out[1:]:
        for x, y in zip(out[0], got):
            pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=1e-12)


def test_weight_totals_that_exceed_the_largest_float_are_inf():
    res = tk.evaluate(_weighted_log([1e308] * 5), ["precision@1"], score=["a", "b"], weight="w")
    assert res.info["weight"]["total"] == float("inf")  # 5e308: documented, the means are exact nonetheless
    assert res.summary.loc["a", "precision@1"] == 0.6


# ---------------------------------------------------------------------------------------------
# 4. Results own what they read again: the caller's input changed in place afterwards

def _views(res, k=2):
    """Everything Results read again, as plain values."""
    with_items = res.evaluation.sources is not None and res.models
    out = {"curves": res.curves()["value"].tolist(), "summary": res.summary.to_numpy().tolist()}
    if with_items:
        out["side_by_side"] = res.side_by_side(res.per_query[res.query_name].iloc[0], k=k).to_numpy().tolist()
        out["diff"] = res.diff(res.models[0], res.models[1], res.metrics[0]).to_numpy().tolist()
        out["beyond"] = res.beyond_accuracy(k=1).to_numpy().tolist()
    return out


def _report(res, path):
    with open(res.report(path, n_resamples=100, overwrite=True), encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", text)


def _arrays():
    return dict(query=np.array([1, 1, 1, 2, 2, 2]), item=np.array([10, 11, 12, 10, 11, 12]),
                relevance=np.array([1, 0, 0, 0, 1, 0]), a=np.array([0.9, 0.5, 0.1, 0.9, 0.5, 0.1]),
                b=np.array([0.1, 0.5, 0.9, 0.1, 0.5, 0.9]))


def _mutate_numpy(cols):
    cols["relevance"][:] = 1 - cols["relevance"]
    cols["a"][:] = cols["a"][::-1].copy()
    cols["item"][:] = cols["item"] + 10


def _mutate_pandas(frame):
    frame.loc[:, "relevance"] = 1 - frame["relevance"]
    frame.loc[0, "a"] = -5.0
    frame.loc[1, "item"] = 99


def _mutate_polars(frame):
    frame[0, "relevance"] = 0
    frame[4, "relevance"] = 0
    column = frame["a"]  # the caller's own Series of the table, changed in place
    column[0] = -5.0


def _mutate_torch(cols):
    cols["relevance"].mul_(0).add_(1)
    cols["a"].neg_()


INPUTS = {
    "numpy arrays": (lambda: _arrays(), _mutate_numpy),
    "pandas columns": (lambda: pd.DataFrame(_arrays()), _mutate_pandas),
    "polars columns": (lambda: __import__("polars").DataFrame(_arrays()), lambda frame: _mutate_polars(frame)),
    "pandas series in a dict": (lambda: {k: pd.Series(v) for k, v in _arrays().items()},
                                lambda d: (d["relevance"].__setitem__(0, 0), d["a"].__setitem__(1, 5.0))),
    "dict of lists": (lambda: {k: v.tolist() for k, v in _arrays().items()},
                      lambda d: (d["relevance"].reverse(), d["a"].reverse())),
    "arrow from numpy": (lambda: (lambda cols: (cols, pa.table(cols)))(_arrays()), None),
    "torch tensors": (lambda: {k: __import__("torch").tensor(v) for k, v in _arrays().items()}, _mutate_torch),
}


@pytest.mark.parametrize("kind", list(INPUTS))
def test_results_do_not_see_the_input_changed_in_place(tmp_path, kind):
    if kind == "torch tensors":
        pytest.importorskip("torch")
    if kind == "polars columns":
        pytest.importorskip("polars")
    make, mutate = INPUTS[kind]
    data = make()
    if kind == "arrow from numpy":  # an Arrow table made from numpy arrays without a copy
        cols, data = data
        mutate = lambda _: _mutate_numpy(cols)  # noqa: E731
    res = tk.evaluate(data, ["P@1", "recall@2"], score=["a", "b"], item="item")
    before, page = _views(res), _report(res, tmp_path / "r.html")
    mutate(data)
    assert _views(res) == before
    assert _report(res, tmp_path / "r.html") == page


@pytest.mark.parametrize("mutate", ["run", "judgments"])
def test_results_of_runs_and_judgments_do_not_see_them_changed(mutate):
    run = {"query": np.array([1, 1, 2]), "item": np.array([1, 2, 1]), "score": np.array([0.9, 0.1, 0.5])}
    truth = pd.DataFrame({"query": [1, 2], "item": [2, 1], "relevance": [1, 1]})
    res = tk.evaluate(run, ["P@1", "recall@2"], item="item", qrels=truth)
    before = res.curves()["value"].tolist()
    # by hand: query 1 ranks its relevant item 2nd, query 2 1st (of 1): P@1, P@2, recall@1, recall@2
    assert before == [0.5, 0.5, 0.5, 1.0]
    if mutate == "run":
        run["score"][:] = [0.1, 0.9, 0.5]
    else:
        truth.loc[0, "item"] = 1
    assert res.curves()["value"].tolist() == before


def test_streamed_file_changed_since_is_refused(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("query,item,relevance,a,b\n1,x,1,0.9,0.1\n1,y,0,0.1,0.9\n")
    res = tk.evaluate(path, ["P@1"], score=["a", "b"], item="item", chunk_rows=1)
    assert res.curves()["value"].tolist() == [1.0, 0.0]
    path.write_text("query,item,relevance,a,b\n1,x,0,0.9,0.1\n1,y,1,0.1,0.9\n1,z,1,0.1,0.9\n")
    for call in (res.curves, lambda: res.diff("a", "b", "P@1"), lambda: res.side_by_side(1),
                 lambda: res.beyond_accuracy(k=1)):
        _raises(call, DataError, "changed .*since it was evaluated")


def test_matrix_results_do_not_see_the_matrices_changed_in_place():
    torch = pytest.importorskip("torch")
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    truth = np.array([[1, 0, 1], [1, 0, 0]])
    # by hand, user 0: relevant 0.9 and 0.5 -> recall@1 1/2, @2 1; user 1: its relevant 0.2 is last -> 0, 0.
    # The rows swapped (model n): user 0's relevant 0.2 and 0.4 -> 0, 1/2; user 1's relevant 0.9 -> 1, 1
    cases = [(scores.copy(), [0.25, 0.5]), (torch.tensor(scores), [0.25, 0.5]),
             ({"m": scores.copy(), "n": torch.tensor(scores[::-1].copy())}, [0.25, 0.5, 0.5, 0.75])]
    for given, want in cases:  # curves: recall@1 of each model, then recall@2 of each
        res = tk.evaluate_matrix(given, truth, ["recall@2"])
        assert res.curves()["value"].tolist() == want
        for S in (given.values() if isinstance(given, dict) else [given]):
            S[:] = S[:, ::-1].copy() if isinstance(S, np.ndarray) else S.flip(1).clone()
        assert res.curves()["value"].tolist() == want


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_matrix_evaluator_keeps_its_own_user_ids(kind):
    ev = tk.MatrixEvaluator(["recall@1"])
    users = np.array([7, 8]) if kind == "numpy" else pytest.importorskip("torch").tensor([7, 8])
    scores = np.array([[0.9, 0.1], [0.1, 0.9]])
    if kind == "torch":
        scores = pytest.importorskip("torch").tensor(scores)
    ev.update(scores, np.array([[1, 0], [1, 0]]), users=users)
    users[:] = 100  # the buffers reused for the next batch before compute
    scores[:] = 0
    res = ev.compute()
    assert res.per_query["user"].tolist() == [7, 8] and res.per_query["recall@1"].tolist() == [1.0, 0.0]


def test_evaluate_matrix_never_changes_the_callers_sparse_matrices():
    # unsorted column indices: sorting them in place (shared with the caller) corrupted its matrix
    rel = sp.csr_matrix((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2, 2])), shape=(2, 3))
    exc = sp.csr_matrix((np.array([1.0, 1.0]), np.array([2, 1]), np.array([0, 0, 2])), shape=(2, 3))
    dense_rel, dense_exc = rel.toarray(), exc.toarray()
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    res = tk.evaluate_matrix(scores, rel, ["ndcg@1"], exclude=exc)
    assert (rel.toarray() == dense_rel).all() and (exc.toarray() == dense_exc).all()
    assert res.summary.iloc[0, 0] == 1.0  # user 0: grade 2 at 0.9 first; user 1: no relevant item


# ---------------------------------------------------------------------------------------------
# 5. a user whose every item is excluded has no candidate: no query, as in the long format

@pytest.mark.parametrize("empty", ["skip", "keep"])
def test_users_with_every_item_excluded_are_no_queries(empty):
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4], [0.3, 0.2, 0.1]])
    truth = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 0]])
    exclude = np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0]])
    got = tk.evaluate_matrix(scores, truth, ["recall@1"], exclude=exclude, empty_queries=empty)
    long = pd.DataFrame({"user": [0, 0, 0, 2, 2, 2], "relevance": [1, 0, 1, 1, 0, 0],
                         "score": [0.9, 0.1, 0.5, 0.3, 0.2, 0.1]})
    want = tk.evaluate(long, ["recall@1"], query="user")
    assert got.per_query["user"].tolist() == [0, 2] and got.per_query["recall@1"].tolist() == [0.5, 1.0]
    assert got.summary.iloc[0, 0] == want.summary.iloc[0, 0] == 0.75
    keys = ("queries", "evaluated", "skipped_empty")
    assert {k: got.info[k] for k in keys} == {k: want.info[k] for k in keys} == dict(queries=2, evaluated=2,
                                                                                     skipped_empty=0)
    assert got.info["matrix"]["users"] == 3 and got.info["matrix"]["users_without_candidates"] == 1
    ev = tk.MatrixEvaluator(["recall@1"], empty_queries=empty)
    for rows in ([0, 1], [2]):
        ev.update(scores[rows], truth[rows], exclude[rows])
    acc = ev.compute()
    assert {k: acc.info[k] for k in keys} == {k: want.info[k] for k in keys}
    pd.testing.assert_frame_equal(acc.per_query, got.per_query)


def test_every_user_excluded_is_an_error():
    _raises(lambda: tk.evaluate_matrix(np.ones((2, 2)), np.eye(2), ["recall@1"], exclude=np.ones((2, 2))),
            DataError, "no user has a candidate")
    ev = tk.MatrixEvaluator(["recall@1"])
    ev.update(np.ones((2, 2)), np.eye(2), np.ones((2, 2)))
    _raises(ev.compute, DataError, "no user has a candidate")


# ---------------------------------------------------------------------------------------------
# 6. values of the wrong kind: complex numbers, zoned timestamps, integers beyond 2**53

def _complex_cases():
    torch = pytest.importorskip("torch")
    S = np.array([[0.9, 0.1], [0.2, 0.8]])
    R = np.array([[1, 0], [0, 1]])
    return [
        (lambda: tk.evaluate_matrix(torch.tensor(S, dtype=torch.complex64), R, ["P@1"]), DataError, "complex"),
        (lambda: tk.evaluate_matrix(S.astype(complex), R, ["P@1"]), DataError, "complex"),
        (lambda: tk.evaluate_matrix(S, torch.tensor(R, dtype=torch.complex64), ["P@1"]), DataError, "complex"),
        (lambda: tk.evaluate_matrix(S, torch.tensor(R, dtype=torch.complex64).to_sparse(), ["P@1"]), DataError,
         "complex"),
        (lambda: tk.MatrixEvaluator(["P@1"]).update(torch.tensor(S, dtype=torch.complex128), R), DataError,
         "complex"),
        (lambda: tk.evaluate({"query": [1, 1], "relevance": [1, 0], "score": np.array([1 + 1j, 2])}, ["P@1"]),
         ColumnError, "complex"),
        (lambda: tk.evaluate({"query": [1, 1], "relevance": [1, 0], "score": torch.tensor([1 + 1j, 2])}, ["P@1"]),
         ColumnError, "complex"),
        (lambda: tk.recall_at_k([1, 0], torch.tensor([1 + 1j, 2]), 1), ColumnError, "complex"),
        (lambda: tk.MatrixEvaluator(["P@1"]).update(S, R, users=np.array([1j, 2j])), DataError, "ids"),
    ]


def test_complex_numbers_are_refused_everywhere():
    for call, exc, pattern in _complex_cases():
        _raises(call, exc, pattern)


def _zoned(kind):
    stamps = pd.DatetimeIndex(["2020-01-01 00:00", "2020-01-01 00:00", "2020-01-01 01:00", "2020-01-01 01:00"],
                              tz="Europe/Paris")
    frame = pd.DataFrame({"query": stamps, "relevance": [1, 0, 0, 1], "score": [0.9, 0.1, 0.2, 0.8]})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if kind == "arrow":
        return table
    if kind == "arrow dictionary":
        return table.set_column(0, "query", table.column("query").dictionary_encode())
    if kind == "polars":
        return pytest.importorskip("polars").from_arrow(table)
    if kind == "pandas arrow":
        return frame.astype({"query": pd.ArrowDtype(pa.timestamp("ns", tz="Europe/Paris"))})
    return frame


@pytest.mark.parametrize("kind", ["arrow", "arrow dictionary", "polars", "pandas", "pandas arrow", "parquet"])
def test_timestamp_ids_keep_their_time_zone(tmp_path, kind):
    data = _zoned("arrow" if kind == "parquet" else kind)
    if kind == "parquet":
        pq.write_table(data, tmp_path / "z.parquet")
        data = tmp_path / "z.parquet"
    for extra in ({}, {"chunk_rows": 1}) if kind == "parquet" else ({},):
        got = tk.evaluate(data, ["P@1"], **extra).per_query["query"].tolist()
        assert [str(t) for t in got] == ["2020-01-01 00:00:00+01:00", "2020-01-01 01:00:00+01:00"]


def test_zoned_segments_keep_their_time_zone():
    stamps = pa.array([0, 0, 3600, 3600], pa.int64()).cast(pa.timestamp("s", "Asia/Tokyo"))
    table = pa.table({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "score": [0.9, 0.1, 0.2, 0.8], "day": stamps})
    seg = tk.evaluate(table, ["P@1"], by="day").segments.reset_index()["day"].tolist()
    assert [str(v) for v in seg] == ["1970-01-01 09:00:00+09:00", "1970-01-01 10:00:00+09:00", "(all)"]


def test_write_run_refuses_what_it_cannot_write_exactly(tmp_path):
    big = pd.DataFrame({"query": ["q", "q"], "item": ["a", "b"], "score": np.array([2**53 + 2, 2**53 + 1])})
    _raises(lambda: tk.write_run(big, tmp_path / "r.txt"), DataError, "beyond 2\\*\\*53")
    _raises(lambda: tk.write_run(big.assign(score=[1, 2]), tmp_path / "r.txt", run_name=""), tk.ParameterError,
            "'run_name' parameter of write_run must be None or a non-empty string")
    assert not (tmp_path / "r.txt").exists()
    edge = big.assign(score=np.array([2**53, 2**53 - 1]))  # the largest integers a float holds
    tk.write_run(edge, tmp_path / "r.txt")
    back = tk.read_run(tmp_path / "r.txt")
    assert back["item"].tolist() == ["a", "b"] and back["score"].tolist() == [2.0**53, 2.0**53 - 1]


# ---------------------------------------------------------------------------------------------
# 7. shapes and containers that gave tracebacks

def _lazy_categorical():
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"query": ["a", "a", "b", "b"], "relevance": [True, False, False, True],
                          "score": [0.9, 0.1, 0.2, 0.8]})
    return frame.with_columns(pl.col("query").cast(pl.Categorical)).lazy()


def _null_query_parquet(tmp_path):
    path = tmp_path / "null.parquet"
    pq.write_table(pa.table({"query": pa.array([1, None, 2, 2]), "relevance": [1, 0, 0, 1],
                             "score": [0.9, 0.1, 0.2, 0.8]}), path)
    return path


SEGMENT_LOG = pd.DataFrame({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "score": [0.9, 0.1, 0.9, 0.1]})

TRACEBACKS = [
    ("by=0", lambda p: tk.evaluate(SEGMENT_LOG.assign(**{"0": 1}), ["P@1"], by=0), ParameterError,
     "'by' parameter.*Got 0"),
    ("by=[name, None]", lambda p: tk.evaluate(SEGMENT_LOG, ["P@1"], by=["query", None]), ParameterError,
     "'by' parameter"),
    ("segment values are lists", lambda p: tk.evaluate(SEGMENT_LOG.assign(seg=[["x"], ["x"], ["y"], ["y"]]), ["P@1"],
                                                       by="seg"), ColumnError, "not a list of values"),
    ("segment values mix 1 and '1'", lambda p: tk.evaluate(SEGMENT_LOG.assign(seg=[1, 1, "1", "1"]), ["P@1"],
                                                           by="seg"), ColumnError, "'1' and 1 are different"),
    ("polars List segments", lambda p: tk.evaluate(pytest.importorskip("polars").from_pandas(SEGMENT_LOG).with_columns(
        seg=pytest.importorskip("polars").Series([["x"], ["x"], ["y"], ["y"]])), ["P@1"], by="seg"), ColumnError,
     "not an array of values"),
    ("ragged scores", lambda p: tk.evaluate({"query": [1, 2], "relevance": [1, 0], "score": [[1, 2], [3]]}, ["P@1"]),
     DataError, "Column 'score' holds nested sequences of different lengths"),
    ("ragged relevance", lambda p: tk.evaluate({"query": [1, 2], "relevance": [[1], []], "score": [1, 2]}, ["P@1"]),
     DataError, "'relevance' holds nested sequences"),
    ("ragged one ranking", lambda p: tk.precision_at_k([[1, 0], [1]], [0.5, 0.1], 1), DataError, "nested sequences"),
    ("ragged score matrix", lambda p: tk.evaluate_matrix([[0.1, 0.2], [0.3]], np.eye(2), ["P@1"]), DataError,
     "rectangular"),
    ("ragged relevance matrix", lambda p: tk.evaluate_matrix(np.ones((2, 2)), [[1, 0], [1]], ["P@1"]), DataError,
     "rectangular"),
    ("score=[]", lambda p: tk.evaluate({"query": [1], "relevance": [1]}, ["P@1"], score=[]), ParameterError,
     "'score' parameter"),
    ("grades [1, '0']", lambda p: tk.recall_at_k([1, "0"], [0.5, 0.1], 1), ColumnError, "found '0' \\(text among"),
    ("grades [1, '0'] in a log", lambda p: tk.evaluate({"query": [1, 1], "relevance": [1, "0"], "score": [1, 2]},
                                                       ["P@1"]), ColumnError, "found '0'"),
    ("ids [1, '1'] in a dict of lists", lambda p: tk.evaluate({"query": [1, "1"], "relevance": [1, 0],
                                                               "score": [1, 2]}, ["P@1"]), ColumnError,
     "'1' and 1 are different ids"),
    ("null query id streamed by 1 row", lambda p: tk.evaluate(_null_query_parquet(p), ["P@1"], chunk_rows=1),
     ColumnError, "missing query ids.*row 1"),
    ("a directory without data", lambda p: tk.evaluate(p, ["P@1"]), InputFileError, "is an empty folder: there is nothing to read"),
    ("a directory as qrels", lambda p: tk.read_qrels(p), InputFileError, "is a folder, where a TREC qrels file"),
    ("None as a qrels path", lambda p: tk.read_qrels(None), ParameterError, "path"),
    ("a masked array", lambda p: tk.evaluate({"query": [1, 1], "relevance": [1, 0],
                                              "score": np.ma.masked_array([1.0, 2.0], mask=[0, 1])}, ["P@1"]),
     DataError, "masked array with 1 masked"),
    ("a tensor on the meta device", lambda p: tk.evaluate({"query": [1, 1], "relevance": [1, 0],
                                                           "score": pytest.importorskip("torch").empty(2, device="meta")},
                                                          ["P@1"]), DataError, "'meta' device"),
    ("a meta score matrix", lambda p: tk.evaluate_matrix(pytest.importorskip("torch").empty((2, 2), device="meta"),
                                                         np.eye(2), ["P@1"]), DataError, "'meta' device"),
    ("a sparse score matrix", lambda p: tk.evaluate_matrix(sp.csr_matrix(np.eye(2)), np.eye(2), ["P@1"]), DataError,
     "scores must be dense"),
    ("float128 scores that float64 rounds", lambda p: tk.evaluate(
        {"query": [1, 1], "relevance": [1, 0],
         "score": np.array([1, 1], np.longdouble) + np.array([0, np.finfo(np.longdouble).eps], np.longdouble)},
        ["P@1"]), ColumnError, "extended precision"),
]


@pytest.mark.parametrize("case,call,exc,pattern", TRACEBACKS, ids=[c[0] for c in TRACEBACKS])
def test_inputs_that_gave_tracebacks_give_clear_errors(tmp_path, case, call, exc, pattern):
    if case.startswith("float128") and np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("no extended precision on this platform")
    _raises(lambda: call(tmp_path), exc, pattern)


def test_polars_lazy_frame_with_categorical_query_and_bool_relevance():
    res = tk.evaluate(_lazy_categorical(), ["P@1"])
    # query a: relevant scored 0.9 first -> 1; query b: the relevant 0.8 below 0.2? no: 0.8 > 0.2 -> 1
    assert res.per_query["query"].tolist() == ["a", "b"] and res.summary.iloc[0, 0] == 1.0


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")  # torch, making them here
def test_sparse_layouts_of_relevance_equal_the_dense_matrix():
    torch = pytest.importorskip("torch")
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4], [0.3, 0.6, 0.1]])
    truth = np.array([[1, 0, 2], [0, 1, 0], [1, 0, 0]])
    exclude = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]])
    want = tk.evaluate_matrix(scores, truth, ["ndcg@2", "recall@1"], exclude=exclude).per_query
    t = torch.tensor(truth, dtype=torch.float32)
    e = torch.tensor(exclude, dtype=torch.float32)
    forms = [(sp.dok_matrix(truth), sp.dok_matrix(exclude)), (sp.dok_array(truth), sp.dok_array(exclude)),
             (sp.lil_matrix(truth), sp.bsr_matrix(exclude)), (t.to_sparse_csr(), e.to_sparse_csc()),
             (t.to_sparse_bsr((1, 1)), e.to_sparse_csr())]
    for rel, exc in forms:
        pd.testing.assert_frame_equal(tk.evaluate_matrix(scores, rel, ["ndcg@2", "recall@1"], exclude=exc).per_query,
                                      want)


def test_unusual_score_dtypes_of_tensors_are_exact():
    torch = pytest.importorskip("torch")
    truth = np.array([[1, 0, 1], [0, 1, 0]])
    ints = np.array([[3, 1, 2], [1, 3, 3]])
    want = tk.evaluate_matrix(ints, truth, ["recall@1", "ndcg@2"]).summary.to_numpy()
    for dtype in (torch.uint16, torch.uint32, torch.uint64, torch.int8):
        got = tk.evaluate_matrix(torch.tensor(ints).to(dtype), truth, ["recall@1", "ndcg@2"]).summary.to_numpy()
        np.testing.assert_array_equal(got, want)
    floats = torch.tensor([[1.0, 0.5, 0.75], [0.5, 1.0, 1.0]])
    np.testing.assert_array_equal(
        tk.evaluate_matrix(floats.to(torch.float8_e4m3fn), truth, ["recall@1", "ndcg@2"]).summary.to_numpy(), want)
    _raises(lambda: tk.evaluate_matrix(torch.tensor([[2**63, 1]], dtype=torch.uint64), np.array([[1, 0]]), ["P@1"]),
            DataError, "beyond 2\\*\\*53")


# beyond_accuracy

def _items_res():
    return tk.evaluate({"query": [1, 1, 2, 2, 3, 3], "item": ["x", "y", "x", "z", "x", "z"],
                        "relevance": [1, 0, 0, 1, 1, 0], "s": [0.9, 0.1, 0.5, 0.5, 0.8, 0.2]},
                       metrics=["recall@1"], score="s", item="item")


def _boom(a, b):
    raise ZeroDivisionError("no")


BEYOND = [
    (dict(k=1, popularity={"x": "0.5", "y": "0.2", "z": "0.3"}), "item 'x' has '0.5' \\(str\\)"),
    (dict(k=1, popularity=pd.Series(["a", 0.2, 0.3], index=["x", "y", "z"])), "item 'x' has 'a'"),
    (dict(k=1, popularity={"x": True, "y": 0.2, "z": 0.3}), "item 'x' has True \\(bool\\)"),
    (dict(k=1, popularity=pd.Series([0.5, 0.2, 0.3, 0.4], index=["x", "y", "z", "x"])), "item 'x' more than one"),
    (dict(k=2, similarity=lambda a, b: "0.5"), "returned '0.5' \\(str\\)"),
    (dict(k=2, similarity=lambda a, b: None), "returned None"),
    (dict(k=2, similarity=lambda a, b: float("nan")), "returned nan"),
    (dict(k=2, similarity=lambda a, b: 5), "in \\[-1, 1\\]"),
    (dict(k=2, similarity=_boom), "raised ZeroDivisionError"),
    (dict(k=2, features=pd.DataFrame([[1, 0], [0, 1], [1, 1], [2, 2]], index=["x", "y", "z", "x"])),
     "item 'x' more than once"),
    (dict(k=2, features=pd.DataFrame([["a", 0], [0, 1], [1, 1]], index=["x", "y", "z"])), "not a vector of numbers"),
    (dict(k=2, features={"x": [1.0, np.inf], "y": [0, 1], "z": [1, 1]}), "NaN or infinite"),
    (dict(k=2, features={"x": [0.0, 0.0], "y": [0, 1], "z": [1, 1]}), "norm 0.0"),
    (dict(k=1, catalog=[["x"], "y"]), "'catalog' parameter of beyond_accuracy must be None or a positive int or a "
                                      "list of ids"),
]


@pytest.mark.parametrize("kwargs,pattern", BEYOND)
def test_beyond_accuracy_refuses_what_it_cannot_use(kwargs, pattern):
    _raises(lambda: _items_res().beyond_accuracy(**kwargs), ParameterError, pattern)


@pytest.mark.parametrize("scale", [1e-170, 1e-300, 1e200, 1e300])
def test_cosine_diversity_is_scale_safe(scale):
    res = _items_res()
    unit = pd.DataFrame([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], index=["x", "y", "z"])
    want = res.beyond_accuracy(k=2, features=unit)["diversity@2"].iloc[0]
    got = res.beyond_accuracy(k=2, features=unit * scale)["diversity@2"].iloc[0]
    assert got == pytest.approx(want, rel=1e-15)
    # by hand: every query shows both candidates; pairs (x,y): 1 - 0, (x,z) and (x,z): 1 - 1/sqrt(2)
    assert want == pytest.approx((1 + 2 * (1 - 2**-0.5)) / 3, rel=1e-15)


# ---------------------------------------------------------------------------------------------
# 8. a sweep of further hostile data of the same classes, on every entry point

BASE = {"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "score": [0.9, 0.1, 0.2, 0.8]}
T = pa.table(BASE)
F = pd.DataFrame(BASE)
ACCEPTED = [  # every one of these is the log BASE (P@1 = 1 in both queries), written another way
    ("float16 scores", dict(BASE, score=np.array(BASE["score"], np.float16))),
    ("big-endian scores and ids", dict(BASE, score=np.array(BASE["score"], ">f8"), query=np.array([1, 1, 2, 2], ">i8"))),
    ("read-only scores", dict(BASE, score=np.lib.stride_tricks.as_strided(np.array(BASE["score"]), writeable=False))),
    ("strided scores", dict(BASE, score=np.array([0.9, 0, 0.1, 0, 0.2, 0, 0.8, 0])[::2])),
    ("ids of 2**63 - 1", dict(BASE, query=[2**63 - 1] * 2 + [2**63 - 2] * 2)),
    ("uint64 ids beyond int64", dict(BASE, query=np.array([2**64 - 1] * 2 + [2**63] * 2, np.uint64))),
    ("Python ints beyond 2**64", dict(BASE, query=[2**70] * 2 + [2**70 + 1] * 2)),
    ("bytes ids", dict(BASE, query=[b"a", b"a", b"b", b"b"])),
    ("unicode, BOM and NUL ids", dict(BASE, query=["\ufeffü", "\ufeffü", "a\x00", "a\x00"])),
    ("empty-string ids", dict(BASE, query=["", "", "x", "x"])),
    ("dictionary-encoded query", T.set_column(0, "query", pa.array(["a", "a", "b", "b"]).dictionary_encode())),
    ("dictionary-encoded scores", T.set_column(2, "score", pa.array(BASE["score"]).dictionary_encode())),
    ("chunked columns", pa.table({"query": pa.chunked_array([[1, 1], [2, 2]]), "relevance": pa.chunked_array([[1], [0, 0, 1]]),
                                  "score": pa.chunked_array([[0.9, 0.1, 0.2], [0.8]])})),
    ("string_view ids", T.set_column(0, "query", pa.array(["a", "a", "b", "b"], pa.string_view()))),
    ("large_string ids", T.set_column(0, "query", pa.array(["a", "a", "b", "b"], pa.large_string()))),
    ("date32 ids", T.set_column(0, "query", pa.array([0, 0, 1, 1], pa.int32()).cast(pa.date32()))),
    ("half-float Arrow scores", T.set_column(2, "score", pa.array(np.array(BASE["score"], np.float16)))),
    ("pandas Int64 ids", F.astype({"query": "Int64"})),
    ("pandas UInt64 ids beyond int64", F.assign(query=pd.array([2**64 - 1] * 2 + [2**63] * 2, dtype="UInt64"))),
    ("pandas string ids", F.assign(query=pd.array(["a", "a", "b", "b"], dtype="string"))),
    ("pandas category with unused categories", F.assign(query=pd.Categorical(["a", "a", "b", "b"],
                                                                             categories=["z", "a", "b", "c"]))),
    ("pandas category scores", F.assign(score=pd.Categorical(BASE["score"]))),
    ("pandas sparse scores", F.assign(score=pd.arrays.SparseArray(BASE["score"]))),
    ("pandas Arrow-backed scores", F.assign(score=F["score"].astype("double[pyarrow]"))),
    ("pandas boolean relevance", F.assign(relevance=pd.array([True, False, False, True], dtype="boolean"))),
    ("pandas duplicate row labels", F.set_axis([0, 0, 1, 1])),
    ("torch columns", "torch"),
]


@pytest.mark.parametrize("case,data", ACCEPTED, ids=[c for c, _ in ACCEPTED])
def test_hostile_but_valid_logs_give_the_right_numbers(case, data):
    if isinstance(data, str):
        torch = pytest.importorskip("torch")
        data = {k: torch.tensor(v) for k, v in BASE.items()}
    res = tk.evaluate(data, ["P@1", "recall@2"])
    assert res.summary.to_numpy().tolist() == [[1.0, 1.0]] and res.info["queries"] == 2


def test_pandas_nullable_integers_are_not_rounded():
    grade = 2**53 + 1  # as a float: 2**53, an ideal DCG of another gain
    frame = F.assign(relevance=pd.array([grade, 0, 0, 1], dtype="Int64"))
    _raises(lambda: tk.evaluate(frame, ["ndcg@2"]), ColumnError, "beyond 2\\*\\*53")


REFUSED = [
    ("empty pandas table", lambda: tk.evaluate(pd.DataFrame({"query": [], "relevance": [], "score": []}), ["P@1"]),
     DataError, "empty"),
    ("Arrow table of zero chunks", lambda: tk.evaluate(
        pa.table({"query": pa.chunked_array([], pa.int64()), "relevance": pa.chunked_array([], pa.int64()),
                  "score": pa.chunked_array([], pa.float64())}), ["P@1"]), DataError, "empty"),
    ("all-null scores", lambda: tk.evaluate(F.assign(score=[None] * 4), ["P@1"]), DataError, "non-finite scores"),
    ("Arrow null-typed relevance", lambda: tk.evaluate(T.set_column(1, "relevance", pa.array([None] * 4)), ["P@1"]),
     DataError, "non-finite grades"),
    ("NaN query ids", lambda: tk.evaluate(dict(BASE, query=[1.0, 1.0, np.nan, np.nan]), ["P@1"]), ColumnError,
     "2 missing query ids"),
    ("pandas Int64 ids with NA", lambda: tk.evaluate(F.assign(query=pd.array([1, None, 2, 2], dtype="Int64")),
                                                     ["P@1"]), ColumnError, "missing query ids"),
    ("category ids with NA", lambda: tk.evaluate(F.assign(query=pd.Categorical(["a", None, "b", "b"])), ["P@1"]),
     ColumnError, "missing query ids"),
    ("dictionary ids with a null", lambda: tk.evaluate(
        T.set_column(0, "query", pa.array(["a", None, "b", "b"]).dictionary_encode()), ["P@1"]), ColumnError,
     "missing query ids"),
    ("text scores among numbers", lambda: tk.evaluate(dict(BASE, score=[0.9, "0.1", 0.2, 0.8]), ["P@1"]),
     ColumnError, "found '0.1' \\(text among numbers"),
    ("Arrow list scores", lambda: tk.evaluate(T.set_column(2, "score", pa.array([[1.0]] * 4)), ["P@1"]),
     ColumnError, "found \\[1.0\\]"),
    ("Arrow struct ids", lambda: tk.evaluate(T.set_column(0, "query", pa.array([{"a": 1}] * 4)), ["P@1"]),
     ColumnError, "strings or numbers"),
    ("Arrow durations as scores", lambda: tk.evaluate(
        T.set_column(2, "score", pa.array([9, 1, 2, 8], pa.int64()).cast(pa.duration("s"))), ["P@1"]), ColumnError,
     "durations"),
    ("uint64 scores beyond 2**53", lambda: tk.evaluate(dict(BASE, score=np.array([2**63, 1, 2, 3], np.uint64)),
                                                       ["P@1"]), ColumnError, "beyond 2\\*\\*53"),
    ("a 2-D column", lambda: tk.evaluate(dict(BASE, score=np.array(BASE["score"])[:, None]), ["P@1"]), DataError,
     "one-dimensional"),
    ("a scalar column", lambda: tk.evaluate(dict(BASE, query=5), ["P@1"]), DataError, "one-dimensional"),
    ("a matrix of text", lambda: tk.evaluate_matrix(np.array([["a", "b"]]), np.array([[1, 0]]), ["P@1"]), DataError,
     "real numbers"),
    ("text relevance matrix", lambda: tk.evaluate_matrix(np.ones((1, 2)), np.array([["1", "0"]]), ["P@1"]), DataError,
     "boolean or numeric"),
    ("text exclusions", lambda: tk.evaluate_matrix(np.ones((1, 2)), np.array([[1, 0]]), ["P@1"],
                                                   exclude=np.array([["1", "0"]])), DataError, "boolean or numeric"),
    ("user ids with NaN", lambda: tk.MatrixEvaluator(["P@1"]).update(np.ones((2, 2)), np.eye(2),
                                                                      users=np.array([1.0, np.nan])), ColumnError,
     "missing user ids"),
    ("qrels with text grades", lambda: tk.evaluate({"query": [1], "item": ["a"], "score": [0.5]}, ["P@1"],
                                                   item="item", qrels={"query": [1], "item": ["a"],
                                                                       "relevance": ["1"]}), ColumnError,
     "found '1'"),
    ("qrels with mixed ids", lambda: tk.evaluate({"query": [1], "item": ["a"], "score": [0.5]}, ["P@1"], item="item",
                                                 qrels={"query": ["1", 2], "item": ["a", "a"], "relevance": [1, 1]}),
     ColumnError, "one kind"),
]


@pytest.mark.parametrize("case,call,exc,pattern", REFUSED, ids=[c[0] for c in REFUSED])
def test_hostile_logs_that_cannot_be_evaluated_are_refused(case, call, exc, pattern):
    _raises(call, exc, pattern)


@pytest.mark.parametrize("text,pattern", [
    (b"", "is empty \\(0 bytes\\)"),
    (b"# only a comment\n\n", "has no qrels lines"),
    ("q\xe91 0 d1 1\n".encode("latin-1"), "Cannot read"),
    ("q1 0 d1 1\n".encode("utf-16"), "Cannot read"),
    (b"q1 0 d1 99999999999999999999\n", "beyond 2\\*\\*53"),
    (b"q1 0 d1 1 extra\n", "needs 4 fields"),
])
def test_hostile_qrels_files(tmp_path, text, pattern):
    path = tmp_path / "qrels.txt"
    path.write_bytes(text)
    with pytest.raises((DataError, InputFileError), match=pattern):
        tk.read_qrels(path)


def test_qrels_file_read_with_crlf_and_bom(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_bytes("\ufeffq1 0 d1 1\r\nq1 0 d2 0\r\n".encode())
    frame = tk.read_qrels(path)
    assert frame["query"].tolist() == ["q1", "q1"] and frame["item"].tolist() == ["d1", "d2"]


def test_a_model_column_left_unnamed_without_item_ids_is_said():
    """A stacked log (model a ranks the click 3rd, model b 1st) read without model= and item=: both models'
    rows are ranked as one list (recall@1 0.25, rr 0.75, neither model's number), which nothing else could
    catch (no item ids to find the repeats): a warning names model=. With model= each model's own numbers."""
    log = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "query": [1] * 6, "item": [1, 2, 3, 1, 2, 3],
                        "score": [0.9, 0.5, 0.1, 0.1, 0.5, 0.9], "click": [0, 0, 1, 0, 0, 1]})
    with pytest.warns(tk.TopkevalWarning, match="column 'model' that no parameter names.*Pass model='model'"):
        pooled = tk.evaluate(log, ["recall@1", "rr"], relevance="click", score="score")
    assert pooled.summary.loc["score"].tolist() == [0.25, 0.75]
    apart = tk.evaluate(log, ["recall@1", "rr"], relevance="click", score="score", model="model", item="item")
    assert apart.summary.to_dict("index") == {"a": {"recall@1": 0.0, "rr": 1 / 3}, "b": {"recall@1": 1.0, "rr": 1.0}}
