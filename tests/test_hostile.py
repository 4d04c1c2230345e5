"""Hostile inputs: never a silent wrong number, never a traceback from deep inside.

Each case is one row of a table, grouped by class: ids read from text, byte order marks, runs that
could merge, ids matched across types, values that are not numbers, shapes that could be guessed,
overflow, trec_eval's own comparisons, files written and read back, ids in every output format,
the same question on every path, parameters of every kind, threads.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import topkeval as tk
from topkeval.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")

LOG = pd.DataFrame({"query": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "relevance": [1, 0, 0, 1],
                    "score": [0.3, 0.2, 0.5, 0.1]})


def _write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# ---------------------------------------------------------------------------------------------
# ids read from text files stay text; a byte order mark is not part of an id


def test_csv_ids_stay_text(tmp_path):
    path = _write(tmp_path / "log.csv", "query,item,relevance,score\n007,01,1,0.9\n007,1,0,0.5\n7,01,0,0.9\n"
                                        "7,1,1,0.5\n00003,x,1,0.1\n")
    res = tk.evaluate(path, metrics=["P@1"], item="item")
    assert res.per_query["query"].tolist() == ["007", "7", "00003"]  # not merged, not 3
    assert res.per_query["P@1"].tolist() == [1.0, 0.0, 1.0]
    assert res.info["queries"] == 3


def test_csv_run_meets_trec_qrels_by_text(tmp_path):
    run = _write(tmp_path / "run.csv", "query,item,score\n007,d1,0.5\n007,d2,0.4\n")
    qrels = _write(tmp_path / "qrels.txt", "007 0 d2 1\n")
    res = tk.evaluate(run, metrics=["rr"], item="item", qrels=qrels)
    assert res.summary.iloc[0, 0] == 0.5 and res.per_query["query"].tolist() == ["007"]


@pytest.mark.parametrize("kind", ["run", "qrels", "csv"])
def test_byte_order_mark_is_not_part_of_an_id(tmp_path, kind):
    bom = b"\xef\xbb\xbf"
    if kind == "csv":
        res = tk.evaluate(_write(tmp_path / "log.csv", bom + b"query,relevance,score\nq1,1,0.5\nq1,0,0.1\n"),
                          metrics=["P@1"])
        assert res.per_query["query"].tolist() == ["q1"]
        return
    run = _write(tmp_path / "run.txt", (bom if kind == "run" else b"") + b"q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.4 r\n")
    qrels = _write(tmp_path / "qrels.txt", (bom if kind == "qrels" else b"") + b"q1 0 d1 1\n")
    assert tk.read_run(run)["query"].tolist() == ["q1", "q1"] and tk.read_qrels(qrels)["query"].tolist() == ["q1"]
    assert tk.evaluate(run, qrels=qrels, metrics=["P@1"]).summary.iloc[0, 0] == 1.0


def test_slow_reader_on_irregular_whitespace_and_comments(tmp_path):
    text = "# a comment\nq1  Q0\td1 1 0.5 r   \n\nq1 Q0 d2 2 0.4 r extra\n"
    frame = tk.read_run(_write(tmp_path / "run.txt", text))
    assert frame["item"].tolist() == ["d1", "d2"] and frame["score"].tolist() == [0.5, 0.4]


# ---------------------------------------------------------------------------------------------
# runs never merge; ids are matched by value or refused


def test_two_runs_with_the_same_file_name_and_tag_stay_apart(tmp_path):
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a = _write(tmp_path / "d1" / "a.run", "q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.4 r\n")
    b = _write(tmp_path / "d2" / "a.run", "q1 Q0 d2 1 0.5 r\nq1 Q0 d1 2 0.4 r\n")
    qrels = _write(tmp_path / "qrels.txt", "q1 0 d2 1\n")
    res = tk.evaluate([a, b], qrels=qrels, metrics=["P@1"])
    assert len(res.models) == 2 and sorted(res.summary["P@1"]) == [0.0, 1.0]
    with pytest.raises(tk.ParameterError, match="given twice"):
        tk.evaluate([a, a], qrels=qrels)
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(a), "--run", str(b), "-m", "P@1", "--format", "json"])
    assert code == 0


@pytest.mark.parametrize("run_ids,judged_ids", [
    ([1, 1], [1.0]),            # int and float: by value
    ([1.0, 1.0], [1]),
    (["1", "1"], [1]),          # text and int: by the decimal form
    ([1, 1], ["1"]),
    (np.array([1, 1], np.int32), np.array([1], np.uint64)),
])
def test_query_ids_match_by_value(run_ids, judged_ids):
    run = pd.DataFrame({"q": run_ids, "item": ["x", "y"], "score": [0.9, 0.1]})
    qrels = pd.DataFrame({"q": judged_ids, "item": ["y"], "relevance": [1]})
    assert tk.evaluate(run, ["rr"], query="q", item="item", qrels=qrels).summary.iloc[0, 0] == 0.5


def test_judgments_sharing_no_query_are_an_error():
    run = pd.DataFrame({"q": [1, 1], "item": ["x", "y"], "score": [0.9, 0.1]})
    with pytest.raises(tk.DataError, match="share no query"):
        tk.evaluate(run, ["rr"], query="q", item="item", qrels=pd.DataFrame({"q": [5.0], "item": ["y"],
                                                                               "relevance": [1]}))
    with pytest.raises(tk.ColumnError, match="not whole"):
        tk.evaluate(run, ["rr"], query="q", item="item", qrels=pd.DataFrame({"q": [1.5], "item": ["y"],
                                                                               "relevance": [1]}))


def test_no_judged_item_retrieved_warns():
    run = pd.DataFrame({"q": [1, 1], "item": [7, 8], "score": [0.9, 0.1]})
    qrels = pd.DataFrame({"q": [1], "item": ["007"], "relevance": [1]})
    with pytest.warns(tk.TopkevalWarning, match="No retrieved item has a judgment"):
        tk.evaluate(run, ["rr"], query="q", item="item", qrels=qrels)


# ---------------------------------------------------------------------------------------------
# values that are not what they seem: refused, never converted silently

DATES = pd.to_datetime(["2020-01-01", "2020-01-01", "2020-01-02", "2020-01-02"])

SILENT = [
    (lambda: tk.evaluate(LOG.assign(query=DATES.where([True, False, True, True]))), tk.ColumnError, "missing query ids"),
    (lambda: tk.evaluate(LOG.assign(query=pd.to_timedelta([1, None, 2, 2], unit="s"))), tk.ColumnError, "missing"),
    (lambda: tk.evaluate(LOG.assign(item=[pd.NaT, DATES[0], DATES[1], DATES[2]]), item="item"), tk.ColumnError,
     "missing item ids"),
    (lambda: tk.evaluate(LOG.assign(score=DATES)), tk.ColumnError, "holds dates"),
    (lambda: tk.evaluate(LOG.assign(score=pd.to_timedelta([1, 2, 3, 4], unit="s"))), tk.ColumnError, "durations"),
    (lambda: tk.evaluate(LOG.assign(score=LOG.score + 1j)), tk.ColumnError, "complex"),
    (lambda: tk.evaluate(LOG.assign(relevance=LOG.relevance + 0j)), tk.ColumnError, "complex"),
    (lambda: tk.evaluate(LOG.assign(score=np.array([2**60, 2**60 + 1, 1, 2], dtype=object))), tk.ColumnError,
     "beyond 2\\*\\*53"),
    (lambda: tk.evaluate(LOG.assign(score=np.array([2**63, 1, 2, 3], dtype=np.uint64))), tk.ColumnError, "2\\*\\*53"),
    (lambda: tk.evaluate(LOG.assign(query=[[1], [1], [2], [2]])), tk.ColumnError, "must be strings or numbers"),
    (lambda: tk.evaluate(LOG.assign(query=["1", 1, "2", 2])), tk.ColumnError, "'1' and 1 are different"),
    (lambda: tk.recall_at_k([1, 0], [2**60, 2**60 + 1], 1), tk.DataError, "beyond 2\\*\\*53"),
    (lambda: tk.recall_at_k([1, 0], [2**53 + 1, 0.5], 1), tk.DataError, "beyond 2\\*\\*53"),
    (lambda: tk.evaluate_matrix(np.array([[2**60, 2**60 + 1]]), np.array([[1, 0]])), tk.DataError, "2\\*\\*53"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), sp.csr_matrix(np.array([[np.nan, 0, 1], [0, 0, 1.0]]))),
     tk.DataError, "NaN or infinite grades"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), (np.array([0, 1]), np.array([0, 1]), np.array([1.0, np.nan]))),
     tk.DataError, "NaN or infinite grades"),
    # shapes are never guessed: an array is a matrix, an edge list a tuple
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), np.array([[0, 1], [1, 2]])), tk.DataError, "given as a tuple"),
    (lambda: tk.evaluate_matrix(np.ones((2, 5)), np.array([[0, 1, 1, 0], [1, 2, 3, 4]])), tk.DataError, "shape"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), (np.array([0, 2]), np.array([0, 1]))), tk.DataError,
     "user ids of the edge list"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), (np.array([0.0, 1.0]), np.array([0, 1]))), tk.DataError,
     "must be integers"),
    # overflow
    (lambda: tk.evaluate(LOG.assign(relevance=[1100, 0, 0, 1]), ["ndcg(gain=exp)@2"]), tk.DataError, "2\\*\\*1100"),
]


@pytest.mark.parametrize("call,exc,pattern", SILENT)
def test_silent_wrong_numbers_are_refused(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_qrels_grades_are_integers(tmp_path):
    for grade in ("1_0", "1.5", "١", "0x10", "nan"):  # trec_eval's atol would read 1, 1, 0, 0, 0
        with pytest.raises(tk.DataError, match="line 2: the grade .* is not an integer"):
            tk.read_qrels(_write(tmp_path / "q.txt", f"q1 0 d0 1\nq1 0 d1 {grade}\n"))
    for grade in ("9007199254740993", "1e300"):  # integers, but past those a float64 holds exactly
        with pytest.raises(tk.DataError, match="line 2: the grade .* is beyond 2\\*\\*53"):
            tk.read_qrels(_write(tmp_path / "q.txt", f"q1 0 d0 1\nq1 0 d1 {grade}\n"))
    for grade in ("1e0", "1.0", "+1", "-1"):  # whole numbers: the value atol reads too (0 for -0)
        frame = tk.read_qrels(_write(tmp_path / "q.txt", f"q1 0 d0 1\nq1 0 d1 {grade}\n"))
        assert frame["relevance"].tolist() == [1, int(float(grade))]
    for score in ("1_0", "nan", "inf", "0x10"):
        with pytest.raises(tk.DataError, match="line 1: the score"):
            tk.read_run(_write(tmp_path / "r.txt", f"q1 Q0 d1 1 {score} r\n"))


def test_edge_list_two_users_is_not_a_matrix():
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])  # 2 users: a (2, E) array would be ambiguous
    dense = tk.evaluate_matrix(scores, np.array([[1, 0, 1], [0, 1, 0]]), ["recall@1"])
    edges = tk.evaluate_matrix(scores, (np.array([0, 0, 1]), np.array([0, 2, 1])), ["recall@1"])
    graded = tk.evaluate_matrix(scores, (np.array([0, 0, 1]), np.array([0, 2, 1]), np.array([1, 2, 1])), ["ndcg@2"])
    assert dense.summary.iloc[0, 0] == edges.summary.iloc[0, 0] == 0.75
    assert graded.summary.iloc[0, 0] < 1.0


def test_ndcg_of_huge_linear_grades_is_exact():
    huge = LOG.assign(relevance=[1.5e308, 0, 0, 1e308])
    small = LOG.assign(relevance=[1.5, 0, 0, 1.0])
    for metric in ("ndcg@2", "ndcg", "ndcg@1"):
        a = tk.evaluate(huge, [metric]).per_query[metric].to_numpy()
        b = tk.evaluate(small, [metric]).per_query[metric].to_numpy()
        np.testing.assert_allclose(a, b, rtol=1e-14)
    dcg = tk.evaluate(huge, ["dcg@2"]).summary.iloc[0, 0]  # a mean of 1.5e308 and 6.3e307: no overflow
    assert math.isfinite(dcg) and dcg == pytest.approx(1.5e308 / 2 + 1e308 / math.log2(3) / 2, rel=1e-15)
    with pytest.raises(tk.DataError, match="exceeds the largest float64"):
        tk.evaluate(LOG.assign(relevance=[1.5e308, 0, 1.5e308, 1.5e308]), ["dcg@2"])


# ---------------------------------------------------------------------------------------------
# files written and read back


def test_write_run_refuses_what_it_could_not_read_back(tmp_path):
    path = tmp_path / "out.run"
    for bad, pattern in ((LOG.assign(item=["a b", "b", "a", "c"]), "item id 'a b'"),
                         (LOG.assign(query=["q\t1", "q", "q", "q"]), "query id"),
                         (LOG.assign(item=["a\nb", "b", "a", "c"]), "item id"),
                         (LOG.assign(item=["", "b", "a", "c"]), "non-empty"),
                         (LOG.assign(score=[np.nan, 1, 2, 3]), "finite numbers")):
        with pytest.raises(tk.DataError, match=pattern):
            tk.write_run(bad, path)
    with pytest.raises(tk.DataError, match="run name"):
        tk.write_run(LOG, path, run_name="my run")
    with pytest.raises(tk.ColumnError, match="'nope' not found"):
        tk.write_run(LOG, path, score="nope")
    assert not path.exists()
    tk.write_run(LOG.assign(score=[0.1 + 0.2, 1 / 3, 2.0**-40, 1e300]), path)
    back = tk.read_run(path)
    assert sorted(back["score"]) == sorted([0.1 + 0.2, 1 / 3, 2.0**-40, 1e300])  # every digit kept
    with pytest.raises(tk.InputFileError, match="already exists"):
        tk.write_run(LOG, path)
    tk.write_run(LOG, path, overwrite=True)


def test_write_run_never_writes_through_a_symlink(tmp_path):
    target = _write(tmp_path / "precious.txt", "keep me")
    link = tmp_path / "out.run"
    link.symlink_to(target)
    with pytest.raises(tk.InputFileError, match="symbolic link"):
        tk.write_run(LOG, link)
    with pytest.raises(tk.InputFileError, match="symbolic link"):  # only regular files are ever replaced
        tk.write_run(LOG, link, overwrite=True)
    assert target.read_text() == "keep me" and link.is_symlink()


# ---------------------------------------------------------------------------------------------
# ids as they are, in every output format

HOSTILE = pd.DataFrame({"query": ["[bold]q[/]", "a|b<script>alert(1)</script>", "t\tab", "new\nline"],
                        "item": ["a", "b", "c", "d"], "relevance": [1, 1, 1, 1],
                        "[/]": [0.1, 0.2, 0.3, 0.4], "m|2": [0.4, 0.3, 0.2, 0.1]})


def test_rich_table_prints_markup_as_text(tmp_path, capsys):
    path = tmp_path / "h.parquet"
    HOSTILE.to_parquet(path)
    code = main(["evaluate", str(path), "--score", "[/]", "--score", "m|2", "-m", "P@1", "--per-query"])
    out = capsys.readouterr().out
    assert code == 0 and "[bold]q[/]" in out and "[/]" in out and "t\\tab" in out and "new\\nline" in out


def test_markdown_escapes_ids(tmp_path, capsys):
    path = tmp_path / "h.parquet"
    HOSTILE.to_parquet(path)
    main(["evaluate", str(path), "--score", "m|2", "-m", "P@1", "--per-query", "--format", "markdown"])
    out = capsys.readouterr().out
    assert "<script>" not in out and "&lt;script&gt;" in out and "m\\|2" in out and "a\\|b" in out
    rows = [line for line in out.split("\n\n")[0].splitlines() if line.startswith("|")]  # the per-query table
    assert len(rows) == 2 + 4 and all(line.count("|") - line.count("\\|") == 4 for line in rows)


def test_trec_format_refuses_ids_that_whitespace_would_split(tmp_path, capsys):
    path = tmp_path / "h.parquet"
    HOSTILE.to_parquet(path)
    code = main(["evaluate", str(path), "--score", "m|2", "-m", "P@1", "--per-query", "--format", "trec"])
    assert code == 2 and "cannot be written as a trec_eval line" in capsys.readouterr().err


def test_json_per_query_with_bytes_and_timestamp_ids(tmp_path, capsys):
    for ids in ([b"x", b"y"], pd.to_datetime(["2020-01-01", "2020-01-02"]), pd.to_timedelta([1, 2], unit="s")):
        path = tmp_path / "ids.parquet"
        pd.DataFrame({"query": ids, "relevance": [1, 1], "score": [0.1, 0.2]}).to_parquet(path)
        assert main(["evaluate", str(path), "-m", "P@1", "--per-query", "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["per_query"]
        assert len(rows) == 2 and all(isinstance(r["query"], str) for r in rows)


# ---------------------------------------------------------------------------------------------
# the same question on every path gives the same Results, in every output format


def _catalogue(seed=0, users=7, items=6):
    rng = np.random.default_rng(seed)
    scores = {m: rng.integers(0, 4, (users, items)) / 2 for m in ("old", "new")}
    grades = rng.choice([0, 0, 1, 2], (users, items))
    grades[:, 0] = np.maximum(grades[:, 0], 1)  # every user has a relevant item
    u, i = np.nonzero(np.ones((users, items), bool))
    long = pd.DataFrame({"user": u, "item": i, "relevance": grades[u, i],
                         "old": scores["old"][u, i], "new": scores["new"][u, i]})
    return long, scores, grades


METRICS = ["recall@2", "P@3", "ndcg@3", "r_precision", "ap", "num_rel_ret"]


def _paths(tmp_path):
    long, scores, grades = _catalogue()
    parquet = tmp_path / "log.parquet"
    long.to_parquet(parquet, row_group_size=9)
    qrels = long[long["relevance"] > 0][["user", "item", "relevance"]]
    run = long[["user", "item", "old", "new"]]
    kw = dict(metrics=METRICS, query="user", score=["old", "new"], item="item")
    return {
        "memory": tk.evaluate(long, **kw),
        "streamed": tk.evaluate(parquet, chunk_rows=10, **kw),
        "streamed_sums": tk.evaluate(parquet, chunk_rows=10, keep_per_query=False, **kw),
        "qrels": tk.evaluate(run, qrels=qrels, **kw),
        "matrix": tk.evaluate_matrix(scores["old"], grades, METRICS),
    }


def test_every_path_gives_the_same_results(tmp_path):
    results = _paths(tmp_path)
    ref = results["memory"]
    for name, res in results.items():
        models = ["old"] if name == "matrix" else ref.models
        got = res.summary.loc[[m for m in res.models]].rename(index={"scores": "old"})
        pd.testing.assert_frame_equal(got.loc[models], ref.summary.loc[models], rtol=1e-12, check_names=False)
        assert set(res.info) >= {"queries", "evaluated", "skipped_empty", "rows", "evaluated_per_model",
                                 "rows_per_model", "ties_at_cutoff", "models", "metrics", "conventions"}, name
        for key in ("queries", "evaluated", "skipped_empty", "rows"):
            assert isinstance(res.info[key], int), (name, key)
        assert res.info["queries"] == ref.info["queries"] and res.info["evaluated"] == ref.info["evaluated"], name
        assert res.info["rows"] == len(_catalogue()[0]) or name == "qrels"
        assert res.query_name == "user" and res.per_query.columns[1] == "user"
        if name != "streamed_sums":
            pq = res.per_query.replace({"model": {"scores": "old"}}).sort_values(["model", "user"])
            want = ref.per_query[ref.per_query["model"].isin(models)].sort_values(["model", "user"])
            np.testing.assert_allclose(pq[ref.metrics].to_numpy(float), want[ref.metrics].to_numpy(float), rtol=1e-12)
    for name in ("memory", "streamed", "qrels"):  # diff names the items gained and lost on every path
        diff = results[name].diff("old", "new", "recall@2")
        assert {"gained", "lost"} <= set(diff.columns), name
        pd.testing.assert_frame_equal(diff.sort_values("user").reset_index(drop=True),
                                      results["memory"].diff("old", "new", "recall@2").sort_values("user")
                                      .reset_index(drop=True), check_like=True)


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown", "trec"])
def test_every_path_in_every_format(tmp_path, fmt):
    import io

    from topkeval.cli import _emit_results

    for name, res in _paths(tmp_path).items():
        out = io.StringIO()
        _emit_results(res, fmt, name != "streamed_sums", out)
        text = out.getvalue()
        assert "P@3" in text or "P_3" in text, name
        if fmt == "json":
            assert json.loads(text)["summary"] == json.loads(json.dumps(res.to_dict()["summary"]))
        if fmt == "trec":
            lines = [line.split("\t") for line in text.splitlines()]
            num_q = [v for k, q, v in lines if k.strip() == "num_q"]
            num_rel_ret = [v for k, q, v in lines if k.strip() == "num_rel_ret" and q == "all"]
            assert num_q[0] == "7", name  # 7 users on every path, streamed sums included
            assert num_rel_ret[0] == str(int(_catalogue()[0].query("relevance > 0").shape[0])), name


# ---------------------------------------------------------------------------------------------
# parameters of every kind: a clear error, numpy scalars accepted

RES = tk.evaluate(LOG.assign(s2=[0.1, 0.2, 0.3, 0.4]), score=["score", "s2"], metrics=["P@1"])

PARAMETERS = [
    (lambda: tk.recall_at_k([1, 0], [1, 2], None), tk.ParameterError, "'k' parameter of recall_at_k must be a positive"),
    (lambda: tk.recall_at_k([1, 0], [1, 2], 2**63), tk.ParameterError, "at most"),
    (lambda: tk.recall_at_k([1, 0], [1, 2], "3"), tk.ParameterError, "positive int"),
    (lambda: tk.evaluate(LOG, ["recall@²"]), tk.UnknownMetricError, "positive integer"),
    (lambda: tk.evaluate(LOG, ["recall@٣"]), tk.UnknownMetricError, "positive integer"),
    (lambda: tk.evaluate(LOG, [f"recall@{2**63}"]), tk.UnknownMetricError, "at most"),
    (lambda: tk.evaluate(LOG, ["fbeta(beta=inf)@2"]), tk.UnknownMetricError, "positive finite"),
    (lambda: tk.evaluate(LOG, ["ndcg(gain={1:x})@2"]), tk.UnknownMetricError, "map of grades to gains"),
    (lambda: tk.evaluate(LOG, ["ndcg(p=1)@2"]), tk.UnknownMetricError, "no parameter 'p'"),
    (lambda: tk.evaluate(LOG, score=None), tk.ParameterError, "'score' parameter of evaluate"),
    (lambda: tk.evaluate(LOG, score=[None]), tk.ParameterError, "'score' parameter"),
    (lambda: tk.evaluate(LOG, item=5), tk.ParameterError, "'item' parameter"),
    (lambda: tk.evaluate(LOG, query=["query"]), tk.ParameterError, "'query' parameter"),
    (lambda: tk.evaluate(LOG, threads=0), tk.ParameterError, "'threads' parameter"),
    (lambda: tk.evaluate(LOG, depth=2.0, ties="first"), tk.ParameterError, "'depth' parameter"),
    (lambda: tk.evaluate(LOG, ascending="yes"), tk.ParameterError, "True or False"),
    (lambda: tk.evaluate(LOG, tie="first"), tk.ParameterError, "unexpected keyword 'tie'.*Did you mean 'ties'"),
    (lambda: tk.evaluate(LOG, chunkrows=5), tk.ParameterError, "Did you mean 'chunk_rows'"),
    (lambda: tk.evaluate(LOG, chunk_rows=5), tk.ParameterError, "streams a parquet or CSV file"),
    (lambda: tk.evaluate(LOG, discount="log10"), tk.ParameterError, "'discount' parameter"),
    (lambda: tk.evaluate(LOG, ascending=True, score_threshold=0.2), tk.ParameterError, "ascending"),
    (lambda: tk.evaluate(["/no/such.run"], qrels=LOG), tk.InputFileError, "Run file not found"),
    (lambda: RES.compare(seed="x"), tk.ParameterError, "'seed' parameter of compare"),
    (lambda: RES.compare(seed=-1), tk.ParameterError, "'seed' parameter"),
    (lambda: RES.compare(n_resamples=0), tk.ParameterError, r"'n_resamples' parameter of compare must be an int in \[100, 10000000\]"),
    (lambda: RES.compare(n_resamples=-5), tk.ParameterError, "'n_resamples'"),
    (lambda: RES.compare(n_resamples=2.5), tk.ParameterError, "'n_resamples'"),
    (lambda: RES.compare(confidence=1.0), tk.ParameterError, "'confidence'"),
    (lambda: RES.compare(test="permutaton"), tk.ParameterError, "Did you mean 'permutation'"),
    (lambda: RES.summary_ci(seed="x"), tk.ParameterError, "'seed' parameter of summary_ci"),
    (lambda: RES.summary_ci(n_resamples=0), tk.ParameterError, "'n_resamples' parameter of summary_ci"),
    (lambda: RES.diff("score", "nope", "P@1"), tk.ParameterError, "not a model"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), np.eye(2, 3), batch_size=2.5), tk.ParameterError, "'batch_size'"),
]


@pytest.mark.parametrize("call,exc,pattern", PARAMETERS)
def test_parameters_give_clear_errors(call, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert isinstance(info.value, tk.TopkevalError)


def test_empty_parquet_streamed_is_an_error(tmp_path):
    path = tmp_path / "empty.parquet"
    LOG.iloc[:0].to_parquet(path)
    for kw in ({}, {"chunk_rows": 10}):
        with pytest.raises(tk.DataError, match="empty|no rows"):
            tk.evaluate(path, item="item", **kw)


def test_numpy_scalars_are_accepted():
    a = tk.evaluate_matrix(np.random.default_rng(0).random((3, 4)), np.eye(3, 4), batch_size=np.int64(2),
                           threads=np.int32(1))
    assert a.info["evaluated"] == 3
    assert RES.summary_ci(confidence=np.float32(0.9), n_resamples=np.int64(200), seed=np.int64(1)).shape[0] == 2
    assert RES.compare(confidence=np.float32(0.9), n_resamples=np.int64(200)).shape[0] == 1
    assert tk.recall_at_k([1, 0], [1, 2], np.int64(1)) == 0.0
    assert tk.fbeta_at_k([1, 0, 1], [3, 2, 1], 2, beta=np.float32(2.0)) > 0


def test_extreme_beta_is_finite():
    ranking = ([1, 0, 1], [3, 2, 1])
    assert tk.fbeta_at_k(*ranking, 2, beta=1e200) == tk.recall_at_k(*ranking, 2)
    assert tk.fbeta_at_k(*ranking, 2, beta=1e-200) == tk.precision_at_k(*ranking, 2)
    res = tk.evaluate(LOG, ["fbeta(beta=1e200)@2", "recall@2"])
    assert res.summary.iloc[0, 0] == res.summary.iloc[0, 1]


def test_every_metric_the_tool_prints_parses(capsys):
    assert main(["metrics"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]  # not formulas
    assert len(lines) == len(tk.FAMILIES)
    for line in lines:
        name, also = line.split()[0], line.split("(also: ")[-1].rstrip(")").split(", ") if "(also:" in line else []
        tk.parse_metric(name)
        for alias in also:
            alias = alias.split(" = ")[0]  # another tool's name for the family with set parameters
            metric = alias if tk.FAMILIES[tk.parse_metric(name).family].cutoff != "required" else alias + "@5"
            try:
                tk.parse_metric(metric)
            except tk.UnknownMetricError:
                tk.parse_metric(alias)  # an alias that takes no cutoff
    for fam in tk.FAMILIES.values():
        for example in fam.examples():
            assert str(tk.parse_metric(str(tk.parse_metric(example)))) == str(tk.parse_metric(example))
    with pytest.raises(tk.UnknownMetricError) as info:
        tk.parse_metric("ndgc@10")
    for suggestion in str(info.value).split("Did you mean ")[1].split("?")[0].split(" or "):
        tk.parse_metric(suggestion.strip("'"))  # every suggestion parses


# ---------------------------------------------------------------------------------------------
# threads


def test_concurrent_evaluations_with_mixed_settings():
    rng = np.random.default_rng(0)
    n = 300_000  # large enough for the threaded kernel paths
    frame = pd.DataFrame({"query": np.repeat(np.arange(n // 50), 50), "relevance": rng.random(n) < 0.1,
                          "a": rng.random(n), "b": rng.integers(0, 5, n).astype(float)})
    want = {t: tk.evaluate(frame, ["recall@10", "ndcg@5"], score=["a", "b"], ties=t).summary
            for t in ("expected", "first")}
    errors, results = [], {}

    def work(i):
        try:
            ties = ("expected", "first")[i % 2]
            results[i] = (ties, tk.evaluate(frame, ["recall@10", "ndcg@5"], score=["a", "b"], ties=ties,
                                            threads=1 + i % 4).summary)
        except Exception as exc:  # any error in a thread fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for ties, summary in results.values():
        pd.testing.assert_frame_equal(summary, want[ties])


# ---------------------------------------------------------------------------------------------
# the command line: its own words, its own exits


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "topkeval", *map(str, args)], capture_output=True, text=True)


def test_cli_pipe_closed_early_is_not_an_error():
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m topkeval demo --queries 50 | head -1"],
                          capture_output=True, text=True)
    # nothing on stderr but, on a slow or loaded machine, the notice that the kernels compile (or load slowly)
    other = [line for line in proc.stderr.splitlines() if not line.startswith("topkeval: compiling its kernels")]
    assert proc.returncode == 0 and proc.stdout.startswith("Example log") and other == [], proc.stderr


def test_cli_version_and_help():
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"topkeval {tk.__version__}"
    proc = _cli("evaluate", "--help")
    assert proc.returncode == 0 and "docs/" not in proc.stdout and "(default:" in proc.stdout
    proc = _cli("conventions")
    assert proc.returncode == 0 and "--nonpositive-scores" in proc.stdout and "trec_eval" in proc.stdout


@pytest.mark.parametrize("argv,pattern", [
    (["--empty-queries", "error"], "--empty-queries skip"),
    (["--depth", "2"], "pass --ties first"),
    (["--chunk-rows", "0"], "--chunk-rows option"),
    (["-m", "recall@10,P@5,banana"], "Unknown metric 'banana'"),
])
def test_cli_errors_use_the_flags(tmp_path, capsys, argv, pattern):
    path = tmp_path / "log.parquet"
    LOG.assign(relevance=[1, 0, 0, 0]).to_parquet(path)
    code = main(["evaluate", str(path), "--item", "item", *argv])
    err = capsys.readouterr().err
    assert code == 2 and pattern in err and "empty_queries=" not in err and "n_resamples" not in err


def test_cli_comma_separated_metrics_and_csv_chunks(tmp_path, capsys):
    path = tmp_path / "log.csv"
    LOG.to_csv(path, index=False)
    assert main(["evaluate", str(path), "-m", "recall@1,P@1", "-m", "ndcg(gain={1:3,2:7})@2", "--chunk-rows", "2",
                 "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload["summary"]["score"]) == ["recall@1", "P@1", "ndcg(gain={1:3,2:7})@2"]
    assert payload["info"]["chunks"] >= 2
    assert payload["summary"] == tk.evaluate(LOG, ["recall@1", "P@1", "ndcg(gain={1:3,2:7})@2"]).to_dict()["summary"]


def test_write_run_keeps_each_runs_tag(tmp_path):
    a = _write(tmp_path / "a.run", "q1 Q0 d1 1 0.5 runA\nq1 Q0 d2 2 0.4 runA\n")
    b = _write(tmp_path / "b.run", "q1 Q0 d2 1 0.5 runB\n")
    tk.write_run(tk.read_runs([a, b]), tmp_path / "both.run")
    back = tk.read_run(tmp_path / "both.run")
    assert sorted(set(back["run"])) == ["runA", "runB"] and len(back) == 3


def test_cli_warnings_are_one_line_in_flag_words(tmp_path, capsys):
    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)  # every query has exactly 2 candidates: looks truncated
    assert main(["evaluate", str(path), "-m", "recall@1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("topkeval: warning: Every query has exactly 2 candidates")
    assert "--qrels" in err[0] and "qrels=" not in err[0] and ".py" not in err[0]


def test_matrix_warns_when_held_out_items_are_excluded():
    truth = np.array([[1, 0, 1], [0, 1, 0]])
    with pytest.warns(tk.TopkevalWarning, match="1 held-out relevant"):
        res = tk.evaluate_matrix(np.ones((2, 3)), truth, ["recall@1"], exclude=np.array([[1, 0, 0], [0, 0, 0]]))
    assert res.info["matrix"]["relevant_excluded"] == 1


def test_cli_compare_on_trec_runs(tmp_path, capsys):
    a = _write(tmp_path / "a.run", "".join(f"q{q} Q0 d{i} {i} {1 - i / 10} bm25\n" for q in range(6) for i in range(5)))
    b = _write(tmp_path / "b.run", "".join(f"q{q} Q0 d{i} {i} {i / 10} dense\n" for q in range(6) for i in range(5)))
    qrels = _write(tmp_path / "qrels.txt", "".join(f"q{q} 0 d4 1\n" for q in range(6)))
    assert main(["compare", "--qrels", str(qrels), "--run", str(a), "--run", str(b), "--baseline", "bm25",
                 "-m", "P@1,rr", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["comparison"]
    assert {r["metric"] for r in rows} == {"P@1", "rr"} and all(r["model"] == "dense" for r in rows)
    # dense puts the relevant d4 first in all 6 queries, bm25 last: exact sign flips give p = 2/64
    assert [r["delta"] for r in rows] == [1.0, 0.8] and [r["wins"] for r in rows] == [6, 6]
    assert all(r["p_value"] == pytest.approx(2 / 64) for r in rows) and "verdict" in rows[0]
    res = tk.evaluate([a, b], qrels=qrels, metrics=["P@1"])  # the same in Python: a list of runs
    assert res.summary.loc["dense", "P@1"] == 1.0 and res.summary.loc["bm25", "P@1"] == 0.0


def test_ascending_scores_rank_low_first():
    ranked = LOG.assign(rank=[2, 3, 1, 2])  # lower is better
    a = tk.evaluate(ranked, ["P@1", "ndcg@2"], score="rank", ascending=True)
    b = tk.evaluate(ranked.assign(rank=-ranked["rank"]), ["P@1", "ndcg@2"], score="rank")
    pd.testing.assert_frame_equal(a.summary, b.summary)


def test_surprise_preset_on_clicks_warns():
    with pytest.warns(tk.TopkevalWarning, match="surprise preset .* threshold=1"):
        tk.evaluate(LOG, ["P@1"], conventions="surprise")


def test_p_values_at_the_floor_are_not_zero():
    from topkeval.outputs.text import p_value_text

    assert p_value_text(1 / 10_001, 10_000) == "< 1e-04" and p_value_text(0.5, 10_000) == "0.5000"
    row = RES.compare(n_resamples=100, test="permutation").iloc[0]
    assert row.p_value > 0  # a Monte Carlo p-value is never 0: (1 + count) / (1 + n)


def test_a_stacked_table_without_model_is_told_to_name_it(tmp_path, capsys):
    """Two models' rows stacked in one table, model= forgotten: the duplicate rows' refusal says to name the
    column that tells the models apart (in the command line's words there)."""
    log = pd.DataFrame({"model": ["a", "a", "b", "b"], "query": [1, 1, 1, 1], "item": [1, 2, 1, 2],
                        "score": [0.9, 0.1, 0.2, 0.8], "click": [0, 1, 0, 1]})
    with pytest.raises(tk.DataError, match=r"query 1 lists item 1 twice.*stacks the rows of several models.*"
                                           r"model='<column>'"):
        tk.evaluate(log, ["recall@1"], relevance="click", score="score", item="item")
    qrels = pd.DataFrame({"query": [1], "item": [2], "click": [1]})
    with pytest.raises(tk.DataError, match=r"twice.*stacks the rows of several models.*model='<column>'"):
        tk.evaluate(log, ["recall@1"], relevance="click", score="score", item="item", qrels=qrels)
    log.to_csv(tmp_path / "stacked.csv", index=False)
    assert main(["evaluate", str(tmp_path / "stacked.csv"), "--relevance", "click", "--item", "item"]) == 2
    assert "--model <column>" in capsys.readouterr().err


def test_rows_read_count_every_models_own_rows(tmp_path):
    """info['rows'] is the rows read: a wide table's rows (every model ranks them), all the rows of a stacked
    table (3 of model a, 2 of model b) and of several run files; per model in rows_per_model."""
    stacked = pd.DataFrame({"model": ["a", "a", "a", "b", "b"], "query": [1, 1, 2, 1, 2], "item": [1, 2, 1, 1, 1],
                            "score": [0.9, 0.1, 0.5, 0.3, 0.2]})
    qrels = pd.DataFrame({"query": [1, 2], "item": [1, 1], "relevance": [1, 1]})
    res = tk.evaluate(stacked, ["recall@1"], score="score", item="item", model="model", qrels=qrels)
    assert res.info["rows"] == 5 and res.info["rows_per_model"] == {"a": 3, "b": 2}
    wide = pd.DataFrame({"query": [1, 1, 2], "item": [1, 2, 1], "relevance": [1, 0, 1], "a": [0.9, 0.1, 0.5],
                         "b": [0.1, 0.9, 0.5]})
    assert tk.evaluate(wide, ["recall@1"], score=["a", "b"], item="item").info["rows"] == 3
    (tmp_path / "a.run").write_text("1 Q0 1 1 0.9 A\n1 Q0 2 2 0.1 A\n2 Q0 1 1 0.5 A\n")
    (tmp_path / "b.run").write_text("1 Q0 1 1 0.3 B\n2 Q0 1 1 0.2 B\n")
    (tmp_path / "qrels").write_text("1 0 1 1\n2 0 1 1\n")
    runs = tk.evaluate([tmp_path / "a.run", tmp_path / "b.run"], qrels=tmp_path / "qrels", metrics=["P@1"])
    assert runs.info["rows"] == 5


def test_trec_files_whose_query_column_is_named_like_a_result_column_are_told_to_pass_query(tmp_path):
    """TREC files have no column to rename: the refusal of query='model' says to pass another query=."""
    run = _write(tmp_path / "r.txt", "q1 Q0 d1 1 0.5 r\nq2 Q0 d1 1 0.5 r\n")
    qrels = _write(tmp_path / "q.txt", "q1 0 d1 1\nq2 0 d1 1\n")
    with pytest.raises(tk.ParameterError, match="for TREC files .* pass query='query'"):
        tk.evaluate(run, qrels=qrels, metrics=["P@1"], query="model")


def test_the_top_n_warning_names_the_metric_as_the_user_wrote_it():
    """The warning that a log of each query's top N cannot know R names the metric under the user's label."""
    log = pd.DataFrame({"query": np.repeat([1, 2], 3), "item": np.tile([1, 2, 3], 2), "relevance": [1, 0, 0, 0, 1, 0],
                        "score": [3.0, 2, 1, 3, 2, 1]})
    with pytest.warns(tk.TopkevalWarning, match="ndcg_cut_2 counts only"):
        tk.evaluate(log, ["ndcg_cut_2"], item="item")
