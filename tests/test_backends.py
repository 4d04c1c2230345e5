"""One set of fixture logs through every path of topkeval, as narwhals runs each test on every backend.

Each fixture log (ties in the scores, a query without a relevant item, lists shorter than k, graded
relevance, item ids as integers or as text, one query alone, a full score matrix) is evaluated through
every path, under a few conventions, and every path must give the brute-force reference's numbers
(tests/reference.py, written apart from the engine), the per-query values of the in-memory table to
the last bit, and the same ``info`` counts (worked out here from the fixture):

==================  ===========================================================================
path                what it runs
==================  ===========================================================================
table               ``tk.evaluate(pandas_df, ...)``
stream              the log written to parquet, ``tk.evaluate(path, chunk_rows=3)``: batch by batch
stream-partitioned  the same file with the queries' rows interleaved: the hash-partitioned mode
judgments           a run table and a qrels table (every row judged, its grade 0 included)
matrix              ``tk.evaluate_matrix`` (the cells outside a query's list excluded)
evaluator           ``tk.MatrixEvaluator``, fed in two updates
spark               ``tk.evaluate(spark_df, ...)`` on a local session (tests/conftest.py)
spark-judgments     the run and the qrels as Spark DataFrames
one-ranking         ``tk.recall_at_k`` and its siblings, for the fixture of one query
==================  ===========================================================================

A path that cannot express a fixture or a metric skips that combination with its reason.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from reference import evaluate_reference
from topkeval.inputs import stream

pa = pytest.importorskip("pyarrow")

# the tests' own Spark createDataFrame: pyspark says it does not fully support pandas 3
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning:pyspark")

MODELS = ["a", "b"]
#: (name, family, k, beta): the metrics most sensitive to the conventions, in the reference's terms
METRICS = [("recall@3", "recall", 3, None), ("precision@3", "precision", 3, None),
           ("r_precision", "r_precision", None, None), ("ap", "ap", None, None), ("ndcg@3", "ndcg", 3, None),
           ("rr", "rr", None, None), ("hit_rate@3", "hit_rate", 3, None), ("f1@3", "f1", 3, None)]
NAMES = [m[0] for m in METRICS]
CUTOFFS = (3,)  # every k of METRICS (and R, for r_precision)

#: query, item, grade, score of model a, score of model b
FIXTURES = {
    # text query ids, integer item ids; a tie of three across the cutoff (q1), a list of 2 < k (q2), a
    # query with nothing relevant (q3), a tie of four across the cutoff and R (q4, model b)
    "graded": [
        ("q1", 1, 3, 0.9, 0.2), ("q1", 2, 0, 0.5, 0.2), ("q1", 3, 1, 0.5, 0.7), ("q1", 4, 0, 0.5, 0.1),
        ("q1", 5, 2, 0.1, 0.7),
        ("q2", 1, 1, 0.3, 0.1), ("q2", 6, 0, 0.3, 0.4),
        ("q3", 2, 0, 0.4, 0.5), ("q3", 3, 0, 0.3, 0.5), ("q3", 4, 0, 0.3, 0.5), ("q3", 7, 0, 0.2, 0.5),
        ("q4", 1, 0, 0.6, 0.9), ("q4", 2, 1, 0.5, 0.4), ("q4", 3, 0, 0.4, 0.4), ("q4", 8, 0, 0.3, 0.4),
        ("q4", 9, 2, 0.2, 0.4), ("q4", 10, 0, 0.1, 0.1),
    ],
    # integer query ids, text item ids; every candidate tied (10, model a), two empty queries (30, and 10
    # under threshold=2), a list of one relevant item (40), a list longer than k with ties across it (20)
    "text_items": [
        (10, "x", 1, 0.5, 0.3), (10, "y", 1, 0.5, 0.2), (10, "z", 0, 0.5, 0.1),
        (20, "y", 0, 0.7, 0.1), (20, "w", 2, 0.7, 0.2), (20, "v", 0, 0.6, 0.3), (20, "u", 0, 0.6, 0.4),
        (20, "t", 1, 0.6, 0.5), (20, "s", 0, 0.2, 0.6), (20, "r", 3, 0.1, 0.7),
        (30, "x", 0, 0.9, 0.5), (30, "u", 0, 0.1, 0.5),
        (40, "z", 2, 0.4, 0.4),
    ],
    # one query (the one-ranking functions' input), graded, ties at and around the cutoff
    "one_query": [
        ("u1", 11, 2, 0.8, 0.1), ("u1", 12, 0, 0.8, 0.9), ("u1", 13, 1, 0.6, 0.9), ("u1", 14, 0, 0.6, 0.5),
        ("u1", 15, 0, 0.6, 0.2), ("u1", 16, 1, 0.3, 0.2), ("u1", 17, 0, 0.1, 0.2),
    ],
    # a full matrix: every query scores every item (so every list has the same length: the top-N warning)
    "full": [
        (0, 0, 1, 0.4, 0.3), (0, 1, 0, 0.4, 0.3), (0, 2, 2, 0.3, 0.3), (0, 3, 0, 0.1, 0.9),
        (1, 0, 0, 0.2, 0.1), (1, 1, 0, 0.2, 0.2), (1, 2, 0, 0.1, 0.3), (1, 3, 0, 0.1, 0.4),
        (2, 0, 0, 0.5, 0.6), (2, 1, 3, 0.5, 0.6), (2, 2, 0, 0.5, 0.1), (2, 3, 1, 0.2, 0.6),
    ],
}

CONVENTIONS = {
    "default": {},  # ties="expected", empty_queries="skip", short_lists="pad", undefined=0
    "pessimistic-keep": dict(ties="pessimistic", empty_queries="keep"),
    "optimistic-threshold2": dict(ties="optimistic", threshold=2),
    "shrink-keep-nan": dict(short_lists="shrink", empty_queries="keep", undefined="nan"),
    "item_desc": dict(ties="item_desc"),  # the tie order follows the item ids
}

PATHS = ["table", "stream", "stream-partitioned", "judgments", "matrix", "evaluator", "spark", "spark-judgments",
         "one-ranking"]
TOP_N = r"Every query has exactly \d+ candidates"
#: the paths that read lists alone, which warn when every list has one length (not judgments, not a matrix)
WARN_TOP_N = {"table", "stream", "stream-partitioned", "spark"}


@pytest.fixture
def path(request):
    """The path of topkeval that evaluates the fixture (as narwhals' constructor fixture), one of
    :data:`PATHS`, given with the conventions by :func:`_paths_and_conventions`."""
    return request.param


def _paths_and_conventions():
    """Every path under every convention. Spark's local session takes about 2 s an evaluation (and 20 s
    to start): the fast suite runs its paths under the default conventions, the others are slow."""
    for path in PATHS:
        for conv in CONVENTIONS:
            slow = path.startswith("spark") and conv != "default"
            yield pytest.param(path, conv, marks=[pytest.mark.slow] if slow else [], id=f"{path}-{conv}")


def _frame(name: str) -> pd.DataFrame:
    return pd.DataFrame(FIXTURES[name], columns=["query", "item", "grade", "a", "b"])


def _queries(frame: pd.DataFrame) -> list:
    return list(dict.fromkeys(frame["query"]))


def _reference_conventions(conv: dict) -> dict:
    out = dict(ties="expected", empty_queries="skip", undefined=0.0, short_lists="pad", threshold=None) | conv
    out["undefined"] = math.nan if out["undefined"] == "nan" else float(out["undefined"])
    return out


def _relevant(grades, conv: dict) -> np.ndarray:
    grades = np.asarray(grades, dtype=float)
    return grades > 0 if conv.get("threshold") is None else grades >= conv["threshold"]


def _expected_info(frame: pd.DataFrame, conv: dict) -> dict:
    """The counts of ``info``, worked out from the fixture: queries, those evaluated and skipped, and per
    model the queries where a tie group of relevant and non-relevant candidates straddles a cutoff (3, or R
    for r_precision)."""
    queries = _queries(frame)
    R = {q: int(_relevant(frame.loc[frame["query"] == q, "grade"], conv).sum()) for q in queries}
    evaluated = len(queries) if conv.get("empty_queries") == "keep" else sum(r > 0 for r in R.values())
    ties = {}
    for model in MODELS:
        count = 0
        for q in queries:
            rows = frame[frame["query"] == q]
            scores, rel = rows[model].to_numpy(), _relevant(rows["grade"], conv)
            cutoffs = set(CUTOFFS) | ({R[q]} if R[q] else set())
            straddles = False
            for s in np.unique(scores):
                above, group = int((scores > s).sum()), scores == s
                mixed = rel[group].any() and not rel[group].all()
                straddles |= mixed and any(above < c < above + int(group.sum()) for c in cutoffs)
            count += straddles
        ties[model] = count
    return {"queries": len(queries), "evaluated": evaluated, "skipped_empty": len(queries) - evaluated,
            "evaluated_per_model": {m: evaluated for m in MODELS}, "ties_at_cutoff": ties}


def _interleaved(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of every query taken in turn (q1's first, q2's first, ..., q1's second...): no query's
    rows are contiguous, so a streamed file is hash-partitioned rather than read in groups."""
    position = frame.groupby("query", sort=False).cumcount()
    order = np.lexsort((frame["query"].map({q: i for i, q in enumerate(_queries(frame))}), position))
    return frame.iloc[order].reset_index(drop=True)


def _matrices(frame: pd.DataFrame):
    """The fixture as score matrices (queries x items), a grade matrix and the cells outside each query's
    list as ``exclude`` (none for a full matrix)."""
    queries, items = _queries(frame), sorted(set(frame["item"]))
    u = frame["query"].map({q: i for i, q in enumerate(queries)}).to_numpy()
    i = frame["item"].map({x: j for j, x in enumerate(items)}).to_numpy()
    shape = (len(queries), len(items))
    scores = {m: np.zeros(shape) for m in MODELS}
    for m in MODELS:
        scores[m][u, i] = frame[m].to_numpy()
    grades = np.zeros(shape)
    grades[u, i] = frame["grade"].to_numpy()
    exclude = np.ones(shape, dtype=bool)
    exclude[u, i] = False
    return queries, items, scores, grades, (exclude if exclude.any() else None)


def _spark_frame(spark, frame: pd.DataFrame):
    """A Spark DataFrame of the rows, spread over 3 partitions (the rows of a query split across them)."""
    return spark.createDataFrame(pa.Table.from_pandas(frame, preserve_index=False)).repartition(3)


def _one_ranking(frame: pd.DataFrame, conv: dict) -> pd.DataFrame:
    """Per-query values of the one-ranking functions (the metrics they cover), nan rows dropped as skipped."""
    items = frame["item"].to_numpy()  # for ties="item_desc"
    functions = {"recall@3": lambda r, s: tk.recall_at_k(r, s, 3, items=items, **conv),
                 "precision@3": lambda r, s: tk.precision_at_k(r, s, 3, items=items, **conv),
                 "f1@3": lambda r, s: tk.f1_at_k(r, s, 3, items=items, **conv),
                 "r_precision": lambda r, s: tk.r_precision(r, s, items=items, **conv)}
    rows = []
    query = frame["query"].iloc[0]
    skipped = conv.get("empty_queries", "skip") == "skip" and not _relevant(frame["grade"], conv).any()
    for model in MODELS:
        values = {name: f(frame["grade"].to_numpy(), frame[model].to_numpy()) for name, f in functions.items()}
        if skipped:  # no relevant item: nothing to average, nan
            assert all(math.isnan(v) for v in values.values()), values
            continue
        rows.append({"model": model, "query": query, **values})
    return pd.DataFrame(rows, columns=["model", "query", *functions])


def _run(path: str, name: str, conv: dict, request, tmp_path, monkeypatch):
    """Evaluate fixture ``name`` under ``conv`` through ``path``: (per_query sorted by model and query,
    summary, info or None where the path has none)."""
    frame = _frame(name)
    if path == "one-ranking":
        if frame["query"].nunique() != 1:
            pytest.skip("the one-ranking functions (tk.recall_at_k...) take one query")
        per_query = _one_ranking(frame, conv)
        return per_query, None, None
    if path in ("matrix", "evaluator") and conv.get("ties", "expected") == "item_desc":
        pytest.skip("a score matrix has column indices, not the log's item ids, to break ties by")
    if path == "stream-partitioned" and frame["query"].nunique() == 1:
        pytest.skip("the rows of a single query are always grouped: there is nothing to partition")
    metrics = NAMES
    kw = dict(relevance="grade", score=MODELS, item="item", **conv)
    if path == "table":
        res = tk.evaluate(frame, metrics, **kw)
    elif path in ("stream", "stream-partitioned"):
        calls = []
        partitioned = stream._partitioned
        monkeypatch.setattr(stream, "_partitioned", lambda *a, **k: calls.append(1) or partitioned(*a, **k))
        file = tmp_path / "log.parquet"
        (frame if path == "stream" else _interleaved(frame)).to_parquet(file, index=False)
        res = tk.evaluate(file, metrics, chunk_rows=3, **kw)
        assert bool(calls) == (path == "stream-partitioned")  # the mode this path means to run
        assert res.info["chunks"] > 1 or frame["query"].nunique() == 1  # batch by batch
    elif path == "judgments":
        res = tk.evaluate(frame[["query", "item", *MODELS]], metrics, qrels=frame[["query", "item", "grade"]], **kw)
    elif path in ("spark", "spark-judgments"):
        spark = request.getfixturevalue("spark")
        if path == "spark":
            res = tk.evaluate(_spark_frame(spark, frame), metrics, **kw)
        else:
            res = tk.evaluate(_spark_frame(spark, frame[["query", "item", *MODELS]]), metrics,
                              qrels=_spark_frame(spark, frame[["query", "item", "grade"]]), **kw)
    else:
        queries, _, scores, grades, exclude = _matrices(frame)
        conv_kw = dict(conv)
        if path == "matrix":
            res = tk.evaluate_matrix(scores, grades, metrics, exclude=exclude, **conv_kw)
        else:
            ev = tk.MatrixEvaluator(metrics, **conv_kw)
            half = max(1, len(queries) // 2)
            for rows in (slice(0, half), slice(half, None)):
                if len(range(len(queries))[rows]):
                    ev.update({m: s[rows] for m, s in scores.items()}, grades[rows],
                              exclude=None if exclude is None else exclude[rows])
            res = ev.compute()
        per_query = res.to_pandas().rename(columns={"user": "query"})
        per_query["query"] = [queries[u] for u in per_query["query"]]
        return per_query.sort_values(["model", "query"]).reset_index(drop=True), res.summary, res.info
    return res.to_pandas().sort_values(["model", "query"]).reset_index(drop=True), res.summary, res.info


def _close(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= 1e-12 * max(1.0, abs(want))


@pytest.mark.parametrize("name", list(FIXTURES))
@pytest.mark.parametrize(("path", "conv_name"), list(_paths_and_conventions()), indirect=["path"])
def test_every_path_gives_the_reference_numbers(path, name, conv_name, request, tmp_path, monkeypatch):
    conv = CONVENTIONS[conv_name]
    frame = _frame(name)
    equal_lengths = frame.groupby("query").size().nunique() == 1 and frame["query"].nunique() >= 2
    if equal_lengths and path in WARN_TOP_N:  # the fixture's shape, by design: the warning must come
        with pytest.warns(tk.TopkevalWarning, match=TOP_N):
            per_query, summary, info = _run(path, name, conv, request, tmp_path, monkeypatch)
    else:
        per_query, summary, info = _run(path, name, conv, request, tmp_path, monkeypatch)

    # the independent numbers: the brute force of tests/reference.py on the fixture's rows
    rows = [dict(zip(["query", "item", "grade", "a", "b"], r, strict=True)) for r in FIXTURES[name]]
    ref_pq, ref_sum = evaluate_reference(rows, METRICS, _reference_conventions(conv), MODELS)
    names = [n for n in NAMES if n in per_query.columns]
    got = {(r["model"], r["query"]): r for r in per_query.to_dict("records")}
    assert set(got) == set(ref_pq), "the (model, query) pairs evaluated"
    for key, values in ref_pq.items():
        for metric in names:
            assert _close(float(got[key][metric]), values[metric]), (key, metric, got[key][metric], values[metric])
    if summary is not None:
        assert list(summary.index) == MODELS and list(summary.columns) == NAMES
        for model in MODELS:
            for metric in NAMES:
                assert _close(float(summary.loc[model, metric]), ref_sum[model][metric]), (model, metric)

    # every path: the per-query values of the in-memory table, to the last bit
    if path != "table":
        with _expect_top_n(equal_lengths):
            table = tk.evaluate(frame, NAMES, relevance="grade", score=MODELS, item="item", **conv)
        want = table.per_query.sort_values(["model", "query"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(per_query, want[per_query.columns], check_exact=True, check_dtype=False)
        if summary is not None:
            pd.testing.assert_frame_equal(summary, table.summary, check_exact=False, rtol=1e-15)

    if info is not None:
        want_info = _expected_info(frame, conv)
        assert {k: info[k] for k in want_info} == want_info
        rows_read = frame["query"].nunique() * frame["item"].nunique() if path in ("matrix", "evaluator") else len(frame)
        assert info["rows"] == rows_read  # a score matrix reads every cell, the excluded ones too


def _expect_top_n(equal_lengths: bool):
    import contextlib

    return pytest.warns(tk.TopkevalWarning, match=TOP_N) if equal_lengths else contextlib.nullcontext()
